package io.github.dcp4j.cli;

import io.github.dcp4j.check.DrillJudge;
import io.github.dcp4j.check.FaultDrill;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Callable;

@Command(name = "verdict", mixinStandardHelpOptions = true,
        description = {
            "Judges a fault drill from its log (launch's output, or a loopback drill's): prints `PASS <kind>` or"
                + " `FAIL <kind>: reasons`; exit code 0 for PASS, 1 for FAIL."})
final class DrillVerdict implements Callable<Integer> {
    @Option(names = "--kind", required = true, description = "kill, skip or starve.")
    FaultDrill.Kind kind;

    @Option(names = "--victim", defaultValue = "3", description = "The drill's victim, default ${DEFAULT-VALUE}.")
    int victim;

    @Option(names = "--nproc", defaultValue = "8", description = "Ranks of the group, default ${DEFAULT-VALUE}.")
    int nproc;

    @Option(names = "--timeout", defaultValue = "5s", converter = DurationConverter.class,
            description = "The drill's timeout, default ${DEFAULT-VALUE}.")
    Duration timeout;

    @Option(names = "--exit-code", required = true, description = "The drill command's exit code.")
    int exitCode;

    @Option(names = "--loopback", description = "A loopback drill (one process, one outcome for every rank).")
    boolean loopback;

    @Option(names = "--log", required = true, description = "The drill's log.")
    Path log;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        if (nproc < 1 || nproc > 64) {
            throw new ParameterException(spec.commandLine(), "--nproc must be in [1, 64]; got " + nproc);
        }
        if (victim < 0 || victim >= nproc) {
            throw new ParameterException(spec.commandLine(), "--victim must be in [0, " + (nproc - 1) + "]; got "
                    + victim);
        }
        List<String> reasons = DrillJudge.judge(kind, victim, nproc, timeout, exitCode, loopback,
                Files.readAllLines(log));
        spec.commandLine().getOut().println(reasons.isEmpty() ? "PASS " + kind
                : "FAIL " + kind + ": " + String.join("; ", reasons));
        return reasons.isEmpty() ? 0 : 1;
    }
}
