package io.github.dcp4j.cli;

import io.github.dcp4j.check.Soak;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.time.Duration;
import java.util.concurrent.Callable;

@Command(name = "soak", mixinStandardHelpOptions = true,
        description = {
            "Runs the op many times at the layer shape (16 heads per rank, head_dim 512, bf16, strided input) across"
                + " the 32-bit call counter's wrap (forced so that it comes halfway, at a call whose output is"
                + " checked) and checks the device status word after every " + Soak.GRAPH_CALLS + " calls,"
                + " the outputs of the last call on each distinct input in those " + Soak.GRAPH_CALLS
                + " against the CPU engine, bit for bit, and at the end that every rank's counter advanced by exactly"
                + " the calls made.",
            "Without a group in the environment: loopback, all --cp ranks in one launch on GPU 0. As one rank of a"
                + " group (`dcp4j launch --nproc N -- soak`, or torchrun): CUDA IPC, cp = the group's size.",
            "The calls are " + Soak.INPUTS + " calls on different inputs, captured " + Soak.GRAPH_CALLS
                + " launches to a CUDA graph and replayed. Progress goes to stderr; exit code 0 when every check"
                + " passed."})
final class SoakCommand implements Callable<Integer> {
    @Option(names = "--calls", defaultValue = "1000000",
            description = "Calls in all, a multiple of " + Soak.GRAPH_CALLS + " up to 2^31, default ${DEFAULT-VALUE}.")
    long calls;

    @Option(names = "--batch", defaultValue = "1", description = "Tokens per call, 1..64, default ${DEFAULT-VALUE}.")
    int batch;

    @Option(names = "--cp", defaultValue = "8", paramLabel = "CP",
            description = "Ranks in loopback, 2..8, default ${DEFAULT-VALUE} (a group's size otherwise).")
    int cpOption;

    @Option(names = "--timeout", defaultValue = "10s", converter = DurationConverter.class,
            description = "How long a rank waits for a peer (kernel and rendezvous), default ${DEFAULT-VALUE}.")
    Duration timeout;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        PrintWriter report = spec.commandLine().getOut();
        PrintWriter progress = spec.commandLine().getErr();
        if (calls < Soak.GRAPH_CALLS || calls % Soak.GRAPH_CALLS != 0 || calls > Soak.MAX_CALLS) {
            throw new ParameterException(spec.commandLine(), "--calls must be a positive multiple of "
                    + Soak.GRAPH_CALLS + " up to " + Soak.MAX_CALLS + " (the counter wraps once); got " + calls);
        }
        if (batch < 1 || batch > 64) {
            throw new ParameterException(spec.commandLine(), "--batch must be in [1, 64]; got " + batch);
        }
        if (cpOption < 2 || cpOption > 8) {
            throw new ParameterException(spec.commandLine(), "--cp must be in [2, 8]; got " + cpOption);
        }
        Soak.Result result = new Soak(calls, batch, timeout, progress).run(cpOption, Log.to(progress));
        report.println(result.summary());
        report.flush();
        return result.passed() ? 0 : 1;
    }
}
