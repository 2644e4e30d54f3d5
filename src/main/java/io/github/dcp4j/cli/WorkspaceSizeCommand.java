package io.github.dcp4j.cli;

import io.github.dcp4j.DcpLseReduce;
import io.github.dcp4j.op.DType;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

import java.util.concurrent.Callable;

@Command(name = "workspace-size", mixinStandardHelpOptions = true,
        description = "Prints the bytes of one rank's workspace, alone on its line: 128 + 2 x cp x (max-tokens x"
                + " local-heads) x RowBytes.")
final class WorkspaceSizeCommand implements Callable<Integer> {
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

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        long bytes;
        try {
            bytes = DcpLseReduce.workspaceSize(maxTokens, localHeads, cp, headDim, dtype);
        } catch (IllegalArgumentException e) {
            // the op's own limits, one definition of each; its message names the op's argument and its value
            throw new ParameterException(spec.commandLine(), e.getMessage() + " (--max-tokens " + maxTokens
                    + " --local-heads " + localHeads + " --cp " + cp + " --head-dim " + headDim + ")", e);
        }
        spec.commandLine().getOut().println(bytes);
        return 0;
    }
}
