package io.github.dcp4j.op;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * What {@link Variant#AUTO} picks for a call: the variant of the last step whose bytes per rank are at most the
 * call's. A call's bytes per rank are its rows x cp x head_dim x element size: the partial outputs one rank holds.
 * Steps are measured by {@code bench --tune FILE} on the target GPU and shipped as the resource {@code
 * crossovers-sm_XX.txt} beside this class, one per architecture; where there is none, {@link #fallback()}.
 *
 * <p>File format: one step per line, {@code VARIANT FROM_BYTES_PER_RANK}, the first from 0, the bytes strictly
 * increasing; {@code #} starts a comment.
 *
 * @param steps  the steps, from 0 bytes per rank up
 * @param source where they come from (a resource, a file, or the fallback rule), for reports
 */
public record Crossovers(List<Step> steps, String source) {
    /**
     * One step: {@code variant} from {@code fromBytesPerRank} up to the next step's bytes.
     *
     * @param variant          a variant other than auto
     * @param fromBytesPerRank the smallest bytes per rank it takes
     */
    public record Step(Variant variant, long fromBytesPerRank) {
        /** A checked step. */
        public Step {
            Objects.requireNonNull(variant, "variant");
            if (variant == Variant.AUTO) {
                throw new IllegalArgumentException("a crossover step must name a variant other than auto; got auto");
            }
            if (fromBytesPerRank < 0) {
                throw new IllegalArgumentException("a crossover step's bytes per rank must be >= 0; got "
                        + fromBytesPerRank);
            }
        }
    }

    /** Checked steps: at least one, the first from 0, the bytes strictly increasing. */
    public Crossovers {
        steps = List.copyOf(steps);
        Objects.requireNonNull(source, "source");
        if (steps.isEmpty()) {
            throw new IllegalArgumentException(source + ": crossovers need at least one step; got none");
        }
        if (steps.getFirst().fromBytesPerRank() != 0) {
            throw new IllegalArgumentException(source + ": the first crossover step must start at 0 bytes per rank;"
                    + " got " + steps.getFirst().fromBytesPerRank());
        }
        for (int i = 1; i < steps.size(); i++) {
            if (steps.get(i).fromBytesPerRank() <= steps.get(i - 1).fromBytesPerRank()) {
                throw new IllegalArgumentException(source + ": crossover steps must have strictly increasing bytes"
                        + " per rank; got " + steps.get(i - 1).fromBytesPerRank() + " then "
                        + steps.get(i).fromBytesPerRank());
            }
        }
    }

    /**
     * The rule where no crossovers were measured for the architecture: ll128 at every size, the default variant and
     * the fastest at every layer batch where they were measured (sm_90, docs/PERFORMANCE.md "Variants").
     *
     * @return the fallback crossovers
     */
    public static Crossovers fallback() {
        return new Crossovers(List.of(new Step(Variant.LL128, 0)), "the fallback rule (ll128 at every size)");
    }

    /**
     * The resource name of an architecture's crossovers.
     *
     * @param computeCapability major x 10 + minor (90 for Hopper)
     * @return {@code crossovers-sm_90.txt} and so on
     */
    public static String resourceName(int computeCapability) {
        return "crossovers-sm_" + computeCapability + ".txt";
    }

    /**
     * The crossovers shipped for an architecture, or {@link #fallback()} where none are.
     *
     * @param computeCapability major x 10 + minor (90 for Hopper)
     * @return the crossovers auto uses on that architecture
     * @throws IllegalArgumentException where the shipped resource is malformed
     */
    public static Crossovers forArchitecture(int computeCapability) {
        String name = resourceName(computeCapability);
        try (InputStream in = Crossovers.class.getResourceAsStream(name)) {
            if (in == null) {
                return fallback();
            }
            return parse(new String(in.readAllBytes(), StandardCharsets.UTF_8), "resource " + name);
        } catch (IOException e) {
            throw new IllegalStateException("cannot read resource " + name + ": " + e.getMessage(), e);
        }
    }

    /**
     * Parses the file format (above).
     *
     * @param text   the file's text
     * @param source its name, for messages
     * @return the crossovers
     * @throws IllegalArgumentException naming the source, the line and what is wrong
     */
    public static Crossovers parse(String text, String source) {
        List<Step> steps = new ArrayList<>();
        String[] lines = text.split("\n", -1);
        for (int i = 0; i < lines.length; i++) {
            String line = lines[i].replaceFirst("#.*", "").strip();
            if (line.isEmpty()) {
                continue;
            }
            String[] cells = line.split("\\s+");
            String where = source + " line " + (i + 1);
            if (cells.length != 2) {
                throw new IllegalArgumentException(where + ": expected 'VARIANT FROM_BYTES_PER_RANK'; got '" + line
                        + "'");
            }
            long from;
            try {
                from = Long.parseLong(cells[1]);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(where + ": bytes per rank must be an integer; got '" + cells[1]
                        + "'", e);
            }
            try {
                steps.add(new Step(Variant.parse(cells[0]), from));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException(where + ": " + e.getMessage(), e);
            }
        }
        return new Crossovers(steps, source);
    }

    /**
     * The file format of these steps, with a comment line saying where they were measured.
     *
     * @param comment one line on how they were measured (device, date, command)
     * @return the text {@link #parse} reads back
     */
    public String format(String comment) {
        StringBuilder b = new StringBuilder("# dcp4j auto crossovers: VARIANT FROM_BYTES_PER_RANK (bytes per rank ="
                + " rows x cp x head_dim x element size)\n");
        b.append("# ").append(comment.replace('\n', ' ')).append('\n');
        for (Step s : steps) {
            b.append(s.variant().spelling()).append(' ').append(s.fromBytesPerRank()).append('\n');
        }
        return b.toString();
    }

    /**
     * The variant for a call.
     *
     * @param bytesPerRank the call's rows x cp x head_dim x element size
     * @return the variant of the last step from at most that many bytes
     */
    public Variant choose(long bytesPerRank) {
        Variant chosen = steps.getFirst().variant();
        for (Step s : steps) {
            if (s.fromBytesPerRank() <= bytesPerRank) {
                chosen = s.variant();
            }
        }
        return chosen;
    }

    /**
     * A call's bytes per rank, as {@link #choose} takes them.
     *
     * @param rows    the call's rows
     * @param cp      ranks in the group
     * @param headDim elements of one head
     * @param dtype   the element type
     * @return rows x cp x headDim x element size
     */
    public static long bytesPerRank(long rows, int cp, int headDim, DType dtype) {
        return rows * cp * headDim * dtype.bytes();
    }

    /**
     * Steps from measurements: the fastest variant at each measured size, merged where consecutive sizes agree; a
     * step starts at the first size its variant won (the smallest at 0).
     *
     * @param fastest the fastest variant at each measured bytes per rank, in increasing order of bytes
     * @param source  where the measurements come from
     * @return the crossovers
     */
    public static Crossovers fromFastest(List<Step> fastest, String source) {
        if (fastest.isEmpty()) {
            throw new IllegalArgumentException("crossovers need at least one measured size; got none");
        }
        List<Step> steps = new ArrayList<>();
        for (Step s : fastest) {
            if (steps.isEmpty()) {
                steps.add(new Step(s.variant(), 0));
            } else if (steps.getLast().variant() != s.variant()) {
                steps.add(s);
            }
        }
        return new Crossovers(steps, source);
    }
}
