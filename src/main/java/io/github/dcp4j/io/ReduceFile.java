package io.github.dcp4j.io;

import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Objects;
import java.util.SequencedMap;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The op over a safetensors file, for every rank of a group in this process: the input holds {@code partial_o.<r>}
 * ({@code [T, H, cp, D]}, F16 or BF16) and {@code partial_lse.<r>} ({@code [T, H, cp]}, F32) for r = 0..cp-1, checked
 * to agree; the output gets {@code out.<r>} ({@code [T*H, D]}, partial_o's dtype) for every rank, written whole or not
 * at all. The tokens run in as few calls as keep the group's workspaces within half the input, so that the memory
 * held stays within about twice the input (the tensors read in, the outputs, the workspaces); rows are independent, so
 * the outputs do not depend on the split.
 */
public final class ReduceFile {
    private static final Pattern PARTIAL = Pattern.compile("partial_(o|lse)\\.(\\d+)");

    private ReduceFile() {
    }

    /**
     * What a run did: the input's shape and the calls it took.
     *
     * @param ranks   cp: the ranks of the group, one pair of partial tensors each
     * @param rows    rows per rank, T * H
     * @param headDim D
     * @param dtype   partial_o's dtype, and the outputs'
     * @param calls   the group's calls, one per share of the tokens
     */
    public record Result(int ranks, long rows, long headDim, DType dtype, int calls) {
    }

    /**
     * Reads {@code input}, runs the op for every rank on a group {@code openGroup} opens for the call size chosen here,
     * and writes every rank's output to {@code output} (replaced where it exists; nothing is written on error).
     *
     * @param input     the safetensors file of every rank's partial tensors
     * @param output    the safetensors file to write
     * @param mode      the base of the LSEs
     * @param openGroup opens a group of every rank for the workspace spec given (the largest call it makes); the group
     *                  is closed here
     * @return the input's shape and the calls made
     * @throws IOException          where a file cannot be read or written
     * @throws SafeTensorsException where the input is malformed or does not hold the tensors described above, naming
     *                              the file and what is wrong
     */
    public static Result run(Path input, Path output, LseMode mode, Function<WorkspaceSpec, LocalGroup> openGroup)
            throws IOException {
        Objects.requireNonNull(input, "input");
        Objects.requireNonNull(output, "output");
        Objects.requireNonNull(mode, "mode");
        Objects.requireNonNull(openGroup, "openGroup");
        try (Arena arena = Arena.ofShared()) {
            SafeTensors.Contents contents = SafeTensors.read(input, arena);
            int cp = countRanks(input, contents);
            List<TensorView> partialO = new ArrayList<>();
            List<TensorView> partialLse = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                partialO.add(tensor(input, contents, "partial_o." + r));
                partialLse.add(tensor(input, contents, "partial_lse." + r));
            }
            long[] shape = requireConsistent(input, partialO, partialLse, cp);
            int tokens = (int) shape[0];
            int heads = (int) shape[1];
            DType dtype = partialO.getFirst().dtype();
            int chunk = tokensPerCall(tokens, heads, cp, (int) shape[3], dtype);
            WorkspaceSpec ws = new WorkspaceSpec(chunk, heads, cp, (int) shape[3], dtype);
            List<TensorView> outs = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                outs.add(TensorView.allocate(arena, dtype, (long) tokens * heads, shape[3]));
            }
            try (LocalGroup group = openGroup.apply(ws)) {
                for (int t0 = 0; t0 < tokens; t0 += chunk) {
                    int n = Math.min(chunk, tokens - t0);
                    group.reduceAll(slice(partialO, t0, n), slice(partialLse, t0, n),
                            slice(outs, (long) t0 * heads, (long) n * heads), mode);
                }
            }
            SequencedMap<String, TensorView> result = new LinkedHashMap<>();
            for (int r = 0; r < cp; r++) {
                result.put("out." + r, outs.get(r));
            }
            SafeTensors.write(output, result);
            return new Result(cp, shape[0] * shape[1], shape[3], dtype, (tokens + chunk - 1) / chunk);
        }
    }

    /**
     * Tokens per call: all of them where the group's workspaces (two slots of every source's lines, on every rank,
     * about 2.3x the input) take at most half the input's bytes, else fewer, so that the memory held stays within
     * about twice the input (the input read in, the outputs, the workspaces). Rows are independent, so the outputs
     * are the same however the tokens are split.
     */
    static int tokensPerCall(int tokens, int heads, int cp, int headDim, DType dtype) {
        long inputBytes = (long) cp * tokens * heads * cp * headDim * dtype.bytes();  // every rank's partial_o
        long workspacesPerToken = (long) cp * new WorkspaceSpec(1, heads, cp, headDim, dtype).bytes();
        return Math.clamp(inputBytes / 2 / workspacesPerToken, 1, tokens);
    }

    /** Indices [from, from + n) of each tensor's first dimension (tokens of an input, rows of an output). */
    private static List<TensorView> slice(List<TensorView> tensors, long from, long n) {
        List<TensorView> part = new ArrayList<>();
        for (TensorView t : tensors) {
            long[] shape = t.shape();
            shape[0] = n;
            part.add(new TensorView(t.memory(), t.dtype(), shape, t.strides(), t.offset() + from * t.strides()[0]));
        }
        return part;
    }

    /** cp = the number of partial_o.r tensors; every partial_* name must be partial_o.r / partial_lse.r, r < cp. */
    private static int countRanks(Path input, SafeTensors.Contents contents) {
        int cp = 0;
        for (SafeTensors.Entry e : contents.entries()) {
            Matcher m = PARTIAL.matcher(e.name());
            if (m.matches() && m.group(1).equals("o")) {
                cp++;
            }
        }
        if (cp == 0) {
            throw new SafeTensorsException(input + ": holds no partial_o.<r> tensor (expected partial_o.0 .."
                    + " partial_o.<cp-1> and partial_lse.0 .. partial_lse.<cp-1>)");
        }
        for (SafeTensors.Entry e : contents.entries()) {
            Matcher m = PARTIAL.matcher(e.name());
            if (m.matches() && (m.group(2).length() > 2 || Integer.parseInt(m.group(2)) >= cp
                    || (m.group(2).length() > 1 && m.group(2).startsWith("0")))) {
                throw new SafeTensorsException(input + ": tensor '" + e.name() + "' does not fit " + cp
                        + " partial_o tensors: ranks must be numbered 0.." + (cp - 1));
            }
        }
        return cp;
    }

    private static TensorView tensor(Path input, SafeTensors.Contents contents, String name) {
        SafeTensors.Entry entry = contents.entry(name);
        if (entry == null) {
            throw new SafeTensorsException(input + ": tensor '" + name + "' is missing");
        }
        TensorView t = contents.tensors().get(name);
        boolean lse = name.startsWith("partial_lse");
        if (t == null || (lse ? t.dtype() != DType.FP32 : !t.dtype().isHalf())) {
            throw new SafeTensorsException(input + ": tensor '" + name + "' has dtype " + entry.dtype() + "; must be "
                    + (lse ? "F32" : "F16 or BF16"));
        }
        return t;
    }

    /** Checks the shapes the op needs and that every rank agrees; returns [T, H, cp, D]. */
    private static long[] requireConsistent(Path input, List<TensorView> partialO, List<TensorView> partialLse,
                                            int cp) {
        long[] shape = partialO.getFirst().shape();
        DType dtype = partialO.getFirst().dtype();
        if (shape.length != 4 || shape[2] != cp) {
            throw new SafeTensorsException(input + ": partial_o.0 must be [T, H, " + cp + ", D] for " + cp
                    + " ranks; got " + Arrays.toString(shape));
        }
        if (shape[0] * shape[1] == 0) {
            throw new SafeTensorsException(input + ": partial_o.0 " + Arrays.toString(shape) + " has zero rows;"
                    + " zero-token inputs are not supported");
        }
        if (shape[0] > Integer.MAX_VALUE || shape[1] > Integer.MAX_VALUE || shape[3] > Integer.MAX_VALUE
                || shape[0] * shape[1] > Integer.MAX_VALUE) {
            throw new SafeTensorsException(input + ": partial_o.0 " + Arrays.toString(shape) + " is too large");
        }
        long[] lseShape = Arrays.copyOf(shape, 3);
        for (int r = 0; r < cp; r++) {
            TensorView o = partialO.get(r);
            if (!Arrays.equals(o.shape(), shape) || o.dtype() != dtype) {
                throw new SafeTensorsException(input + ": partial_o." + r + " is " + o.dtype().safetensorsName()
                        + " " + Arrays.toString(o.shape()) + "; every rank must match partial_o.0, "
                        + dtype.safetensorsName() + " " + Arrays.toString(shape));
            }
            if (!Arrays.equals(partialLse.get(r).shape(), lseShape)) {
                throw new SafeTensorsException(input + ": partial_lse." + r + " is "
                        + Arrays.toString(partialLse.get(r).shape()) + "; must be " + Arrays.toString(lseShape));
            }
        }
        return shape;
    }
}
