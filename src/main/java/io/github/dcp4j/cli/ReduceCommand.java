package io.github.dcp4j.cli;

import io.github.dcp4j.Engines;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.io.SafeTensors;
import io.github.dcp4j.io.SafeTensorsException;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.SequencedMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

@Command(name = "reduce", mixinStandardHelpOptions = true,
        description = {
            "Runs the op for every rank on the tensors of a safetensors file (in as few calls as keep its memory"
                + " within about twice the input; the outputs do not depend on how the tokens are split).",
            "The input holds partial_o.<r> ([T, H, cp, D], F16 or BF16) and partial_lse.<r> ([T, H, cp], F32) for"
                + " r = 0..cp-1; the output gets out.<r> ([T*H, D], partial_o's dtype) for every rank. The output"
                + " file is written whole or not at all.",
            "Axes: partial_o.<s>[t, h, p, :] is the slice rank s sends to rank p (likewise partial_lse.<s>[t, h, p]);"
                + " out.<p>[t*H + h, :] merges the slices p of every rank s = 0..cp-1 (docs/CONTRACT.md)."
                + " `dcp4j sample` writes a valid input."})
final class ReduceCommand implements java.util.concurrent.Callable<Integer> {
    private static final Pattern PARTIAL = Pattern.compile("partial_(o|lse)\\.(\\d+)");

    @Option(names = "--input", required = true, paramLabel = "IN.safetensors", description = "Input file.")
    Path input;

    @Option(names = "--output", required = true, paramLabel = "OUT.safetensors", description = "Output file.")
    Path output;

    @Option(names = "--lse-mode", defaultValue = "base2", converter = LseModeConverter.class,
            description = "Base of the LSEs: base2 (default) or basee.")
    LseMode lseMode;

    @Option(names = "--engine", defaultValue = "auto", converter = EngineChoiceConverter.class,
            description = "Engine: auto (default: cuda where a GPU and driver are present, else cpu, as the main job),"
                    + " cpu, cuda (the GPU, all ranks in loopback) or tornado (a TornadoVM engine on the class path;"
                    + " dcp4j has none yet, so it is refused with the reason). cpu and cuda give the same outputs bit"
                    + " for bit.")
    Engines.Choice engine;

    @Option(names = "--timeout", defaultValue = "10s", converter = DurationConverter.class,
            description = "Longest wait for a peer's line, e.g. 500ms, 10s (default ${DEFAULT-VALUE}).")
    Duration timeout;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        if (Files.exists(output) && Files.exists(input) && Files.isSameFile(input, output)) {
            throw new IllegalArgumentException("--output " + output + " is the input file " + input
                    + "; write the output to another file");
        }
        try (Arena arena = Arena.ofShared()) {
            SafeTensors.Contents contents = SafeTensors.read(input, arena);
            int cp = countRanks(contents);
            List<TensorView> partialO = new ArrayList<>();
            List<TensorView> partialLse = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                partialO.add(tensor(contents, "partial_o." + r));
                partialLse.add(tensor(contents, "partial_lse." + r));
            }
            long[] shape = requireConsistent(partialO, partialLse, cp);
            int tokens = (int) shape[0];
            int heads = (int) shape[1];
            DType dtype = partialO.getFirst().dtype();
            int chunk = tokensPerCall(tokens, heads, cp, (int) shape[3], dtype);
            WorkspaceSpec ws = new WorkspaceSpec(chunk, heads, cp, (int) shape[3], dtype);
            List<TensorView> outs = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                outs.add(TensorView.allocate(arena, dtype, (long) tokens * heads, shape[3]));
            }
            try (LocalGroup group = Engines.openGroup(engine, ws, timeout)) {
                for (int t0 = 0; t0 < tokens; t0 += chunk) {
                    int n = Math.min(chunk, tokens - t0);
                    group.reduceAll(slice(partialO, t0, n), slice(partialLse, t0, n),
                            slice(outs, (long) t0 * heads, (long) n * heads), lseMode);
                }
            }
            SequencedMap<String, TensorView> result = new LinkedHashMap<>();
            for (int r = 0; r < cp; r++) {
                result.put("out." + r, outs.get(r));
            }
            SafeTensors.write(output, result);
            spec.commandLine().getErr().printf("reduce: %d ranks x %d rows x head_dim %d (%s, %s) on engine %s, %d"
                    + " call(s) -> %s%n", cp, shape[0] * shape[1], shape[3], dtype.name().toLowerCase(), lseMode,
                    Engines.resolve(engine).engine().spelling(), (tokens + chunk - 1) / chunk, output);
            return 0;
        }
    }

    /**
     * Tokens per call: all of them where the group's workspaces (two slots of every source's lines, on every rank,
     * about 2.3x the input) take at most half the input's bytes, else fewer, so that the command's memory stays within
     * about twice its input (the input read in, the outputs, the workspaces). Rows are independent, so the outputs
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
    private int countRanks(SafeTensors.Contents contents) {
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

    private TensorView tensor(SafeTensors.Contents contents, String name) {
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
    private long[] requireConsistent(List<TensorView> partialO, List<TensorView> partialLse, int cp) {
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
