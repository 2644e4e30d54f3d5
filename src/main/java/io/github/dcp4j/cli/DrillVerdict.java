package io.github.dcp4j.cli;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

@Command(name = "verdict", mixinStandardHelpOptions = true,
        description = {
            "Judges a fault drill from its log (launch's output, or a loopback drill's): prints `PASS <kind>` or"
                + " `FAIL <kind>: reasons`; exit code 0 for PASS, 1 for FAIL."})
final class DrillVerdict implements Callable<Integer> {
    @Option(names = "--kind", required = true, description = "kill, skip or starve.")
    DrillCommand.Kind kind;

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
        List<String> reasons = judge(kind, victim, nproc, timeout, exitCode, loopback, Files.readAllLines(log));
        spec.commandLine().getOut().println(reasons.isEmpty() ? "PASS " + kind
                : "FAIL " + kind + ": " + String.join("; ", reasons));
        return reasons.isEmpty() ? 0 : 1;
    }

    /**
     * What is wrong with a drill's outcome; empty where it passed.
     *
     * @param lines the drill's log
     */
    static List<String> judge(DrillCommand.Kind kind, int victim, int nproc, Duration timeout, int exitCode,
                              boolean loopback, List<String> lines) {
        List<String> reasons = new ArrayList<>();
        Map<String, DrillOutcome> byRank = new LinkedHashMap<>();
        for (String line : lines) {
            try {
                DrillOutcome.parse(line).ifPresent(o -> {
                    String rank = o.get(DrillOutcome.RANK).orElse("?");
                    if (byRank.put(rank, o) != null) {
                        reasons.add("rank " + rank + " reported twice");
                    }
                });
            } catch (IllegalArgumentException e) {
                reasons.add(e.getMessage());
            }
        }
        int expectedExit = kind == DrillCommand.Kind.kill ? 1 : 0;
        if (exitCode != expectedExit) {
            reasons.add("exit code " + exitCode + ", expected " + expectedExit);
        }
        // a rank in loopback may wait out one timeout per rank before it: rank r's resident blocks wait for the
        // blocks of later ranks that cannot start until they give up
        long bound = (loopback ? nproc : 1) * timeout.toMillis() + DrillCommand.SLACK.toMillis();
        List<String> ranks = new ArrayList<>();
        if (loopback) {
            ranks.add(DrillOutcome.LOOPBACK_RANK);
        } else {
            for (int r = 0; r < nproc; r++) {
                ranks.add(Integer.toString(r));
            }
        }
        if (kind == DrillCommand.Kind.kill && !lines.stream().anyMatch(l -> l.startsWith("launch: rank " + victim
                + " (pid ") && l.contains("was killed by signal 9"))) {
            reasons.add("launch did not report rank " + victim + " killed by signal 9");
        }
        for (String rank : ranks) {
            DrillOutcome o = byRank.get(rank);
            if (o == null) {
                reasons.add("rank " + rank + " reported no outcome");
                continue;
            }
            if (!o.is(DrillOutcome.KIND, kind.name())) {
                reasons.add("rank " + rank + " ran drill " + o.get(DrillOutcome.KIND).orElse("?"));
                continue;
            }
            boolean isVictim = rank.equals(Integer.toString(victim));
            String problem = switch (kind) {
                case kill -> isVictim ? killedMidReplay(o) : timedOutNaming(o, victim, bound);
                case skip -> isVictim ? skipVictim(o) : skipSurvivor(o, victim, bound, timeout);
                case starve -> completedOrNamed(o, bound);
            };
            if (problem != null) {
                reasons.add("rank " + rank + ": " + problem + " (" + o.line() + ")");
            }
        }
        return reasons;
    }

    private static String killedMidReplay(DrillOutcome o) {
        if (!o.is(DrillOutcome.OUTCOME, DrillOutcome.KILLING_ITSELF)) {
            return "the victim did not reach its kill";
        }
        return o.is(DrillOutcome.IN_FLIGHT, true) ? null : "the victim's replay had ended before the kill";
    }

    private static String timedOutNaming(DrillOutcome o, int victim, long boundMs) {
        if (!o.is(DrillOutcome.OUTCOME, "PeerTimeoutException")) {
            return "ended in " + o.get(DrillOutcome.OUTCOME).orElse("?") + ", not PeerTimeoutException";
        }
        if (!o.is(DrillOutcome.SOURCE, victim)) {
            return "named source rank " + o.get(DrillOutcome.SOURCE).orElse("?") + ", not " + victim;
        }
        long elapsed = o.number(DrillOutcome.ELAPSED_MS).orElse(Long.MAX_VALUE);
        return elapsed <= boundMs ? null : "took " + elapsed + " ms, more than " + boundMs;
    }

    private static String recovered(DrillOutcome o, String outcome) {
        if (!o.is(DrillOutcome.OUTCOME, outcome)) {
            return "ended in " + o.get(DrillOutcome.OUTCOME).orElse("?") + ", expected " + outcome;
        }
        return o.is(DrillOutcome.RECOVERED, true) ? null : "not recovered by the reset";
    }

    private static String skipVictim(DrillOutcome o) {
        if (!o.is(DrillOutcome.REFUSED, true)) {
            return "the next check was not refused naming the poisoned ranks";
        }
        return recovered(o, DrillOutcome.COMPLETED);
    }

    private static String skipSurvivor(DrillOutcome o, int victim, long boundMs, Duration timeout) {
        String named = timedOutNaming(o, victim, boundMs);
        if (named != null) {
            return named;
        }
        if (!o.is(DrillOutcome.POISONED, true)) {
            return "the workspace was not marked poisoned";
        }
        if (!o.is(DrillOutcome.REFUSED, true)) {
            return "a call on the poisoned workspace was not refused";
        }
        if (!o.is(DrillOutcome.AGAIN, "PeerTimeoutException")) {
            return "a replay after the failure did not fail (the status word did not stay set)";
        }
        long again = o.number(DrillOutcome.AGAIN_MS).orElse(Long.MAX_VALUE);
        if (again >= timeout.toMillis()) {
            return "the poisoned replay waited " + again + " ms";
        }
        return recovered(o, "PeerTimeoutException");
    }

    private static String completedOrNamed(DrillOutcome o, long boundMs) {
        if (o.is(DrillOutcome.OUTCOME, DrillOutcome.COMPLETED)) {
            return o.is(DrillOutcome.MATCHED, true) ? null : "completed with outputs that differ from the CPU engine";
        }
        if (o.is(DrillOutcome.OUTCOME, "PeerTimeoutException") || o.is(DrillOutcome.OUTCOME, "PeerFailedException")) {
            long elapsed = o.number(DrillOutcome.ELAPSED_MS).orElse(Long.MAX_VALUE);
            return elapsed <= boundMs ? null : "took " + elapsed + " ms, more than " + boundMs;
        }
        return "ended in " + o.get(DrillOutcome.OUTCOME).orElse("?");
    }
}
