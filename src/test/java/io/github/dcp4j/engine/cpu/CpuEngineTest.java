package io.github.dcp4j.engine.cpu;

import io.github.dcp4j.DcpLseReduce;
import io.github.dcp4j.Tensors;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.engine.PeerFailedException;
import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.layout.Ll128Lines;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.reference.ConformanceCases;
import io.github.dcp4j.reference.Fp64Oracle;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The CPU engine runs the LL128 protocol for real: its output must equal the exact merge bit for bit, call after call,
 * across slot reuse, counter wrap, row-count changes and timeouts. Cases follow upstream's test_dcp_lse_reduce.py.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CpuEngineTest {

    static Stream<Arguments> dtypesAndModes() {
        return Stream.of(DType.FP16, DType.BF16).flatMap(d -> Stream.of(LseMode.values()).map(m -> Arguments.of(d, m)));
    }

    /** Runs one call on every rank and checks each rank bit for bit against the exact merge and against fp64. */
    static void callAndCheck(CpuEngine group, Arena arena, Tensors.Group g, LseMode mode) {
        List<TensorView> out = Tensors.outputs(arena, g);
        group.reduceAll(g.partialO(), g.partialLse(), out, mode);
        for (int r = 0; r < g.cp(); r++) {
            assertArrayEquals(Tensors.exact(arena, g, r, mode), Tensors.bits(out.get(r)), "rank " + r);
            double err = Fp64Oracle.relativeError(out.get(r), Fp64Oracle.reduce(g.partialO(), g.partialLse(), r, mode));
            assertTrue(err < 1e-2, "rank " + r + " relative error " + err);
        }
    }

    static List<ConformanceCases.Case> conformance() {
        return ConformanceCases.all();
    }

    /**
     * The shared conformance cases (upstream's test_lse_reduce, its strided-input and row-count tests among them):
     * every call's output equals the exact merge bit for bit, of the view and of its packed copy alike; an empty row
     * (every LSE -inf) is zeros; the slots alternate by the call counter.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("conformance")
    void conformanceCase(ConformanceCases.Case c) {
        int cp = 4;
        try (Arena arena = Arena.ofShared(); CpuEngine group = CpuEngine.open(c.spec(cp))) {
            for (int call = 0; call < c.tokens().size(); call++) {
                assertEquals(call, group.workspace(0).epoch(), "the call counter before call " + call);
                Tensors.Group g = Tensors.of(c.inputs(arena, ConformanceCases.SEED, cp, call));
                List<TensorView> out = Tensors.outputs(arena, g);
                group.reduceAll(g.partialO(), g.partialLse(), out, c.mode());
                Tensors.Group packed = Tensors.packedCopy(arena, g);
                for (int r = 0; r < cp; r++) {
                    String where = "call " + call + " rank " + r;
                    assertArrayEquals(Tensors.exact(arena, g, r, c.mode()), Tensors.bits(out.get(r)), where);
                    assertArrayEquals(Tensors.exact(arena, packed, r, c.mode()), Tensors.bits(out.get(r)), where);
                    double err = Fp64Oracle.relativeError(out.get(r),
                            Fp64Oracle.reduce(g.partialO(), g.partialLse(), r, c.mode()));
                    assertTrue(err < 1e-2, where + ": relative error " + err);
                    if (c.rows() == ConformanceCases.LseRows.SPECIAL) {
                        for (int i = 0; i < c.headDim(); i++) {
                            assertEquals(0, out.get(r).loadBits(i), where + ": row (0, 0) is empty: zeros");
                        }
                    }
                }
            }
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("dtypesAndModes")
    void singleRankIsTheIdentity(DType dtype, LseMode mode) {
        try (Arena arena = Arena.ofShared();
             CpuEngine group = CpuEngine.open(new WorkspaceSpec(3, 4, 1, 128, dtype))) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(1), 3, 4, 1, 128, dtype, 5.0);
            TensorView out = DcpLseReduce.reduce(g.partialO().getFirst(), g.partialLse().getFirst(),
                    group.workspace(0), 0, 1, mode);
            assertArrayEquals(Tensors.bits(g.partialO().getFirst()), Tensors.bits(out));
        }
    }

    /** Every head_dim the row limit allows, through the whole protocol (cp = 2), both dtypes. */
    @ParameterizedTest
    @ValueSource(strings = {"FP16", "BF16"})
    void everyAllowedHeadDimRoundTripsThroughTheProtocol(String dtypeName) {
        DType dtype = DType.valueOf(dtypeName);
        SplittableRandom random = new SplittableRandom(2);
        for (int headDim = 8; headDim * 2 <= 15360; headDim += 8) {
            try (Arena arena = Arena.ofShared();
                 CpuEngine group = CpuEngine.open(new WorkspaceSpec(1, 1, 2, headDim, dtype))) {
                callAndCheck(group, arena, Tensors.packed(arena, random, 1, 1, 2, headDim, dtype, 2.0),
                        LseMode.BASE2);
            }
        }
    }

    /** Attention output [T, cp x H, D]: head h goes to rank h / H, read through the view without a copy. */
    @Test
    void attentionOutputHeadsGoToTheirOwners() {
        int cp = 4;
        int heads = 2;
        int d = 64;
        try (Arena arena = Arena.ofShared();
             CpuEngine group = CpuEngine.open(new WorkspaceSpec(2, heads, cp, d, DType.BF16))) {
            Tensors.Group g = Tensors.strided(arena, new SplittableRandom(4), 2, heads, cp, d, DType.BF16, 0.0);
            for (int r = 0; r < cp; r++) {
                for (int t = 0; t < 2; t++) {
                    for (int h = 0; h < heads; h++) {
                        Tensors.setLseRow(g, r, t, h, r == 2 ? 0f : Float.NEGATIVE_INFINITY);
                    }
                }
            }
            List<TensorView> out = group.reduceAll(g.partialO(), g.partialLse(), LseMode.BASE2);
            for (int p = 0; p < cp; p++) {
                for (int t = 0; t < 2; t++) {
                    for (int h = 0; h < heads; h++) {
                        for (int i = 0; i < d; i++) {
                            // only source 2 has weight: rank p receives source 2's attention head p*H + h
                            TensorView attention = g.partialO().get(2);
                            float expected = attention.getFloat(t, h, p, i);
                            assertEquals(expected, out.get(p).getFloat((long) t * heads + h, i));
                        }
                    }
                }
            }
        }
    }

    /** Upstream test_lse_reduce_call_counter_reuse_and_wrap, with the counter forced on every rank. */
    @Test
    void callCounterReuseAndWrap() {
        int cp = 4;
        try (Arena arena = Arena.ofShared();
             CpuEngine group = CpuEngine.open(new WorkspaceSpec(8, 2, cp, 128, DType.BF16))) {
            SplittableRandom random = new SplittableRandom(6);
            for (int i = 0; i < 3; i++) {
                forceCounter(group, 10);
                callAndCheck(group, arena, Tensors.packed(arena, random, 4, 2, cp, 128, DType.BF16, 3.0),
                        LseMode.BASE2);
                assertEquals(11, group.workspace(0).epoch());
            }
            forceCounter(group, (int) ((1L << 32) - 3));
            for (int tokens : new int[] {8, 1, 5, 8, 2, 8}) {
                callAndCheck(group, arena, Tensors.packed(arena, random, tokens, 2, cp, 128, DType.BF16, 3.0),
                        LseMode.BASE2);
            }
            for (int r = 0; r < cp; r++) {
                assertEquals(3, group.workspace(r).epoch(), "2^32 - 3 + 6 wraps to 3 on rank " + r);
            }
        }
    }

    /**
     * Between calls every flag in every workspace is zero: each line was consumed by its reader, so nothing stale can
     * match a later call's flag, whatever the counter (the protocol's core invariant, docs/PROTOCOL.md).
     */
    @Test
    void betweenCallsEveryFlagIsZero() {
        int cp = 3;
        WorkspaceSpec spec = new WorkspaceSpec(4, 2, cp, 200, DType.FP16);
        try (Arena arena = Arena.ofShared(); CpuEngine group = CpuEngine.open(spec)) {
            SplittableRandom random = new SplittableRandom(13);
            for (int call = 0; call < 5; call++) {
                callAndCheck(group, arena, Tensors.packed(arena, random, 1 + call % 4, 2, cp, 200, DType.FP16, 3.0),
                        LseMode.BASE2);
                var layout = spec.layout();
                for (int r = 0; r < cp; r++) {
                    var memory = group.workspace(r).memory();
                    for (int slot = 0; slot < 2; slot++) {
                        for (int src = 0; src < cp; src++) {
                            for (int row = 0; row < layout.maxRows(); row++) {
                                for (int line = 0; line < layout.row().dataLines(); line++) {
                                    assertEquals(0L, Ll128Lines.getDataFlagAcquire(memory,
                                            layout.dataLineOffset(slot, src, row, line)),
                                            "call " + call + " rank " + r + " data flag " + slot + "/" + src + "/"
                                                    + row + "/" + line);
                                }
                                for (int grp = 0; grp < layout.row().lineGroups(); grp++) {
                                    long off = layout.lseLineOffset(slot, src, row, grp);
                                    assertEquals(0L, memory.get(java.lang.foreign.ValueLayout.JAVA_LONG, off));
                                    assertEquals(0L, memory.get(java.lang.foreign.ValueLayout.JAVA_LONG, off + 8));
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    private static void forceCounter(CpuEngine group, int value) {
        for (int r = 0; r < group.cpSize(); r++) {
            Ll128Lines.putEpochRelease(group.workspace(r).memory(), value);
        }
    }

    /** Upstream test_lse_reduce_graph_many_calls, as many eager calls: 16 cases, 50 rounds on one small workspace. */
    @Test
    void manyCallsOnOneWorkspace() {
        int cp = 4;
        try (Arena arena = Arena.ofShared();
             CpuEngine group = CpuEngine.open(new WorkspaceSpec(4, 16, cp, 512, DType.BF16))) {
            SplittableRandom random = new SplittableRandom(7);
            List<Tensors.Group> cases = new ArrayList<>();
            for (int i = 0; i < 16; i++) {
                cases.add(Tensors.packed(arena, random, 1 + i % 4, 16, cp, 512, DType.BF16, 3.0));
            }
            List<List<short[]>> expected = new ArrayList<>();
            for (Tensors.Group g : cases) {
                List<short[]> perRank = new ArrayList<>();
                for (int r = 0; r < cp; r++) {
                    perRank.add(Tensors.exact(arena, g, r, LseMode.BASE2));
                }
                expected.add(perRank);
            }
            for (int round = 0; round < 50; round++) {
                for (int i = 0; i < cases.size(); i++) {
                    List<TensorView> out = group.reduceAll(cases.get(i).partialO(), cases.get(i).partialLse(),
                            LseMode.BASE2);
                    for (int r = 0; r < cp; r++) {
                        assertArrayEquals(expected.get(i).get(r), Tensors.bits(out.get(r)),
                                "round " + round + " case " + i + " rank " + r);
                    }
                }
            }
            assertEquals(800, group.workspace(0).epoch());
        }
    }

    /** cp from 1 to 64: every group size the op allows, a few of each. */
    @ParameterizedTest
    @ValueSource(ints = {1, 2, 3, 5, 8, 13, 16, 31, 32, 33, 64})
    void everyGroupSize(int cp) {
        try (Arena arena = Arena.ofShared();
             CpuEngine group = CpuEngine.open(new WorkspaceSpec(2, 3, cp, 40, DType.FP16))) {
            SplittableRandom random = new SplittableRandom(cp);
            for (int call = 0; call < 3; call++) {
                callAndCheck(group, arena, Tensors.strided(arena, random, 1 + call % 2, 3, cp, 40, DType.FP16, 4.0),
                        call % 2 == 0 ? LseMode.BASE2 : LseMode.BASEE);
            }
        }
    }

    /**
     * Ranks on their own threads with no barrier between calls, so a fast rank runs up to one call ahead of a slow
     * one: the two slots must keep calls apart. 8 ranks on 2 cores.
     */
    @Test
    void concurrencyStressRanksRunAheadWithoutBarriers() throws Exception {
        int cp = 8;
        int calls = 150;
        try (Arena arena = Arena.ofShared();
             CpuEngine group = CpuEngine.open(new WorkspaceSpec(3, 2, cp, 64, DType.BF16))) {
            SplittableRandom random = new SplittableRandom(8);
            List<Tensors.Group> inputs = new ArrayList<>();
            List<List<short[]>> expected = new ArrayList<>();
            for (int c = 0; c < calls; c++) {
                Tensors.Group g = Tensors.packed(arena, random, 1 + random.nextInt(3), 2, cp, 64, DType.BF16, 4.0);
                inputs.add(g);
                List<short[]> perRank = new ArrayList<>();
                for (int r = 0; r < cp; r++) {
                    perRank.add(Tensors.exact(arena, g, r, LseMode.BASEE));
                }
                expected.add(perRank);
            }
            List<Thread> threads = new ArrayList<>();
            List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());
            for (int rank = 0; rank < cp; rank++) {
                int r = rank;
                threads.add(Thread.ofPlatform().start(() -> {
                    try {
                        for (int c = 0; c < calls; c++) {
                            Tensors.Group g = inputs.get(c);
                            TensorView out = DcpLseReduce.reduce(g.partialO().get(r), g.partialLse().get(r),
                                    group.workspace(r), r, cp, LseMode.BASEE);
                            assertArrayEquals(expected.get(c).get(r), Tensors.bits(out), "call " + c + " rank " + r);
                            if (((c * 7 + r) & 15) == 0) {
                                Thread.sleep(1); // a rank falls behind now and then
                            }
                        }
                    } catch (Throwable t) {
                        failures.add(t);
                    }
                }));
            }
            for (Thread t : threads) {
                t.join();
            }
            assertTrue(failures.isEmpty(), () -> "failures: " + failures);
            for (int r = 0; r < cp; r++) {
                assertEquals(calls, group.workspace(r).epoch());
            }
        }
    }

    /** A rank that never sends: every other rank fails within the timeout, naming it; after reset all is well. */
    @Test
    void anInterruptedRankStopsWaitingAtOnceNamingWhatItWaitedFor() throws Exception {
        int cp = 2;
        try (Arena arena = Arena.ofShared();
             CpuEngine group = CpuEngine.open(new WorkspaceSpec(1, 2, cp, 64, DType.BF16), Duration.ofSeconds(30))) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(21), 1, 2, cp, 64, DType.BF16, 3.0);
            List<TensorView> out = Tensors.outputs(arena, g);
            java.util.concurrent.atomic.AtomicReference<Throwable> failure =
                    new java.util.concurrent.atomic.AtomicReference<>();
            // rank 0 alone: rank 1 never calls, so rank 0 waits until its thread is interrupted
            Thread rank0 = Thread.ofPlatform().start(() -> {
                try {
                    DcpLseReduce.reduce(g.partialO().get(0), g.partialLse().get(0), group.workspace(0), 0, cp,
                            LseMode.BASE2, out.get(0));
                } catch (Throwable t) {
                    failure.set(t);
                }
            });
            Thread.sleep(200);
            long start = System.nanoTime();
            rank0.interrupt();
            rank0.join(5_000);
            assertFalse(rank0.isAlive(), "the interrupted rank still waits");
            assertTrue((System.nanoTime() - start) / 1e9 < 5, "stopped at once, not at the 30 s timeout");
            PeerTimeoutException e = assertInstanceOf(PeerTimeoutException.class, failure.get());
            assertTrue(e.getMessage().contains("rank 0 was interrupted waiting for source rank 1"), e.getMessage());
            group.reset();
            callAndCheck(group, arena, g, LseMode.BASE2);
        }
    }

    @Test
    void aRankThatNeverSendsTimesOutEveryOtherRankAndResetRecovers() {
        int cp = 8;
        Duration timeout = Duration.ofMillis(300);
        try (Arena arena = Arena.ofShared();
             CpuEngine group = CpuEngine.open(new WorkspaceSpec(2, 2, cp, 64, DType.BF16), timeout)) {
            SplittableRandom random = new SplittableRandom(9);
            Tensors.Group g = Tensors.packed(arena, random, 2, 2, cp, 64, DType.BF16, 3.0);
            List<TensorView> out = Tensors.outputs(arena, g);
            List<ReduceCall> withoutRank5 = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                if (r != 5) {
                    withoutRank5.add(DcpLseReduce.validate(g.partialO().get(r), g.partialLse().get(r), out.get(r),
                            group.workspace(r), r, cp, LseMode.BASE2));
                }
            }
            long start = System.nanoTime();
            PeerTimeoutException e = assertThrows(PeerTimeoutException.class, () -> group.runRanks(withoutRank5));
            double seconds = (System.nanoTime() - start) / 1e9;
            assertTrue(seconds < 5, "failed within the timeout, not after " + seconds + " s");
            assertEquals(5, e.sourceRank());
            assertEquals(0, e.row());
            assertEquals(0, e.line());
            assertFalse(e.lseLine());
            assertTrue(e.getMessage().contains("source rank 5, row 0, data line 0"), e.getMessage());
            assertEquals(cp - 2, e.getSuppressed().length, "every waiting rank failed");
            for (Throwable other : e.getSuppressed()) {
                assertEquals(5, ((PeerTimeoutException) other).sourceRank());
            }
            for (int r = 0; r < cp; r++) {
                assertArrayEquals(Tensors.bits(Tensors.outputs(arena, g).get(r)), Tensors.bits(out.get(r)),
                        "a failed call leaves rank " + r + "'s output untouched");
            }
            IllegalStateException poisoned = assertThrows(IllegalStateException.class,
                    () -> group.reduceAll(g.partialO(), g.partialLse(), LseMode.BASE2));
            assertTrue(poisoned.getMessage().contains("reset()"), poisoned.getMessage());

            group.reset();
            callAndCheck(group, arena, g, LseMode.BASE2);
            callAndCheck(group, arena, Tensors.packed(arena, random, 1, 2, cp, 64, DType.BF16, 3.0), LseMode.BASE2);
        }
    }

    /**
     * Local checks before the group starts: a tensor freed between prepare and run is refused naming it before any
     * rank takes its ticket, so the group is not poisoned and the next call needs no reset.
     */
    @Test
    void aTensorFreedAfterPrepareIsRefusedBeforeAnyRankStarts() {
        int cp = 4;
        try (Arena arena = Arena.ofShared();
             CpuEngine group = CpuEngine.open(new WorkspaceSpec(2, 2, cp, 64, DType.BF16), Duration.ofSeconds(30))) {
            SplittableRandom random = new SplittableRandom(41);
            Tensors.Group g = Tensors.packed(arena, random, 2, 2, cp, 64, DType.BF16, 3.0);
            Arena own = Arena.ofShared();
            List<TensorView> partialO = new ArrayList<>(g.partialO());
            partialO.set(2, g.partialO().get(2).contiguousCopy(own));
            List<TensorView> out = Tensors.outputs(arena, g);
            LocalGroup.PreparedCall call = group.prepare(partialO, g.partialLse(), out, LseMode.BASE2);
            own.close();
            IllegalStateException e = assertThrows(IllegalStateException.class, call::run);
            assertTrue(e.getMessage().contains("partial_o of rank 2 is in memory that was freed"), e.getMessage());
            for (int r = 0; r < cp; r++) {
                assertEquals(0, group.workspace(r).epoch(), "rank " + r + " took no ticket");
            }
            callAndCheck(group, arena, g, LseMode.BASE2);
        }
    }

    /**
     * A rank whose part of a call fails once the call has begun (its partial_o freed before it calls) poisons the
     * group, and every rank already waiting in that call stops at once, naming it, with its exception as the cause,
     * instead of waiting for the timeout; a reset recovers.
     */
    @Test
    void aRankWhosePartFailsStopsEveryWaitingRankAtOnceNamingIt() throws Exception {
        int cp = 4;
        try (Arena arena = Arena.ofShared();
             CpuEngine group = CpuEngine.open(new WorkspaceSpec(2, 2, cp, 64, DType.BF16), Duration.ofSeconds(30))) {
            SplittableRandom random = new SplittableRandom(42);
            Tensors.Group g = Tensors.packed(arena, random, 2, 2, cp, 64, DType.BF16, 3.0);
            List<TensorView> out = Tensors.outputs(arena, g);
            Throwable[] failures = new Throwable[cp];
            List<Thread> waiting = new ArrayList<>();
            long start = System.nanoTime();
            for (int r : new int[] {0, 1, 3}) {
                waiting.add(Thread.ofPlatform().start(() -> failures[r] = reduceCatching(group, g, out, r,
                        g.partialO().get(r), cp)));
            }
            for (int r : new int[] {0, 1, 3}) {
                while (group.workspace(r).epoch() == 0) {
                    Thread.onSpinWait();  // until rank r has taken its ticket and waits for rank 2
                }
            }
            Arena own = Arena.ofShared();
            TensorView freed = g.partialO().get(2).contiguousCopy(own);
            own.close();
            failures[2] = reduceCatching(group, g, out, 2, freed, cp);
            for (Thread t : waiting) {
                t.join(10_000);
            }
            assertTrue((System.nanoTime() - start) / 1e9 < 10, "stopped at once, not at the 30 s timeout");
            IllegalStateException cause = assertInstanceOf(IllegalStateException.class, failures[2]);
            assertTrue(cause.getMessage().contains("partial_o of rank 2 is in memory that was freed"),
                    cause.getMessage());
            for (int r : new int[] {0, 1, 3}) {
                PeerFailedException e = assertInstanceOf(PeerFailedException.class, failures[r], "rank " + r);
                assertEquals(r, e.rank());
                assertEquals(2, e.failedRank());
                assertEquals(cause, e.getCause());
                assertTrue(e.getMessage().contains("rank 2's part of the call failed"), e.getMessage());
            }
            IllegalStateException poisoned = assertThrows(IllegalStateException.class,
                    () -> group.reduceAll(g.partialO(), g.partialLse(), LseMode.BASE2));
            assertTrue(poisoned.getMessage().contains("poisoned by rank 2's failed call"), poisoned.getMessage());
            group.reset();
            callAndCheck(group, arena, g, LseMode.BASE2);
        }
    }

    private static Throwable reduceCatching(CpuEngine group, Tensors.Group g, List<TensorView> out, int rank,
                                            TensorView partialO, int cp) {
        try {
            DcpLseReduce.reduce(partialO, g.partialLse().get(rank), group.workspace(rank), rank, cp, LseMode.BASE2,
                    out.get(rank));
            return null;
        } catch (Throwable t) {
            return t;
        }
    }

    /** A rank that sends data but whose LSE lines never arrive is named with the LSE line it waited for. */
    @Test
    void aMissingLseLineIsNamed() {
        int cp = 2;
        try (Arena arena = Arena.ofShared();
             CpuEngine group = CpuEngine.open(new WorkspaceSpec(1, 1, cp, 56, DType.BF16), Duration.ofMillis(200))) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(10), 1, 1, cp, 56, DType.BF16, 3.0);
            // rank 1's only data line for rank 0 (56 bf16 = 14 words), as rank 1 would write it, without its LSE line
            var layout = new WorkspaceSpec(1, 1, cp, 56, DType.BF16).layout();
            Ll128Lines.putDataLineRelease(group.workspace(0).memory(), layout.dataLineOffset(0, 1, 0, 0),
                    g.partialO().get(1).memory(), 0, 112, io.github.dcp4j.layout.Ll128.dataFlag(0));
            ReduceCall call = DcpLseReduce.validate(g.partialO().get(0), g.partialLse().get(0),
                    Tensors.outputs(arena, g).getFirst(), group.workspace(0), 0, cp, LseMode.BASE2);
            PeerTimeoutException e = assertThrows(PeerTimeoutException.class, () -> group.runRanks(List.of(call)));
            assertEquals(1, e.sourceRank());
            assertTrue(e.lseLine());
            assertTrue(e.getMessage().contains("LSE line of group 0"), e.getMessage());
        }
    }

    /** One ordered stream per workspace: a second concurrent call on the same workspace is refused. */
    @Test
    void aSecondConcurrentCallOnOneWorkspaceIsRefused() throws Exception {
        int cp = 2;
        try (Arena arena = Arena.ofShared();
             CpuEngine group = CpuEngine.open(new WorkspaceSpec(1, 1, cp, 64, DType.BF16), Duration.ofSeconds(5))) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(11), 1, 1, cp, 64, DType.BF16, 3.0);
            var firstResult = new java.util.concurrent.CompletableFuture<TensorView>();
            Thread first = Thread.ofPlatform().start(() -> {
                try {
                    firstResult.complete(DcpLseReduce.reduce(g.partialO().get(0), g.partialLse().get(0),
                            group.workspace(0), 0, cp));
                } catch (Throwable t) {
                    firstResult.completeExceptionally(t);
                }
            });
            while (!group.workspace(0).inCall()) {
                Thread.onSpinWait();
            }
            IllegalStateException e = assertThrows(IllegalStateException.class,
                    () -> DcpLseReduce.reduce(g.partialO().get(0), g.partialLse().get(0), group.workspace(0), 0, cp));
            assertTrue(e.getMessage().contains("one ordered stream"), e.getMessage());
            TensorView second = DcpLseReduce.reduce(g.partialO().get(1), g.partialLse().get(1), group.workspace(1),
                    1, cp);
            first.join();
            assertArrayEquals(Tensors.exact(arena, g, 0, LseMode.BASE2), Tensors.bits(firstResult.get()),
                    "the first call completes untouched by the refused one");
            assertArrayEquals(Tensors.exact(arena, g, 1, LseMode.BASE2), Tensors.bits(second));
        }
    }

    @Test
    void memoryConfinedToOneThreadIsRefusedBeforeAnyRankStarts() {
        try (Arena confined = Arena.ofConfined();
             CpuEngine group = CpuEngine.open(new WorkspaceSpec(1, 1, 2, 64, DType.BF16))) {
            Tensors.Group g = Tensors.packed(confined, new SplittableRandom(12), 1, 1, 2, 64, DType.BF16, 3.0);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> group.reduceAll(g.partialO(), g.partialLse(), LseMode.BASE2));
            assertTrue(e.getMessage().contains("confined"), e.getMessage());
            assertEquals(0, group.workspace(0).epoch(), "nothing ran");
        }
    }
}
