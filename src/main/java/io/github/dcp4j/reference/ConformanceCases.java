package io.github.dcp4j.reference;

import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;

import java.lang.foreign.Arena;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.SplittableRandom;

/**
 * The conformance cases, defined once: the CPU engine's tests, the CUDA engine's tests and the {@code check} command
 * run this list, each with its own assertion (the CPU engine equals {@link ExactMerge} bit for bit; a CUDA engine is
 * within the fp64 oracle's tolerance and equals the CPU engine). A case is a sequence of calls on one workspace sized
 * for its largest call; every call's inputs follow from a seed, so that every rank of a multi-process group generates
 * the same group inputs without exchanging them.
 */
public final class ConformanceCases {
    /** The seed the engine tests use, and {@code check}'s default. */
    public static final long SEED = 2026;

    private ConformanceCases() {
    }

    /**
     * One call's inputs, every rank's: {@code partial_o [T, H, cp, D]} and {@code partial_lse [T, H, cp]}.
     *
     * @param partialO   rank r's partial outputs at index r
     * @param partialLse rank r's log-sum-exps at index r
     */
    public record GroupInputs(List<TensorView> partialO, List<TensorView> partialLse) {
        /** The inputs, both lists copied. */
        public GroupInputs {
            partialO = List.copyOf(partialO);
            partialLse = List.copyOf(partialLse);
        }
    }

    /** What a case's LSE rows hold. */
    public enum LseRows {
        /** ~ 3 x N(0, 1) everywhere. */
        RANDOM,
        /**
         * As RANDOM, except on every rank: row (0, 0) -inf for every source (an empty row: zeros), row (0, 1) NaN for
         * the even sources (no weight), row (1, 2) +inf for the rank's own source (no weight). Needs 2 tokens and 3
         * heads.
         */
        SPECIAL
    }

    /**
     * One case.
     *
     * @param name    what it covers, as the runners report it
     * @param heads   heads each rank owns (H)
     * @param headDim elements of one head (D)
     * @param dtype   fp16 or bf16
     * @param mode    the LSEs' base
     * @param strided inputs as views {@code [T, H, cp, D]} of attention outputs {@code [T, cp x H, D]} (else packed)
     * @param rows    which LSE values the rows carry (random, or the special NaN and infinity rows)
     * @param tokens  the tokens of each call, in order, on one workspace
     */
    public record Case(String name, int heads, int headDim, DType dtype, LseMode mode, boolean strided, LseRows rows,
                       List<Integer> tokens) {
        /** A case, checked: at least one call, and what the special rows need. */
        public Case {
            tokens = List.copyOf(tokens);
            if (tokens.isEmpty()) {
                throw new IllegalArgumentException("a case makes at least one call");
            }
            if (rows == LseRows.SPECIAL && (Collections.min(tokens) < 2 || heads < 3)) {
                throw new IllegalArgumentException("special LSE rows need 2 tokens and 3 heads; got " + tokens
                        + " tokens, " + heads + " heads");
            }
        }

        /**
         * The workspace of the case's calls for {@code cp} ranks: sized for its largest call.
         *
         * @param cp ranks in the group
         * @return the spec
         */
        public WorkspaceSpec spec(int cp) {
            return new WorkspaceSpec(Collections.max(tokens), heads, cp, headDim, dtype);
        }

        /**
         * The spec of call {@code call} alone (its own token count), for a reference engine sized to it.
         *
         * @param cp   ranks in the group
         * @param call the call's index in {@link #tokens()}
         * @return the spec
         */
        public WorkspaceSpec callSpec(int cp, int call) {
            return new WorkspaceSpec(tokens.get(call), heads, cp, headDim, dtype);
        }

        /**
         * Call {@code call}'s inputs for {@code cp} ranks, the same for every {@code seed}, case and call.
         *
         * @param arena where the inputs' memory comes from
         * @param seed  the run's seed
         * @param cp    ranks in the group
         * @param call  the call's index in {@link #tokens()}
         * @return every rank's inputs
         */
        public GroupInputs inputs(Arena arena, long seed, int cp, int call) {
            SplittableRandom random = new SplittableRandom(seed * 1_000_003L + name.hashCode() * 31L + call);
            List<TensorView> o = new ArrayList<>();
            List<TensorView> lse = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                RandomInputs in = RandomInputs.attention(arena, random.split(), tokens.get(call), heads, cp, headDim,
                        dtype, 3.0);
                TensorView pl = strided ? in.partialLse() : in.partialLse().contiguousCopy(arena);
                if (rows == LseRows.SPECIAL) {
                    for (int p = 0; p < cp; p++) {
                        pl.setFloat(Float.NEGATIVE_INFINITY, 0, 0, p);
                        if (p % 2 == 0) {
                            pl.setFloat(Float.NaN, 0, 1, p);
                        }
                    }
                    pl.setFloat(Float.POSITIVE_INFINITY, 1, 2, r);
                }
                o.add(strided ? in.partialO() : in.partialO().contiguousCopy(arena));
                lse.add(pl);
            }
            return new GroupInputs(o, lse);
        }

        @Override
        public String toString() {
            return name;
        }
    }

    /** {@return every case} */
    public static List<Case> all() {
        List<Case> cases = new ArrayList<>();
        for (DType dtype : new DType[] {DType.BF16, DType.FP16}) {
            for (LseMode mode : LseMode.values()) {
                String of = ", " + dtype.name().toLowerCase() + " " + mode.spelling();
                // three calls: the slots alternate 0, 1, 0
                cases.add(new Case("NaN, +inf and -inf LSE rows, packed" + of, 3, 128, dtype, mode, false,
                        LseRows.SPECIAL, List.of(2, 2, 2)));
                for (int[] hd : new int[][] {{16, 512}, {2, 128}, {4, 64}}) {
                    cases.add(new Case("strided views, H " + hd[0] + " D " + hd[1] + ", 1, 3, 8 tokens" + of, hd[0],
                            hd[1], dtype, mode, true, LseRows.RANDOM, List.of(1, 3, 8)));
                }
            }
        }
        cases.add(new Case("row counts 7, 1, 32, 3, 1, 32, 2 on one workspace, H 16 D 512, bf16 base2", 16, 512,
                DType.BF16, LseMode.BASE2, true, LseRows.RANDOM, List.of(7, 1, 32, 3, 1, 32, 2)));
        return List.copyOf(cases);
    }
}
