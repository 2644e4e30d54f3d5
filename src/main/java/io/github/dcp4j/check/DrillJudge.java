package io.github.dcp4j.check;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The verdict on a fault drill, from its log (launch's output, or a loopback drill's): every rank's {@link
 * DrillOutcome} line checked against what its drill promises (docs/RELIABILITY.md), with the drill command's exit code
 * and, for the kill drill, launch's report of the victim's signal.
 */
public final class DrillJudge {
    /** What a rank's timed-out wait may take beyond the timeout: the launch, the replay's other calls, the check. */
    public static final Duration SLACK = Duration.ofSeconds(3);

    private DrillJudge() {
    }

    /**
     * What is wrong with a drill's outcome; empty where it passed.
     *
     * @param kind     the drill
     * @param victim   the rank that misbehaved
     * @param nproc    ranks of the group
     * @param timeout  the drill's timeout
     * @param exitCode the drill command's exit code
     * @param loopback whether it was a loopback drill (one process, one outcome for every rank)
     * @param lines    the drill's log
     * @return the reasons it failed, each naming the rank; empty where it passed
     */
    public static List<String> judge(FaultDrill.Kind kind, int victim, int nproc, Duration timeout, int exitCode,
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
        int expectedExit = kind == FaultDrill.Kind.kill ? 1 : 0;
        if (exitCode != expectedExit) {
            reasons.add("exit code " + exitCode + ", expected " + expectedExit);
        }
        // a rank in loopback may wait out one timeout per rank before it: rank r's resident blocks wait for the
        // blocks of later ranks that cannot start until they give up
        long bound = (loopback ? nproc : 1) * timeout.toMillis() + SLACK.toMillis();
        List<String> ranks = new ArrayList<>();
        if (loopback) {
            ranks.add(DrillOutcome.LOOPBACK_RANK);
        } else {
            for (int r = 0; r < nproc; r++) {
                ranks.add(Integer.toString(r));
            }
        }
        if (kind == FaultDrill.Kind.kill && !lines.stream().anyMatch(l -> l.startsWith("launch: rank " + victim
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
