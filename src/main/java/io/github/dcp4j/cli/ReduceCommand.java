package io.github.dcp4j.cli;

import io.github.dcp4j.Engines;
import io.github.dcp4j.io.ReduceFile;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.Variant;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

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
    @Option(names = "--input", required = true, paramLabel = "IN.safetensors", description = "Input file.")
    Path input;

    @Option(names = "--output", required = true, paramLabel = "OUT.safetensors", description = "Output file.")
    Path output;

    @Option(names = "--lse-mode", defaultValue = "base2", converter = LseModeConverter.class,
            description = "Base of the LSEs: base2 (default) or basee.")
    LseMode lseMode;

    @Option(names = "--engine", defaultValue = "auto", converter = EngineChoiceConverter.class,
            description = "Engine: auto (default: cuda where a GPU and driver are present, else cpu, as the main job),"
                    + " cpu, cuda (the GPU, all ranks in loopback) or tornado (the TornadoVM engine: the tornado jar"
                    + " on the class path, TornadoVM's argument file; else refused with the reason). cpu and cuda"
                    + " give the same outputs bit for bit; tornado's GPU tests check it against cpu the same way.")
    Engines.Choice engine;

    @Option(names = "--variant", defaultValue = "ll128", converter = VariantConverter.class,
            paramLabel = "ll128|ll|simple|unfused|auto", description = VariantConverter.DESCRIPTION)
    Variant variant;

    @Option(names = "--timeout", defaultValue = "10s", converter = DurationConverter.class,
            description = "Longest wait for a peer's line, e.g. 500ms, 10s (default ${DEFAULT-VALUE}).")
    Duration timeout;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        // the two options must name two files: the library would replace the input with its merge, as asked
        if (Files.exists(output) && Files.exists(input) && Files.isSameFile(input, output)) {
            throw new IllegalArgumentException("--output " + output + " is the input file " + input
                    + "; write the output to another file");
        }
        try {
            Engines.requireRuns(engine, variant);
        } catch (IllegalArgumentException e) {
            throw new ParameterException(spec.commandLine(), e.getMessage(), e);
        }
        ReduceFile.Result r = ReduceFile.run(input, output, lseMode,
                ws -> Engines.openGroup(engine, ws, timeout, variant));
        spec.commandLine().getErr().printf("reduce: %d ranks x %d rows x head_dim %d (%s, %s) on engine %s, variant"
                + " %s, %d call(s) -> %s%n", r.ranks(), r.rows(), r.headDim(), r.dtype().name().toLowerCase(), lseMode,
                Engines.resolve(engine).engine().spelling(), variant, r.calls(), output);
        return 0;
    }
}
