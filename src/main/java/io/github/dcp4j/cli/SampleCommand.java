package io.github.dcp4j.cli;

import io.github.dcp4j.io.SafeTensors;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.reference.RandomInputs;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.SequencedMap;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;

@Command(name = "sample", mixinStandardHelpOptions = true,
        description = {"Writes a valid input for `reduce`: random attention outputs and LSEs of every rank, as"
                + " partial_o.<r> ([T, H, cp, D]) and partial_lse.<r> ([T, H, cp], F32), r = 0..cp-1.",
            "partial_o.<s>[..., p, :] is the slice rank s sends to rank p; `reduce` merges, for every rank p, the"
                + " slices p of every rank."})
final class SampleCommand implements Callable<Integer> {
    @Option(names = "--output", required = true, paramLabel = "FILE.safetensors", description = "File to write.")
    Path output;

    @Option(names = "--tokens", defaultValue = "2", description = "Tokens T, default ${DEFAULT-VALUE}.")
    int tokens;

    @Option(names = "--local-heads", defaultValue = "16", description = "Heads per rank H, default ${DEFAULT-VALUE}.")
    int localHeads;

    @Option(names = "--cp", defaultValue = "8", description = "Ranks cp, 1..64, default ${DEFAULT-VALUE}.")
    int cp;

    @Option(names = "--head-dim", defaultValue = "512", description = "Elements per head D, default ${DEFAULT-VALUE}.")
    int headDim;

    @Option(names = "--dtype", defaultValue = "bf16", converter = DTypeConverter.class,
            description = "bf16 or fp16, default ${DEFAULT-VALUE}.")
    DType dtype;

    @Option(names = "--seed", defaultValue = "2026", description = "Seed of the values, default ${DEFAULT-VALUE}.")
    long seed;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        try {
            new WorkspaceSpec(tokens, localHeads, cp, headDim, dtype);  // the op's own limits, one definition of each
        } catch (IllegalArgumentException e) {
            throw new ParameterException(spec.commandLine(), e.getMessage() + " (--tokens " + tokens
                    + " --local-heads " + localHeads + " --cp " + cp + " --head-dim " + headDim + ")", e);
        }
        SplittableRandom random = new SplittableRandom(seed);
        try (Arena arena = Arena.ofConfined()) {
            SequencedMap<String, TensorView> tensors = new LinkedHashMap<>();
            for (int r = 0; r < cp; r++) {
                RandomInputs in = RandomInputs.attention(arena, random.split(), tokens, localHeads, cp, headDim,
                        dtype, 3.0);
                tensors.put("partial_o." + r, in.partialO().contiguousCopy(arena));
                tensors.put("partial_lse." + r, in.partialLse().contiguousCopy(arena));
            }
            SafeTensors.write(output, tensors);
        }
        spec.commandLine().getErr().printf("sample: %d ranks x %d tokens x %d heads x head_dim %d (%s) -> %s%n", cp,
                tokens, localHeads, headDim, dtype.name().toLowerCase(), output);
        return 0;
    }
}
