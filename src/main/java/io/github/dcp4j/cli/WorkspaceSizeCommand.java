package io.github.dcp4j.cli;

import io.github.dcp4j.op.Crossovers;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.Variant;
import io.github.dcp4j.op.VariantWorkspace;
import io.github.dcp4j.op.WorkspaceSpec;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

import java.util.concurrent.Callable;

@Command(name = "workspace-size", mixinStandardHelpOptions = true,
        description = "Prints the bytes of one rank's workspace, alone on its line: 128 + 2 x cp x (max-tokens x"
                + " local-heads) x RowBytes (ll128, simple, unfused); ll: 128 + 2 x cp x rows x (2 x head-dim x"
                + " element size + 8); auto: the regions of every variant its crossovers for --sm may pick.")
final class WorkspaceSizeCommand implements Callable<Integer> {
    /** Compute capabilities as major x 10 + minor: major 1 to 99. */
    static final int MIN_SM = 10;
    static final int MAX_SM = 999;

    @Option(names = "--max-tokens", required = true, description = "Most tokens per call.")
    int maxTokens;

    @Option(names = "--local-heads", required = true, description = "Heads per rank (rows per token).")
    int localHeads;

    @Option(names = "--cp", required = true, description = "cp_size: ranks in the group, 1..64.")
    int cp;

    @Option(names = "--head-dim", required = true, description = "Elements per head.")
    int headDim;

    @Option(names = "--dtype", required = true, description = "bf16 or fp16.", converter = DTypeConverter.class)
    DType dtype;

    @Option(names = "--variant", defaultValue = "ll128", converter = VariantConverter.class,
            paramLabel = "ll128|ll|simple|unfused|auto", description = VariantConverter.DESCRIPTION)
    Variant variant;

    @Option(names = "--sm", defaultValue = "90", paramLabel = "CC",
            description = "For --variant auto: the compute capability whose crossovers it picks by (major x 10 +"
                    + " minor, " + MIN_SM + ".." + MAX_SM + "), default ${DEFAULT-VALUE}.")
    int sm;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        if (spec.commandLine().getParseResult().hasMatchedOption("--sm") && variant != Variant.AUTO) {
            throw new ParameterException(spec.commandLine(), "--sm applies to --variant auto only (the other"
                    + " variants' sizes do not depend on the GPU); got --sm " + sm + " with --variant " + variant);
        }
        if (sm < MIN_SM || sm > MAX_SM) {
            throw new ParameterException(spec.commandLine(), "--sm must be a compute capability as major x 10 + minor,"
                    + " in [" + MIN_SM + ", " + MAX_SM + "]; got " + sm);
        }
        long bytes;
        try {
            WorkspaceSpec ws = new WorkspaceSpec(maxTokens, localHeads, cp, headDim, dtype);
            bytes = VariantWorkspace.of(variant, Crossovers.forArchitecture(sm), ws).bytes();
        } catch (IllegalArgumentException e) {
            // the op's own limits, one definition of each; its message names the op's argument and its value
            throw new ParameterException(spec.commandLine(), e.getMessage() + " (--max-tokens " + maxTokens
                    + " --local-heads " + localHeads + " --cp " + cp + " --head-dim " + headDim + ")", e);
        }
        spec.commandLine().getOut().println(bytes);
        return 0;
    }
}
