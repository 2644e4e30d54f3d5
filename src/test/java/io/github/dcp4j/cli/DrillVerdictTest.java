package io.github.dcp4j.cli;

import io.github.dcp4j.check.DrillJudge;
import io.github.dcp4j.check.DrillOutcome;
import io.github.dcp4j.check.FaultDrill;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The drills' outcome lines and their verdict, on logs written by hand (the drills themselves need a GPU). */
class DrillVerdictTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(5);

    record Result(int code, String out, String err) {
    }

    private static Result run(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int code = Main.run(args, new PrintWriter(out, true), new PrintWriter(err, true));
        return new Result(code, out.toString(), err.toString());
    }

    private static String survivor(String kind, int rank, String more) {
        return "[rank " + rank + "] " + DrillOutcome.MARKER + " kind=" + kind + " rank=" + rank
                + " blocks_per_rank=16 outcome=PeerTimeoutException source=3 elapsed_ms=5100" + more;
    }

    private static List<String> killLog() {
        List<String> log = new ArrayList<>();
        for (int r = 0; r < 4; r++) {
            log.add(r == 3 ? "[rank 3] " + DrillOutcome.MARKER + " kind=kill rank=3 blocks_per_rank=16"
                    + " outcome=killing-itself in_flight=true" : survivor("kill", r, ""));
        }
        log.add("launch: rank 3 (pid 4242) was killed by signal 9 (exit code 137)");
        return log;
    }

    private static List<String> skipLog() {
        List<String> log = new ArrayList<>();
        for (int r = 0; r < 4; r++) {
            log.add(r == 3 ? "[rank 3] " + DrillOutcome.MARKER + " kind=skip rank=3 outcome=completed refused=true recovered=true"
                    : survivor("skip", r, " poisoned=true refused=true again=PeerTimeoutException again_ms=4"
                            + " recovered=true"));
        }
        return log;
    }

    @Test
    void anOutcomeLineParsesBackAfterLaunchsPrefix() {
        DrillOutcome o = DrillOutcome.of("skip", "2").with(DrillOutcome.SOURCE, 3).with(DrillOutcome.POISONED, true);
        DrillOutcome back = DrillOutcome.parse("[rank 2] " + o.line()).orElseThrow();
        assertEquals(o.facts(), back.facts());
        assertTrue(back.is(DrillOutcome.SOURCE, 3));
        assertEquals(3L, back.number(DrillOutcome.SOURCE).orElseThrow());
        assertTrue(DrillOutcome.parse("[rank 2] rank 2 of 4 (pid 7): GPU 0").isEmpty());
    }

    @Test
    void aMalformedOutcomeOrValueIsRefusedNamingIt() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> DrillOutcome.parse(DrillOutcome.MARKER + " kind=kill rank"));
        assertTrue(e.getMessage().contains("'rank'"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> DrillOutcome.of("kill", "1").with("x", "two words"));
    }

    @Test
    void aKillDrillPassesWhenEverySurvivorNamesTheVictimWithinTheTimeout() {
        assertEquals(List.of(), DrillJudge.judge(FaultDrill.Kind.kill, 3, 4, TIMEOUT, 1, false, killLog()));
    }

    @Test
    void aKillDrillFailsForAWrongSourceALateTimeoutAMissingRankOrNoKill() {
        List<String> wrongSource = killLog();
        wrongSource.set(0, wrongSource.get(0).replace("source=3", "source=1"));
        assertTrue(String.join("\n", DrillJudge.judge(FaultDrill.Kind.kill, 3, 4, TIMEOUT, 1, false,
                wrongSource)).contains("rank 0: named source rank 1, not 3"));
        List<String> late = killLog();
        late.set(1, late.get(1).replace("elapsed_ms=5100", "elapsed_ms=9000"));
        assertTrue(String.join("\n", DrillJudge.judge(FaultDrill.Kind.kill, 3, 4, TIMEOUT, 1, false, late))
                .contains("rank 1: took 9000 ms, more than 8000"));
        List<String> missing = killLog();
        missing.remove(2);
        assertTrue(DrillJudge.judge(FaultDrill.Kind.kill, 3, 4, TIMEOUT, 1, false, missing)
                .contains("rank 2 reported no outcome"));
        List<String> notKilled = killLog();
        notKilled.removeLast();
        assertTrue(DrillJudge.judge(FaultDrill.Kind.kill, 3, 4, TIMEOUT, 1, false, notKilled)
                .contains("launch did not report rank 3 killed by signal 9"));
    }

    @Test
    void aSkipDrillPassesOnlyWithThePoisonVisibleAndTheResetRecovering() {
        assertEquals(List.of(), DrillJudge.judge(FaultDrill.Kind.skip, 3, 4, TIMEOUT, 0, false, skipLog()));
        for (String[] broken : new String[][] {{"poisoned=true", "poisoned=false", "not marked poisoned"},
                {"refused=true", "refused=false", "was not refused"},
                {"again=PeerTimeoutException", "again=completed", "did not stay set"},
                {"again_ms=4", "again_ms=5000", "the poisoned replay waited 5000 ms"},
                {"recovered=true", "recovered=false", "not recovered by the reset"}}) {
            List<String> log = skipLog();
            log.set(1, log.get(1).replace(broken[0], broken[1]));
            String reasons = String.join("\n", DrillJudge.judge(FaultDrill.Kind.skip, 3, 4, TIMEOUT, 0, false,
                    log));
            assertTrue(reasons.startsWith("rank 1: ") && reasons.contains(broken[2]), broken[1] + ": " + reasons);
        }
        List<String> log = skipLog();
        log.set(3, log.get(3).replace("refused=true", "refused=false"));
        String victim = String.join("\n", DrillJudge.judge(FaultDrill.Kind.skip, 3, 4, TIMEOUT, 0, false, log));
        assertTrue(victim.startsWith("rank 3: the next check was not refused naming the poisoned ranks"), victim);
        assertTrue(DrillJudge.judge(FaultDrill.Kind.skip, 3, 4, TIMEOUT, 1, false, skipLog())
                .contains("exit code 1, expected 0"));
    }

    @Test
    void aStarveDrillAcceptsACorrectCompletionOrANamedExceptionInTime() {
        List<String> log = List.of(
                DrillOutcome.MARKER + " kind=starve rank=0 outcome=completed elapsed_ms=40 matched=true",
                DrillOutcome.MARKER + " kind=starve rank=1 outcome=PeerTimeoutException source=0 elapsed_ms=5200");
        assertEquals(List.of(), DrillJudge.judge(FaultDrill.Kind.starve, 1, 2, TIMEOUT, 0, false, log));
        List<String> wrong = List.of(
                DrillOutcome.MARKER + " kind=starve rank=0 outcome=completed elapsed_ms=40 matched=false",
                DrillOutcome.MARKER + " kind=starve rank=1 outcome=CudaException elapsed_ms=5200");
        List<String> reasons = DrillJudge.judge(FaultDrill.Kind.starve, 1, 2, TIMEOUT, 0, false, wrong);
        assertEquals(2, reasons.size(), reasons.toString());
        // loopback: one outcome for the launch, which may wait out one timeout per rank
        List<String> loopback = List.of(DrillOutcome.MARKER
                + " kind=starve rank=all outcome=PeerTimeoutException source=7 elapsed_ms=30000");
        assertEquals(List.of(), DrillJudge.judge(FaultDrill.Kind.starve, 0, 8, TIMEOUT, 0, true, loopback));
    }

    @Test
    void theVerdictCommandPrintsPassOrFailAndExitsAccordingly(@TempDir Path dir) throws IOException {
        Path log = Files.write(dir.resolve("skip.log"), skipLog());
        Result pass = run("drill", "verdict", "--kind", "skip", "--victim", "3", "--nproc", "4", "--exit-code", "0",
                "--log", log.toString());
        assertEquals(0, pass.code(), pass.err());
        assertEquals("PASS skip", pass.out().strip());
        Result fail = run("drill", "verdict", "--kind", "skip", "--victim", "2", "--nproc", "4", "--exit-code", "0",
                "--log", log.toString());
        assertEquals(1, fail.code());
        assertTrue(fail.out().startsWith("FAIL skip: "), fail.out());
    }

    @Test
    void usageErrorsExitTwoWithoutAStackTrace() {
        for (String[] args : new String[][] {
            {"drill"},
            {"drill", "rank", "--kind", "explode"},
            {"drill", "rank", "--kind", "kill"},
            {"drill", "rank", "--kind", "starve", "--active-threads", "0"},
            {"drill", "rank", "--kind", "starve", "--victim", "8"},
            {"drill", "verdict", "--kind", "kill", "--nproc", "0", "--exit-code", "1", "--log", "x"},
            {"drill", "verdict", "--kind", "kill", "--nproc", "4", "--victim", "4", "--exit-code", "1", "--log",
                "x"}}) {
            Result r = run(args);
            assertEquals(2, r.code(), String.join(" ", args) + ": " + r.err());
            assertFalse(r.err().contains("\tat "), "no stack trace: " + r.err());
        }
        assertTrue(run("drill", "rank", "--kind", "kill").err().contains("runs as a rank of a group"));
        assertTrue(run("drill", "rank", "--kind", "starve", "--victim", "8").err()
                .contains("--victim must be a rank of the group, in [0, 7]; got 8"));
    }

    @Test
    void aDrillWithoutAGpuSaysWhy() {
        Assumptions.assumeFalse(io.github.dcp4j.cuda.Cuda.availability().available(), "a GPU is present");
        Result r = run("drill", "rank", "--kind", "starve", "--victim", "0");
        assertEquals(1, r.code());
        assertTrue(r.err().contains("drill needs a GPU"), r.err());
        assertFalse(r.err().contains("\tat "), "no stack trace: " + r.err());
    }

    @Test
    void theDrillIsLeftOutOfTheCommandList() {
        assertFalse(run("--help").out().lines().anyMatch(l -> l.matches("\\s*drill\\s.*")), "not in the list");
        assertTrue(run("drill", "rank", "--help").out().contains("Usage: dcp4j drill rank"));
    }
}
