package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.Tensors;
import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.CudaGraph;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.engine.cpu.CpuEngine;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.layout.Ll128Lines;
import io.github.dcp4j.layout.WorkspaceLayout;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceShape;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.reference.ConformanceCases;
import io.github.dcp4j.reference.Fp64Oracle;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The LL128 kernel on a GPU, all ranks in loopback: the CPU engine's cases, the CUDA result against the CPU engine (bit
 * for bit: both compute ExactMerge's arithmetic) and the fp64 oracle, graphs, the stream rule, provoked timeouts
 * (eager and inside a replayed graph), a line-tearing stress, and the byte-for-byte agreement of the Java layout and
 * the kernel's. Skipped where no CUDA driver loads.
 */
@Tag("gpu")
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class CudaGroupTest {
    private static CudaDevice device;

    @BeforeAll
    static void openDevice() {
        Cuda.Availability a = Cuda.availability();
        Assumptions.assumeTrue(a.available(), () -> "no CUDA device: " + a.reason());
        device = CudaDevice.open(0);
    }

    @AfterAll
    static void closeDevice() {
        if (device != null) {
            device.close();
        }
    }

    static Stream<Arguments> dtypesAndModes() {
        return Stream.of(DType.FP16, DType.BF16).flatMap(d -> Stream.of(LseMode.values()).map(m -> Arguments.of(d, m)));
    }

    /** Within rtol 1e-2, atol 2e-3 of fp64 (bf16 / fp16 rounding of the output). */
    static void assertClose(Tensors.Group g, int rank, TensorView out, LseMode mode) {
        double[] ref = Fp64Oracle.reduce(g.partialO(), g.partialLse(), rank, mode);
        for (int i = 0; i < ref.length; i++) {
            double got = out.loadFloat(out.offset() + i);
            assertTrue(Math.abs(got - ref[i]) <= 2e-3 + 1e-2 * Math.abs(ref[i]),
                    "rank " + rank + " element " + i + ": " + got + " vs " + ref[i]);
        }
    }

    /** One call on the GPU, every rank checked against fp64 and against the CPU engine, bit for bit. */
    static List<TensorView> callAndCheck(LocalGroup gpu, Arena arena, Tensors.Group g, LseMode mode) {
        List<TensorView> out = Tensors.outputs(arena, g);
        gpu.reduceAll(g.partialO(), g.partialLse(), out, mode);
        WorkspaceSpec spec = specFor(g);
        try (CpuEngine cpu = CpuEngine.open(spec)) {
            List<TensorView> cpuOut = cpu.reduceAll(g.partialO(), g.partialLse(), mode);
            for (int r = 0; r < g.cp(); r++) {
                assertClose(g, r, out.get(r), mode);
                assertArrayEquals(Tensors.bits(cpuOut.get(r)), Tensors.bits(out.get(r)),
                        "rank " + r + ": the GPU's output is the CPU engine's bit for bit");
            }
        }
        return out;
    }

    static WorkspaceSpec specFor(Tensors.Group g) {
        TensorView o = g.partialO().getFirst();
        long[] s = o.shape();
        return new WorkspaceSpec((int) s[0], (int) s[1], g.cp(), (int) s[3], o.dtype());
    }

    static List<ConformanceCases.Case> conformance() {
        return ConformanceCases.all();
    }

    /**
     * The shared conformance cases (upstream's test_lse_reduce, its strided-input and row-count tests among them), on
     * one workspace per case: every call within the fp64 oracle's tolerance and equal to the CPU engine bit for bit;
     * an empty row (every LSE -inf) is zeros; the slots alternate by the device-side counter.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("conformance")
    void conformanceCase(ConformanceCases.Case c) {
        int cp = 4;
        try (Arena arena = Arena.ofShared(); CudaGroup gpu = CudaGroup.open(device, c.spec(cp))) {
            for (int call = 0; call < c.tokens().size(); call++) {
                assertEquals(call, gpu.epoch(0), "the device-side counter before call " + call);
                Tensors.Group g = Tensors.of(c.inputs(arena, ConformanceCases.SEED, cp, call));
                List<TensorView> out = callAndCheck(gpu, arena, g, c.mode());
                if (c.rows() == ConformanceCases.LseRows.SPECIAL) {
                    for (int r = 0; r < cp; r++) {
                        for (int i = 0; i < c.headDim(); i++) {
                            assertEquals(0, out.get(r).loadBits(i), "rank " + r + ": row (0, 0) is empty: zeros");
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
             CudaGroup gpu = CudaGroup.open(device, new WorkspaceSpec(3, 4, 1, 128, dtype))) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(1), 3, 4, 1, 128, dtype, 5.0);
            List<TensorView> out = gpu.reduceAll(g.partialO(), g.partialLse(), mode);
            assertArrayEquals(Tensors.bits(g.partialO().getFirst()), Tensors.bits(out.getFirst()));
        }
    }

    /** Every head_dim the row limit allows, through the kernel (cp = 2), both dtypes: line packing round trips. */
    @ParameterizedTest
    @ValueSource(strings = {"FP16", "BF16"})
    void everyAllowedHeadDimRoundTripsThroughTheKernel(String dtypeName) {
        DType dtype = DType.valueOf(dtypeName);
        SplittableRandom random = new SplittableRandom(2);
        for (int headDim = 8; headDim * 2 <= Ll128.MAX_ROW_DATA_BYTES; headDim += 8) {
            try (Arena arena = Arena.ofShared();
                 CudaGroup gpu = CudaGroup.open(device, new WorkspaceSpec(1, 1, 2, headDim, dtype))) {
                Tensors.Group g = Tensors.packed(arena, random, 1, 1, 2, headDim, dtype, 2.0);
                List<TensorView> out = gpu.reduceAll(g.partialO(), g.partialLse(), LseMode.BASE2);
                for (int r = 0; r < 2; r++) {
                    assertClose(g, r, out.get(r), LseMode.BASE2);
                }
            }
        }
    }

    /**
     * Between calls no data line of any rank's device workspace carries the flag of any of the next calls (consumed
     * lines are discarded, so their memory is whatever it was: never a later call's keyed flag), and every LSE line
     * is zero.
     */
    @Test
    void betweenCallsNoLineLooksReadyForALaterCall() {
        int cp = 3;
        WorkspaceSpec spec = new WorkspaceSpec(4, 2, cp, 200, DType.FP16);
        WorkspaceLayout layout = spec.layout();
        try (Arena arena = Arena.ofShared(); CudaGroup gpu = CudaGroup.open(device, spec)) {
            SplittableRandom random = new SplittableRandom(13);
            MemorySegment ws = arena.allocate(spec.bytes(), Ll128.LINE_BYTES);
            for (int call = 0; call < 5; call++) {
                callAndCheck(gpu, arena, Tensors.packed(arena, random, 1 + call % 4, 2, cp, 200, DType.FP16, 3.0),
                        LseMode.BASE2);
                for (int r = 0; r < cp; r++) {
                    gpu.copyWorkspace(r, ws);
                    int next = gpu.epoch(r);
                    int era = gpu.era(r);
                    for (int slot = 0; slot < 2; slot++) {
                        for (int src = 0; src < cp; src++) {
                            for (int row = 0; row < layout.maxRows(); row++) {
                                for (int line = 0; line < layout.row().dataLines(); line++) {
                                    long flag = Ll128Lines.getDataFlagAcquire(ws,
                                            layout.dataLineOffset(slot, src, row, line));
                                    for (int later = 0; later < 8; later++) {
                                        assertNotEquals(Ll128.keyedDataFlag(gpu.flagKey(), era, next + later), flag,
                                                "call " + call + " rank " + r + " line " + slot + "/" + src + "/"
                                                        + row + "/" + line + " has the flag of epoch "
                                                        + (next + later));
                                    }
                                }
                                for (int grp = 0; grp < layout.row().lineGroups(); grp++) {
                                    long at = layout.lseLineOffset(slot, src, row, grp);
                                    assertEquals(0L, ws.get(ValueLayout.JAVA_LONG, at));
                                    assertEquals(0L, ws.get(ValueLayout.JAVA_LONG, at + 8));
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    @Test
    void callCounterReuseAndWrapWithTheDeviceCounterForced() {
        int cp = 4;
        try (Arena arena = Arena.ofShared();
             CudaGroup gpu = CudaGroup.open(device, new WorkspaceSpec(8, 2, cp, 128, DType.BF16))) {
            SplittableRandom random = new SplittableRandom(6);
            for (int i = 0; i < 3; i++) {
                gpu.forceEpoch(10);
                callAndCheck(gpu, arena, Tensors.packed(arena, random, 4, 2, cp, 128, DType.BF16, 3.0),
                        LseMode.BASE2);
                assertEquals(11, gpu.epoch(0));
            }
            gpu.forceEpoch((int) ((1L << 32) - 3));
            for (int tokens : new int[] {8, 1, 5, 8, 2, 8}) {
                callAndCheck(gpu, arena, Tensors.packed(arena, random, tokens, 2, cp, 128, DType.BF16, 3.0),
                        LseMode.BASE2);
            }
            for (int r = 0; r < cp; r++) {
                assertEquals(3, gpu.epoch(r), "2^32 - 3 + 6 wraps to 3 on rank " + r);
                assertEquals(5, gpu.era(r), "four forced epochs and one wrap advance the era on rank " + r);
            }
        }
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 2, 3, 8, 13, 32, 33, 64})
    void everyGroupSize(int cp) {
        try (Arena arena = Arena.ofShared();
             CudaGroup gpu = CudaGroup.open(device, new WorkspaceSpec(2, 3, cp, 40, DType.FP16))) {
            SplittableRandom random = new SplittableRandom(cp);
            for (int call = 0; call < 3; call++) {
                LseMode mode = call % 2 == 0 ? LseMode.BASE2 : LseMode.BASEE;
                Tensors.Group g = Tensors.strided(arena, random, 1 + call % 2, 3, cp, 40, DType.FP16, 4.0);
                List<TensorView> out = gpu.reduceAll(g.partialO(), g.partialLse(), mode);
                for (int r = 0; r < cp; r++) {
                    assertClose(g, r, out.get(r), mode);
                }
            }
        }
    }

    @Test
    void manyEagerCallsOnOneWorkspace() {
        int cp = 8;
        try (Arena arena = Arena.ofShared();
             CudaGroup gpu = CudaGroup.open(device, new WorkspaceSpec(4, 16, cp, 512, DType.BF16))) {
            SplittableRandom random = new SplittableRandom(7);
            for (int i = 0; i < 40; i++) {
                Tensors.Group g = Tensors.packed(arena, random, 1 + i % 4, 16, cp, 512, DType.BF16, 3.0);
                List<TensorView> out = gpu.reduceAll(g.partialO(), g.partialLse(), LseMode.BASE2);
                for (int r = 0; r < cp; r++) {
                    assertClose(g, r, out.get(r), LseMode.BASE2);
                }
            }
            assertEquals(40, gpu.epoch(0));
        }
    }

    /** Upstream test_lse_reduce_graph_many_calls: 16 calls captured in one graph, replayed 50 times, checked each time. */
    @Test
    void sixteenCallsInOneGraphReplayedFiftyTimes() {
        int cp = 4;
        try (Arena arena = Arena.ofShared();
             CudaGroup gpu = CudaGroup.open(device, new WorkspaceSpec(4, 16, cp, 512, DType.BF16));
             CudaStream stream = new CudaStream(device)) {
            SplittableRandom random = new SplittableRandom(8);
            List<Tensors.Group> cases = new ArrayList<>();
            List<KernelCall> calls = new ArrayList<>();
            List<List<TensorView>> outs = new ArrayList<>();
            for (int i = 0; i < 16; i++) {
                Tensors.Group g = Tensors.packed(arena, random, 1 + i % 4, 16, cp, 512, DType.BF16, 3.0);
                List<TensorView> out = Tensors.outputs(arena, g);
                cases.add(g);
                outs.add(out);
                calls.add(gpu.prepare(g.partialO(), g.partialLse(), out, LseMode.BASE2, stream));
            }
            calls.getFirst().run(); // one eager call before capture, as upstream binds the stream
            try (CudaGraph graph = CudaGraph.capture(stream, () -> calls.forEach(KernelCall::launch))) {
                for (int replay = 0; replay < 50; replay++) {
                    graph.replay(stream, 1);
                    calls.getFirst().checkStatus();
                    for (int i = 0; i < 16; i++) {
                        calls.get(i).readOutputs();
                        for (int r = 0; r < cp; r++) {
                            assertClose(cases.get(i), r, outs.get(i).get(r), LseMode.BASE2);
                        }
                    }
                }
            }
            assertEquals(1 + 50 * 16, gpu.epoch(0), "graph replays advance the device-side counter");
            calls.forEach(KernelCall::close);
        }
    }

    @Test
    void aSecondStreamIsRejected() {
        try (Arena arena = Arena.ofShared();
             CudaGroup gpu = CudaGroup.open(device, new WorkspaceSpec(1, 1, 2, 64, DType.BF16));
             CudaStream first = new CudaStream(device);
             CudaStream second = new CudaStream(device)) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(9), 1, 1, 2, 64, DType.BF16, 3.0);
            List<TensorView> out = Tensors.outputs(arena, g);
            try (KernelCall call = gpu.prepare(g.partialO(), g.partialLse(), out, LseMode.BASE2, first)) {
                call.run();
            }
            IllegalStateException e = assertThrows(IllegalStateException.class,
                    () -> gpu.prepare(g.partialO(), g.partialLse(), out, LseMode.BASE2, second));
            assertTrue(e.getMessage().contains("one ordered CUDA stream"), e.getMessage());
        }
    }

    /** A launch in which rank 5 never sends: the others give up within the timeout, naming it; reset recovers. */
    @Test
    void aRankThatNeverSendsTimesOutAndTheGpuStaysUsable() {
        int cp = 8;
        WorkspaceSpec spec = new WorkspaceSpec(2, 2, cp, 64, DType.BF16);
        try (Arena arena = Arena.ofShared();
             CudaGroup gpu = CudaGroup.open(device, spec, Duration.ofMillis(500))) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(10), 2, 2, cp, 64, DType.BF16, 3.0);
            List<TensorView> out = Tensors.outputs(arena, g);
            List<ReduceCall> calls = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                calls.add(ReduceCall.validate(g.partialO().get(r), g.partialLse().get(r), out.get(r), r, cp,
                        LseMode.BASE2, new WorkspaceShape(cp, r, spec.bytes())));
            }
            long start = System.nanoTime();
            try (KernelCall call = gpu.prepareRanks(calls, new int[] {0, 1, 2, 3, 4, 6, 7})) {
                PeerTimeoutException e = assertThrows(PeerTimeoutException.class, call::run);
                double seconds = (System.nanoTime() - start) / 1e9;
                assertTrue(seconds < 5, "failed within the timeout, not after " + seconds + " s");
                assertEquals(5, e.sourceRank(), e.getMessage());
                assertTrue(e.getMessage().contains("source rank 5"), e.getMessage());
                assertEquals(6, e.getSuppressed().length, "every launched rank recorded its wait");
                call.readOutputs();
                for (int r : new int[] {0, 1, 2, 3, 4, 6, 7}) {
                    assertEveryElementNaN(out.get(r), "rank " + r + " timed out");
                }
            }
            assertThrows(IllegalStateException.class, () -> gpu.reduceAll(g.partialO(), g.partialLse(),
                    LseMode.BASE2));
            gpu.reset();
            callAndCheck(gpu, arena, g, LseMode.BASE2);
            callAndCheck(gpu, arena, Tensors.packed(arena, new SplittableRandom(11), 1, 2, cp, 64, DType.BF16, 3.0),
                    LseMode.BASE2);
        }
    }

    static void assertEveryElementNaN(TensorView t, String what) {
        for (long i = 0; i < t.numel(); i++) {
            assertTrue(Float.isNaN(t.loadFloat(t.offset() + i)), what + ": element " + i + " is " + t.loadFloat(
                    t.offset() + i) + ", not NaN");
        }
    }

    /**
     * A timeout inside a replayed graph is never silently wrong: rank 2 is left out of the captured call, so the others
     * time out; their outputs are NaN, their workspaces poisoned, the engine's status word set, and the explicit check
     * after the replay raises the first record. Replayed again, the poisoned ranks write NaN without waiting, also
     * after their epochs are forced back to the failed call's (its leftover lines would match otherwise). A reset
     * recovers. Both kernels, and the row kernel with blocks that take several rows in turn, and in hardware blocks
     * of four teams.
     */
    @ParameterizedTest(name = "gridPlan {0}")
    @ValueSource(strings = {"row=64", "row=64,maxBlocks=2", "row=64,maxBlocks=2,step=3", "row=64,teams=4", "row=0"})
    void aTimeoutInsideAReplayedGraphPoisonsUntilTheReset(String gridPlan) {
        withGridPlan(gridPlan, this::timeoutInsideAGraph);
    }

    private void timeoutInsideAGraph() {
        int cp = 4;
        WorkspaceSpec spec = new WorkspaceSpec(2, 3, cp, 256, DType.BF16);
        int[] withoutRank2 = {0, 1, 3};
        try (Arena arena = Arena.ofShared();
             CudaGroup gpu = CudaGroup.open(device, spec, Duration.ofMillis(300));
             CudaStream stream = new CudaStream(device)) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(14), 2, 3, cp, 256, DType.BF16, 2.0);
            List<TensorView> out = Tensors.outputs(arena, g);
            List<ReduceCall> calls = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                calls.add(ReduceCall.validate(g.partialO().get(r), g.partialLse().get(r), out.get(r), r, cp,
                        LseMode.BASE2, new WorkspaceShape(cp, r, spec.bytes())));
            }
            try (KernelCall partial = gpu.prepareRanks(calls, withoutRank2, stream);
                 CudaGraph graph = CudaGraph.capture(stream, partial::launch)) {
                long start = System.nanoTime();
                graph.replay(stream, 1);
                PeerTimeoutException e = assertThrows(PeerTimeoutException.class, partial::checkStatus);
                assertEquals(2, e.sourceRank(), e.getMessage());
                assertTrue((System.nanoTime() - start) / 1e9 < 5, "within the timeout");
                partial.readOutputs();
                for (int r : withoutRank2) {
                    assertTrue(gpu.poisoned(r), "rank " + r + "'s workspace is marked poisoned");
                    assertEveryElementNaN(out.get(r), "replay 1, rank " + r);
                    Tensors.fillSentinel(out.get(r));
                }
                int failedEpoch = gpu.epoch(0) - 1;

                long again = System.nanoTime();
                graph.replay(stream, 1);
                assertThrows(PeerTimeoutException.class, partial::checkStatus, "the status word stays set");
                assertTrue((System.nanoTime() - again) / 1e9 < 0.25, "a poisoned call does not wait");
                gpu.forceEpoch(failedEpoch);
                graph.replay(stream, 1);
                assertThrows(PeerTimeoutException.class, partial::checkStatus);
                partial.readOutputs();
                for (int r : withoutRank2) {
                    assertEveryElementNaN(out.get(r), "after the forced epoch, rank " + r);
                }
            }
            gpu.reset();
            for (int r = 0; r < cp; r++) {
                assertTrue(!gpu.poisoned(r), "reset clears the poison of rank " + r);
                assertEquals(0, gpu.epoch(r), "reset zeroes the epoch of rank " + r);
                assertEquals(2, gpu.era(r), "the forced epoch and the reset advance the era of rank " + r);
            }
            try (KernelCall full = gpu.prepare(g.partialO(), g.partialLse(), out, LseMode.BASE2, stream);
                 CudaGraph graph = CudaGraph.capture(stream, full::launch)) {
                graph.replay(stream, 3);
                full.checkStatus();
                full.readOutputs();
                for (int r = 0; r < cp; r++) {
                    assertArrayEquals(Tensors.exact(arena, g, r, LseMode.BASE2), Tensors.bits(out.get(r)),
                            "after the reset, rank " + r);
                }
            }
        }
    }

    /**
     * Line tearing: 8 ranks, 16 calls with different inputs captured in one graph and replayed 64 times, so every line
     * of both slots is rewritten with other data at a high rate while receivers poll it. A line whose flag were seen
     * before its data would merge another call's words (every weight is far from 0, so every word shows): every
     * output of every call is compared with the exact merge, bit for bit. Both kernels: the row kernel takes this
     * shape unless the grid plan says row=0, with a block per row or (maxBlocks=5) 5 blocks taking 64 rows in turn,
     * one, two or three at once, and in hardware blocks of four teams (teams=4; with maxBlocks=8, 8 blocks taking
     * rows in turn).
     */
    @ParameterizedTest(name = "gridPlan {0}")
    @ValueSource(strings = {"row=64", "row=64,maxBlocks=5,step=1", "row=64,maxBlocks=5,step=2",
        "row=64,maxBlocks=5,step=3", "row=64,teams=4", "row=64,maxBlocks=8,step=2,teams=4", "row=0"})
    void noTornLinesWhileEveryLineIsRewrittenAtAHighRate(String gridPlan) {
        withGridPlan(gridPlan, this::tornLines);
    }

    private void tornLines() {
        int cp = 8;
        int calls = 16;
        WorkspaceSpec spec = new WorkspaceSpec(4, 16, cp, 512, DType.BF16);
        try (Arena arena = Arena.ofShared();
             CudaGroup gpu = CudaGroup.open(device, spec);
             CudaStream stream = new CudaStream(device)) {
            SplittableRandom random = new SplittableRandom(15);
            List<KernelCall> prepared = new ArrayList<>();
            List<List<TensorView>> outs = new ArrayList<>();
            List<List<short[]>> expected = new ArrayList<>();
            for (int i = 0; i < calls; i++) {
                Tensors.Group g = Tensors.strided(arena, random, 4, 16, cp, 512, DType.BF16, 1.0);
                List<TensorView> out = Tensors.outputs(arena, g);
                outs.add(out);
                List<short[]> exact = new ArrayList<>();
                for (int r = 0; r < cp; r++) {
                    exact.add(Tensors.exact(arena, g, r, LseMode.BASE2));
                }
                expected.add(exact);
                prepared.add(gpu.prepare(g.partialO(), g.partialLse(), out, LseMode.BASE2, stream));
            }
            try (CudaGraph graph = CudaGraph.capture(stream, () -> prepared.forEach(KernelCall::launch))) {
                for (int replay = 0; replay < 64; replay++) {
                    graph.replay(stream, 1);
                    prepared.getFirst().checkStatus();
                    for (int i = 0; i < calls; i++) {
                        prepared.get(i).readOutputs();
                        for (int r = 0; r < cp; r++) {
                            assertArrayEquals(expected.get(i).get(r), Tensors.bits(outs.get(i).get(r)),
                                    "replay " + replay + ", call " + i + ", rank " + r);
                        }
                    }
                }
            }
            prepared.forEach(KernelCall::close);
        }
    }

    /**
     * The kernel's lines are the Java layout's, byte for byte: rank 1 alone sends (rank 0 never runs), and rank 0's
     * workspace then holds exactly the lines {@link Ll128Lines} describes for rank 1's slices. Both kernels, and the
     * row kernel's one block sending both rows before it waits (maxBlocks=1), and its two teams in one hardware block
     * (teams=2).
     */
    @ParameterizedTest(name = "gridPlan {0}")
    @ValueSource(strings = {"row=64", "row=64,maxBlocks=1", "row=64,maxBlocks=1,step=2", "row=64,teams=2", "row=0"})
    void kernelWritesTheJavaLayoutByteForByte(String gridPlan) {
        withGridPlan(gridPlan, this::javaLayout);
    }

    /**
     * The row kernel with fewer blocks than rows, so that each block takes several rows in turn (one block, a few,
     * all rows but one), one to four at once (step; the last step of a block often shorter), at several group
     * sizes, calls of decreasing row counts on one workspace, also in hardware blocks of several teams (teams, the
     * blocks rounded up to a multiple of them): every output is the exact merge, bit for bit; at head_dim 1024 a
     * row's lines fill more than half of the stage, so a step of 2 is taken one row at a time.
     */
    @ParameterizedTest(name = "cp {0}, maxBlocks {1}, head_dim {2}, {3}")
    @CsvSource({"2, 1, 512, 'step=1'", "2, 2, 512, 'step=4'", "8, 3, 512, 'step=1'", "8, 3, 512, 'step=2'",
        "8, 3, 512, 'step=3'", "8, 23, 512, 'step=2'", "13, 5, 512, 'step=2'", "8, 3, 1024, 'step=1'",
        "8, 3, 1024, 'step=2'", "8, 8, 512, 'step=2,teams=4'", "13, 4, 512, 'step=3,teams=2'"})
    void rowKernelBlocksTakingSeveralRowsInTurnMatchTheExactMerge(int cp, int maxBlocks, int headDim, String steps) {
        withGridPlan("row=64,maxBlocks=" + maxBlocks + "," + steps, () -> {
            int heads = 3;
            WorkspaceSpec spec = new WorkspaceSpec(8, heads, cp, headDim, DType.BF16);
            try (Arena arena = Arena.ofShared();
                 CudaGroup gpu = CudaGroup.open(device, spec);
                 CudaStream stream = new CudaStream(device)) {
                SplittableRandom random = new SplittableRandom(31L * cp + maxBlocks);
                for (int tokens = 8; tokens >= 5; tokens--) {
                    Tensors.Group g = Tensors.strided(arena, random, tokens, heads, cp, headDim, DType.BF16, 3.0);
                    List<TensorView> out = Tensors.outputs(arena, g);
                    try (KernelCall call = gpu.prepare(g.partialO(), g.partialLse(), out, LseMode.BASE2, stream)) {
                        assertTrue(call.rowKernel());
                        int rows = tokens * heads;
                        int lines = spec.layout().row().dataLines();
                        int stepRows = GridPlan.stepRows(rows, cp, lines, maxBlocks,
                                GridPlan.Tuning.fromSystemProperty());
                        int teams = call.teamsPerBlock();
                        assertEquals(Math.ceilDiv(Math.min(maxBlocks, Math.ceilDiv(rows, stepRows)), teams) * teams,
                                call.blocksPerRank());
                        call.run();
                        call.readOutputs();
                    }
                    for (int r = 0; r < cp; r++) {
                        assertArrayEquals(Tensors.exact(arena, g, r, LseMode.BASE2), Tensors.bits(out.get(r)),
                                tokens + " tokens, rank " + r);
                    }
                }
            }
        });
    }

    /** Runs {@code body} with the grid plan override {@code spec} (read when a call is prepared), then without. */
    private static void withGridPlan(String spec, Runnable body) {
        System.setProperty(GridPlan.Tuning.PROPERTY, spec);
        try {
            body.run();
        } finally {
            System.clearProperty(GridPlan.Tuning.PROPERTY);
        }
    }

    private void javaLayout() {
        int cp = 2;
        int headDim = 200; // 50 words: 4 lines (the last one part padding) in 1 group
        WorkspaceSpec spec = new WorkspaceSpec(2, 1, cp, headDim, DType.BF16);
        WorkspaceLayout layout = spec.layout();
        try (Arena arena = Arena.ofShared();
             CudaGroup gpu = CudaGroup.open(device, spec, Duration.ofMillis(200))) {
            gpu.forceEpoch(6); // slot 0, flags of epoch 6
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(12), 2, 1, cp, headDim, DType.BF16, 3.0);
            List<TensorView> out = Tensors.outputs(arena, g);
            List<ReduceCall> calls = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                calls.add(ReduceCall.validate(g.partialO().get(r), g.partialLse().get(r), out.get(r), r, cp,
                        LseMode.BASE2, new WorkspaceShape(cp, r, spec.bytes())));
            }
            try (KernelCall call = gpu.prepareRanks(calls, new int[] {1})) {
                assertThrows(PeerTimeoutException.class, call::run);
            }
            MemorySegment ws = arena.allocate(spec.bytes(), Ll128.LINE_BYTES);
            gpu.copyWorkspace(0, ws);
            ValueLayout.OfLong word = ValueLayout.JAVA_LONG.withOrder(ByteOrder.LITTLE_ENDIAN);
            TensorView o1 = g.partialO().get(1);
            for (int row = 0; row < 2; row++) {
                long slice = o1.elementOffset(row, 0, 0, 0) * 2; // rank 1's slice for rank 0
                for (int line = 0; line < layout.row().dataLines(); line++) {
                    long at = layout.dataLineOffset(0, 1, row, line);
                    for (int k = 0; k < Ll128.LINE_DATA_WORDS; k++) {
                        int j = line * Ll128.LINE_DATA_WORDS + k;
                        long expected = j < layout.row().dataWords() ? o1.memory().get(word, slice + 8L * j) : 0L;
                        assertEquals(expected, ws.get(word, at + 8L * k), "row " + row + " line " + line + " word " + k);
                    }
                    assertEquals(Ll128.keyedDataFlag(gpu.flagKey(), 1, 6), Ll128Lines.getDataFlagAcquire(ws, at),
                            "the keyed flag of epoch 6 in era 1 (the forced epoch advanced the era)");
                }
                long lse = layout.lseLineOffset(0, 1, row, 0);
                assertTrue(Ll128Lines.isLseLineReadyAcquire(ws, lse, Ll128.lseFlag(6)));
                assertEquals(Float.floatToRawIntBits(g.partialLse().get(1).getFloat(row, 0, 0)),
                        Ll128Lines.getLseBitsPlain(ws, lse));
            }
        }
    }
}
