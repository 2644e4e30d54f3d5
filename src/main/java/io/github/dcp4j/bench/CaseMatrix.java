package io.github.dcp4j.bench;

import io.github.dcp4j.op.Variant;

import java.util.ArrayList;
import java.util.List;

/** The benchmark's case matrix: upstream's reference shapes and the per-layer decode shape, by mode, L2 and inputs. */
public final class CaseMatrix {
    private CaseMatrix() {
    }

    /** batch x heads x head_dim of upstream's benchmark, packed input. */
    public static final int[][] REFERENCE_SHAPES = {{1, 2, 64}, {1, 8, 128}, {4, 8, 128}, {16, 8, 128}};
    /** The layer mode's shape (DeepSeek-V2 decode): 16 heads per rank, head_dim 512, strided input. */
    public static final int LAYER_HEADS = 16;
    /** The layer mode's head_dim. */
    public static final int LAYER_HEAD_DIM = 512;

    /**
     * The cases of {@code modes} (eager, graph, graph-50 on the reference shapes; layer over {@code batches}) for
     * every L2 state of {@code l2} (hot, flushed) and every input kind of {@code inputs} (host, device).
     *
     * @param modes   the modes' names
     * @param batches the layer mode's batches
     * @param cp      ranks in the group
     * @param l2      hot and/or flushed
     * @param inputs  host and/or device
     * @return the cases, in the order they run
     * @throws IllegalArgumentException naming an unknown mode, L2 state or input kind
     */
    public static List<Benchmark.Case> cases(List<String> modes, List<Integer> batches, int cp, List<String> l2,
                                             List<String> inputs) {
        List<Boolean> flushes = choices("--l2", l2, "hot", "flushed");
        List<Benchmark.Case> cases = new ArrayList<>();
        for (boolean device : choices("--inputs", inputs, "host", "device")) {
            casesOf(modes, batches, cp, flushes, device, cases);
        }
        return cases;
    }

    /**
     * As {@link #cases(List, List, int, List, List)}, each case once per variant of {@code variants}, one after the
     * other on the same inputs; unfused first where it is asked for, so that every other variant's row can be given
     * as a ratio to it as soon as it is measured.
     *
     * @param modes    the modes' names
     * @param batches  the layer mode's batches
     * @param cp       ranks in the group
     * @param l2       hot and/or flushed
     * @param inputs   host and/or device
     * @param variants the variants, each at most once
     * @return the cases, in the order they run
     * @throws IllegalArgumentException as above, or for no variant or one named twice
     */
    public static List<Benchmark.Case> cases(List<String> modes, List<Integer> batches, int cp, List<String> l2,
                                             List<String> inputs, List<Variant> variants) {
        if (variants.isEmpty() || variants.stream().distinct().count() != variants.size()) {
            throw new IllegalArgumentException("--variants must name each variant once; got " + variants);
        }
        List<Variant> order = new ArrayList<>(variants);
        if (order.remove(Variant.UNFUSED)) {
            order.addFirst(Variant.UNFUSED);
        }
        List<Benchmark.Case> cases = new ArrayList<>();
        for (Benchmark.Case c : cases(modes, batches, cp, l2, inputs)) {
            for (Variant v : order) {
                cases.add(c.withVariant(v));
            }
        }
        return cases;
    }

    /** Each of {@code values} as false ({@code off}) or true ({@code on}); anything else is refused, naming it. */
    private static List<Boolean> choices(String option, List<String> values, String off, String on) {
        List<Boolean> chosen = new ArrayList<>();
        for (String v : values) {
            if (!v.equals(off) && !v.equals(on)) {
                throw new IllegalArgumentException(option + " must be " + off + " and/or " + on + "; got '" + v + "'");
            }
            chosen.add(v.equals(on));
        }
        return chosen;
    }

    private static void casesOf(List<String> modes, List<Integer> batches, int cp, List<Boolean> flushes,
                                boolean device, List<Benchmark.Case> cases) {
        for (String name : modes) {
            Benchmark.Mode mode = Benchmark.Mode.parse(name);
            for (boolean flush : flushes) {
                if (mode == Benchmark.Mode.LAYER) {
                    for (int b : batches) {
                        if (b < 1) {
                            throw new IllegalArgumentException("--batches must all be >= 1; got " + b);
                        }
                        cases.add(new Benchmark.Case(mode, b, LAYER_HEADS, LAYER_HEAD_DIM, cp, true, flush, device));
                    }
                } else {
                    for (int[] s : REFERENCE_SHAPES) {
                        cases.add(new Benchmark.Case(mode, s[0], s[1], s[2], cp, false, flush, device));
                    }
                }
            }
        }
    }
}
