package io.github.dcp4j.check;

import io.github.dcp4j.engine.RankWorkspace;
import io.github.dcp4j.engine.cpu.CpuEngine;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.reference.ConformanceCases;
import io.github.dcp4j.reference.Fp64Oracle;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The check's conformance runner on the CPU engine, every rank of a group on its own thread of this JVM (its counter
 * wrap, graph replays and drills need CUDA IPC): each call of each case is one check of each rank, the engine's own
 * outputs pass, and an output one bit away from the CPU engine's fails, naming the elements that differ. No GPU.
 */
@Timeout(120)
class RankCheckTest {
    private static final int CP = 3;
    private static final Duration TIMEOUT = Duration.ofSeconds(10);

    /** One rank's run: its failed checks, the checks and what it printed. */
    private record RankRun(int failures, List<Check> checks, String report) {
    }

    /**
     * Every rank's conformance run, each rank on its own thread over one CPU group per case (opened in the case
     * order, as the runner asks for them); {@code wrap} may stand in for rank r's workspace.
     */
    private static List<RankRun> runConformance(int repeat, int wrappedRank, UnaryOperator<RankWorkspace> wrap)
            throws InterruptedException, ExecutionException {
        List<CpuEngine> groups = new ArrayList<>();
        ExecutorService ranks = Executors.newFixedThreadPool(CP);
        try {
            for (ConformanceCases.Case c : ConformanceCases.all()) {
                groups.add(CpuEngine.open(c.spec(CP), TIMEOUT));
            }
            List<Future<RankRun>> runs = new ArrayList<>();
            for (int r = 0; r < CP; r++) {
                int rank = r;
                runs.add(ranks.submit(() -> {
                    AtomicInteger next = new AtomicInteger();
                    RankCheck.Workspaces workspaces = (spec, calls) -> {
                        RankWorkspace ws = groups.get(next.getAndIncrement()).workspace(rank);
                        assertEquals(spec.bytes(), ws.byteSize(), "the case's workspace");
                        return calls.applyAsInt(rank == wrappedRank ? wrap.apply(ws) : ws);
                    };
                    StringWriter report = new StringWriter();
                    RankCheck check = new RankCheck(rank, CP, ConformanceCases.SEED, TIMEOUT,
                            new PrintWriter(report));
                    int failures = check.conformance(workspaces, repeat);
                    return new RankRun(failures, check.checks(), report.toString());
                }));
            }
            List<RankRun> done = new ArrayList<>();
            for (Future<RankRun> run : runs) {
                done.add(run.get());
            }
            return done;
        } finally {
            ranks.shutdownNow();
            groups.forEach(CpuEngine::close);
        }
    }

    private static int callsPerRank() {
        return ConformanceCases.all().stream().mapToInt(c -> c.tokens().size()).sum();
    }

    @Test
    void everyCallOfEveryCaseIsOneCheckAndTheCpuEnginesOwnOutputsPass() throws Exception {
        List<RankRun> runs = runConformance(2, -1, UnaryOperator.identity());
        for (int r = 0; r < CP; r++) {
            RankRun run = runs.get(r);
            assertEquals(0, run.failures(), run.report());
            assertEquals(callsPerRank(), run.checks().size(), run.report());
            for (Check c : run.checks()) {
                assertEquals(r, c.rank());
                assertTrue(c.passed() && c.elementsDiffering() == 0 && c.elements() > 0, c.toString());
                assertTrue(c.relativeError() <= Fp64Oracle.TOLERANCE, c.toString());
            }
            ConformanceCases.Case first = ConformanceCases.all().getFirst();
            assertEquals(first.name() + ", call 1 of " + first.tokens().size(), run.checks().getFirst().check());
            assertTrue(run.report().contains("rank " + r + " (pid " + ProcessHandle.current().pid()
                    + "): call 2 of 2 done"), "the first call repeated, each printed: " + run.report());
            assertEquals(callsPerRank(), run.report().lines().filter(l -> l.contains(" ok (rel err ")).count(),
                    run.report());
        }
    }

    @Test
    void anOutputOneBitAwayFromTheCpuEnginesFailsEveryCallOfThatRankAlone() throws Exception {
        // rank 1's engine flips the lowest bit of its first output element after every call
        UnaryOperator<RankWorkspace> flipsABit = ws -> new RankWorkspace() {
            @Override
            public int rank() {
                return ws.rank();
            }

            @Override
            public int cpSize() {
                return ws.cpSize();
            }

            @Override
            public long byteSize() {
                return ws.byteSize();
            }

            @Override
            public String engineName() {
                return ws.engineName();
            }

            @Override
            public void execute(ReduceCall call) {
                ws.execute(call);
                TensorView out = (TensorView) call.out();
                out.storeBits(0, (short) (out.loadBits(0) ^ 1));
            }
        };
        List<RankRun> runs = runConformance(1, 1, flipsABit);
        assertEquals(0, runs.get(0).failures(), runs.get(0).report());
        assertEquals(0, runs.get(2).failures(), runs.get(2).report());
        RankRun wrong = runs.get(1);
        assertEquals(callsPerRank(), wrong.failures(), wrong.report());
        for (Check c : wrong.checks()) {
            assertTrue(!c.passed() && c.elementsDiffering() == 1, c.toString());
        }
        assertTrue(wrong.report().contains("FAILED (rel err ") && wrong.report().contains(
                "1 of " + wrong.checks().getFirst().elements() + " elements differ from the CPU engine"),
                wrong.report());
    }

    @Test
    void aRepeatBelowOneIsRefusedBeforeAnyCall() {
        RankCheck check = new RankCheck(0, CP, ConformanceCases.SEED, TIMEOUT, new PrintWriter(new StringWriter()));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> check.conformance((spec, calls) -> {
                    throw new AssertionError("no workspace opened");
                }, 0));
        assertEquals("repeat must be >= 1; got 0", e.getMessage());
        assertEquals(List.of(), check.checks());
    }

    @Test
    void theFaultsAreNamedAsInjectSpellsThem() {
        assertEquals(Optional.of(RankCheck.Fault.WRONG_CP_RANK), RankCheck.Fault.of("wrong-cp-rank"));
        assertEquals(Optional.of(RankCheck.Fault.SKIP_CALL), RankCheck.Fault.of("skip-call"));
        assertEquals(Optional.empty(), RankCheck.Fault.of("crash"));
    }
}
