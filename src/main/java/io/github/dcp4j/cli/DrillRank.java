package io.github.dcp4j.cli;

import io.github.dcp4j.check.DrillOutcome;
import io.github.dcp4j.check.FaultDrill;
import io.github.dcp4j.engine.cuda.RankSetup;
import io.github.dcp4j.rendezvous.LauncherEnvironment;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

import java.time.Duration;
import java.util.concurrent.Callable;

@Command(name = "rank", mixinStandardHelpOptions = true,
        description = {
            "One rank of a fault drill: `dcp4j launch --nproc N [--keep-going] -- drill rank --kind K --victim R`"
                + " (kill needs --keep-going, so that launch lets the others time out). starve without a group runs"
                + " loopback, every rank in one launch of this process, the whole process starved.",
            "Prints one `" + DrillOutcome.MARKER + "` line of what this rank saw; `drill verdict` judges it."})
final class DrillRank implements Callable<Integer> {
    @Option(names = "--kind", required = true, description = "kill, skip or starve.")
    FaultDrill.Kind kind;

    @Option(names = "--victim", defaultValue = "3", description = "The rank that misbehaves, default ${DEFAULT-VALUE}.")
    int victim;

    @Option(names = "--timeout", defaultValue = "5s", converter = DurationConverter.class,
            description = "How long a rank waits for a peer, default ${DEFAULT-VALUE}.")
    Duration timeout;

    @Option(names = "--active-threads", defaultValue = "5",
            description = "starve: the victim's " + FaultDrill.ACTIVE_THREAD_PERCENTAGE + ", 1..100, default"
                    + " ${DEFAULT-VALUE}.")
    int activeThreads;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        if (activeThreads < 1 || activeThreads > 100) {
            throw new ParameterException(spec.commandLine(), "--active-threads must be in [1, 100]; got "
                    + activeThreads);
        }
        boolean group = RankSetup.inEnvironment();
        if (!group && kind != FaultDrill.Kind.starve) {
            throw new ParameterException(spec.commandLine(), "drill rank --kind " + kind + " runs as a rank of a"
                    + " group: dcp4j launch --nproc N -- drill rank --kind " + kind);
        }
        int world = group ? LauncherEnvironment.of(System.getenv()).worldSize() : FaultDrill.LOOPBACK_RANKS;
        if (victim < 0 || victim >= world) {
            throw new ParameterException(spec.commandLine(), "--victim must be a rank of the group, in [0, "
                    + (world - 1) + "]; got " + victim);
        }
        new FaultDrill(kind, victim, timeout, activeThreads, spec.commandLine().getOut())
                .run(Log.to(spec.commandLine().getErr()));
        return 0;
    }
}
