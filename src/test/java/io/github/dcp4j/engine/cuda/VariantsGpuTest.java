package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.Tensors;
import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.CudaGraph;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.engine.cpu.CpuEngine;
import io.github.dcp4j.layout.FencedLayout;
import io.github.dcp4j.layout.LlLayout;
import io.github.dcp4j.op.Crossovers;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.Variant;
import io.github.dcp4j.op.WorkspaceShape;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.reference.ConformanceCases;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

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

import static io.github.dcp4j.engine.cuda.CudaGroupTest.assertEveryElementNaN;
import static io.github.dcp4j.engine.cuda.CudaGroupTest.callAndCheck;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every protocol variant (op.Variant) on a GPU, all ranks in loopback, through the same cases as the LL128 kernel:
 * the conformance cases (NaN and +-inf LSE rows, strided views, the row-count sequence), the counter's reuse and
 * wrap, graph replays, a rank that never sends (the others time out naming it), and flags zero between calls; each
 * output equal to the CPU engine's (ExactMerge's arithmetic) bit for bit, and the variants' outputs equal to each
 * other's. Auto runs with crossovers that send small calls to ll, middle ones to ll128 and large ones to simple, so
 * that one group's calls move between its regions. Skipped where no CUDA driver loads.
 */
@Tag("gpu")
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class VariantsGpuTest {
    /** Auto's crossovers in these tests: ll below 4 KiB per rank, ll128 below 64 KiB, simple from there. */
    static final Crossovers MIXED = new Crossovers(List.of(new Crossovers.Step(Variant.LL, 0),
            new Crossovers.Step(Variant.LL128, 4096), new Crossovers.Step(Variant.SIMPLE, 65536)), "the tests' mix");

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

    static CudaGroup open(Variant variant, WorkspaceSpec spec, Duration timeout) {
        return CudaGroup.open(device, spec, timeout, variant, MIXED);
    }

    static CudaGroup open(Variant variant, WorkspaceSpec spec) {
        return open(variant, spec, CudaGroup.DEFAULT_TIMEOUT);
    }

    static Stream<Arguments> variantsAndCases() {
        return Stream.of(Variant.values()).flatMap(v -> ConformanceCases.all().stream().map(c -> Arguments.of(v, c)));
    }

    /** The conformance cases, one workspace per case and variant, every call the CPU engine's bit for bit. */
    @ParameterizedTest(name = "{0}: {1}")
    @MethodSource("variantsAndCases")
    void conformanceCase(Variant variant, ConformanceCases.Case c) {
        int cp = 4;
        try (Arena arena = Arena.ofShared(); CudaGroup gpu = open(variant, c.spec(cp))) {
            for (int call = 0; call < c.tokens().size(); call++) {
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

    /** The same fresh inputs through every variant: equal outputs, bit for bit, cp 1 to 64, both dtypes and bases. */
    @Test
    void everyVariantGivesTheSameBits() {
        SplittableRandom random = new SplittableRandom();
        int[][] shapes = {{1, 2, 3, 64}, {3, 16, 8, 512}, {5, 4, 5, 136}, {2, 1, 64, 40}, {2, 3, 1, 128}};
        for (int[] s : shapes) {
            for (DType dtype : new DType[] {DType.BF16, DType.FP16}) {
                for (LseMode mode : LseMode.values()) {
                    try (Arena arena = Arena.ofShared()) {
                        Tensors.Group g = Tensors.strided(arena, random, s[0], s[1], s[2], s[3], dtype, 4.0);
                        WorkspaceSpec spec = new WorkspaceSpec(s[0], s[1], s[2], s[3], dtype);
                        List<short[]> first = null;
                        for (Variant v : Variant.values()) {
                            List<short[]> bits = new ArrayList<>();
                            try (CudaGroup gpu = open(v, spec)) {
                                for (TensorView o : callAndCheck(gpu, arena, g, mode)) {
                                    bits.add(Tensors.bits(o));
                                }
                            }
                            if (first == null) {
                                first = bits;
                            }
                            for (int r = 0; r < s[2]; r++) {
                                assertArrayEquals(first.get(r), bits.get(r), v + " rank " + r + " shape "
                                        + List.of(s[0], s[1], s[2], s[3]) + " " + dtype + " " + mode);
                            }
                        }
                    }
                }
            }
        }
    }

    /** One auto group whose calls alternate between ll, ll128 and simple: its regions never disturb each other. */
    @Test
    void autoMovesBetweenItsRegionsCallByCall() {
        int cp = 4;
        int heads = 4;
        int headDim = 64;  // 2 KiB per rank and token: ll at 1 token, ll128 at 2 to 31, simple from 32
        try (Arena arena = Arena.ofShared();
             CudaGroup gpu = open(Variant.AUTO, new WorkspaceSpec(32, heads, cp, headDim, DType.BF16))) {
            SplittableRandom random = new SplittableRandom();
            List<Variant> seen = new ArrayList<>();
            for (int tokens : new int[] {32, 1, 4, 16, 1, 32, 2, 1, 20, 3}) {
                Variant v = gpu.variantFor(tokens * heads, headDim, DType.BF16);
                seen.add(v);
                Tensors.Group g = Tensors.packed(arena, random, tokens, heads, cp, headDim, DType.BF16, 3.0);
                try (CudaGroup.Prepared prepared = gpu.prepare(g.partialO(), g.partialLse(),
                        Tensors.outputs(arena, g), LseMode.BASE2)) {
                    KernelCall call = prepared.launches().getFirst();
                    assertEquals(v, call.variant());
                    assertTrue(call.toString().contains("variant " + v), call.toString());
                }
                callAndCheck(gpu, arena, g, LseMode.BASE2);
            }
            assertTrue(seen.containsAll(List.of(Variant.LL, Variant.LL128, Variant.SIMPLE)), seen.toString());
            assertTrue(gpu.toString().contains("variant auto (the tests' mix)"), gpu.toString());
        }
    }

    @ParameterizedTest
    @EnumSource(Variant.class)
    void callCounterReuseAndWrapWithTheDeviceCounterForced(Variant variant) {
        int cp = 4;
        try (Arena arena = Arena.ofShared();
             CudaGroup gpu = open(variant, new WorkspaceSpec(8, 2, cp, 128, DType.BF16))) {
            SplittableRandom random = new SplittableRandom();
            for (int i = 0; i < 3; i++) {
                gpu.forceEpoch(10);
                callAndCheck(gpu, arena, Tensors.packed(arena, random, 4, 2, cp, 128, DType.BF16, 3.0),
                        LseMode.BASE2);
            }
            gpu.forceEpoch((int) ((1L << 32) - 3));
            for (int tokens : new int[] {8, 1, 5, 8, 2, 8}) {
                callAndCheck(gpu, arena, Tensors.packed(arena, random, tokens, 2, cp, 128, DType.BF16, 3.0),
                        LseMode.BASE2);
            }
            if (variant != Variant.AUTO) {  // auto's calls above went to several regions, each with its counter
                for (int r = 0; r < cp; r++) {
                    assertEquals(3, gpu.epoch(r), "2^32 - 3 + 6 wraps to 3 on rank " + r);
                }
            }
        }
    }

    /** 16 calls of several sizes captured in one graph, replayed 20 times, each replay checked. */
    @ParameterizedTest
    @EnumSource(Variant.class)
    void sixteenCallsInOneGraphReplayed(Variant variant) {
        int cp = 4;
        try (Arena arena = Arena.ofShared();
             CudaGroup gpu = open(variant, new WorkspaceSpec(4, 16, cp, 512, DType.BF16));
             CudaStream stream = new CudaStream(device)) {
            SplittableRandom random = new SplittableRandom();
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
            calls.getFirst().run();
            try (CudaGraph graph = CudaGraph.capture(stream, () -> calls.forEach(KernelCall::launch))) {
                for (int replay = 0; replay < 20; replay++) {
                    graph.replay(stream, 1);
                    calls.getFirst().checkStatus();
                    for (int i = 0; i < 16; i++) {
                        calls.get(i).readOutputs();
                        for (int r = 0; r < cp; r++) {
                            assertArrayEquals(Tensors.exact(arena, cases.get(i), r, LseMode.BASE2),
                                    Tensors.bits(outs.get(i).get(r)), "replay " + replay + " call " + i + " rank " + r);
                        }
                    }
                }
            }
            calls.forEach(KernelCall::close);
        }
    }

    /**
     * A launch in which rank 5 never sends: the others give up within the timeout naming it, every output is NaN, a
     * replay of the failed call writes NaN without waiting, and a reset recovers.
     */
    @ParameterizedTest
    @EnumSource(Variant.class)
    void aRankThatNeverSendsTimesOutNamingIt(Variant variant) {
        int cp = 8;
        WorkspaceSpec spec = new WorkspaceSpec(2, 2, cp, 64, DType.BF16);
        int[] without5 = {0, 1, 2, 3, 4, 6, 7};
        try (Arena arena = Arena.ofShared(); CudaGroup gpu = open(variant, spec, Duration.ofMillis(500));
             CudaStream stream = new CudaStream(device)) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(), 2, 2, cp, 64, DType.BF16, 3.0);
            List<TensorView> out = Tensors.outputs(arena, g);
            List<ReduceCall> calls = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                calls.add(ReduceCall.validate(g.partialO().get(r), g.partialLse().get(r), out.get(r), r, cp,
                        LseMode.BASE2, new WorkspaceShape(cp, r, spec.bytes())));
            }
            try (KernelCall call = gpu.prepareRanks(calls, without5, stream);
                 CudaGraph graph = CudaGraph.capture(stream, call::launch)) {
                long start = System.nanoTime();
                graph.replay(stream, 1);
                PeerTimeoutException e = assertThrows(PeerTimeoutException.class, call::checkStatus);
                assertTrue((System.nanoTime() - start) / 1e9 < 5, "failed within the timeout");
                assertEquals(5, e.sourceRank(), e.getMessage());
                assertTrue(e.getMessage().contains("source rank 5"), e.getMessage());
                call.readOutputs();
                for (int r : without5) {
                    assertTrue(gpu.poisoned(r), "rank " + r + "'s workspace is marked poisoned");
                    assertEveryElementNaN(out.get(r), "rank " + r + " timed out");
                    Tensors.fillSentinel(out.get(r));
                }
                long again = System.nanoTime();
                graph.replay(stream, 1);
                assertThrows(PeerTimeoutException.class, call::checkStatus, "the status word stays set");
                assertTrue((System.nanoTime() - again) / 1e9 < 0.25, "a poisoned call does not wait");
                call.readOutputs();
                for (int r : without5) {
                    assertEveryElementNaN(out.get(r), "replayed, rank " + r);
                }
            }
            gpu.reset();
            // the next call on the stream the group is bound to: every rank the CPU engine's bit for bit
            List<TensorView> after = Tensors.outputs(arena, g);
            try (KernelCall call = gpu.prepare(g.partialO(), g.partialLse(), after, LseMode.BASE2, stream)) {
                call.run();
                call.readOutputs();
            }
            try (CpuEngine cpu = CpuEngine.open(spec)) {
                List<TensorView> expected = cpu.reduceAll(g.partialO(), g.partialLse(), LseMode.BASE2);
                for (int r = 0; r < cp; r++) {
                    assertArrayEquals(Tensors.bits(expected.get(r)), Tensors.bits(after.get(r)),
                            "after the reset, rank " + r + "'s output is the CPU engine's bit for bit");
                }
            }
        }
    }

    /**
     * The edge case: an auto group's calls of two variants share one status word; a timeout recorded in simple's
     * region is reported by a call that runs in ll128's, and by the group.
     */
    @Test
    void autoReportsATimeoutOfOneRegionToACallOfAnother() {
        int cp = 4;
        int heads = 4;
        int headDim = 64;  // 2 KiB per rank and token: ll128 at 2 tokens, simple at 32
        WorkspaceSpec spec = new WorkspaceSpec(32, heads, cp, headDim, DType.BF16);
        int[] without3 = {0, 1, 2};
        try (Arena arena = Arena.ofShared(); CudaGroup gpu = open(Variant.AUTO, spec, Duration.ofMillis(500));
             CudaStream stream = new CudaStream(device)) {
            SplittableRandom random = new SplittableRandom();
            Tensors.Group small = Tensors.packed(arena, random, 2, heads, cp, headDim, DType.BF16, 3.0);
            Tensors.Group large = Tensors.packed(arena, random, 32, heads, cp, headDim, DType.BF16, 3.0);
            List<TensorView> out = Tensors.outputs(arena, large);
            List<ReduceCall> calls = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                calls.add(ReduceCall.validate(large.partialO().get(r), large.partialLse().get(r), out.get(r), r, cp,
                        LseMode.BASE2, new WorkspaceShape(cp, r, spec.bytes())));
            }
            try (KernelCall ll128 = gpu.prepare(small.partialO(), small.partialLse(), Tensors.outputs(arena, small),
                    LseMode.BASE2, stream);
                 KernelCall simple = gpu.prepareRanks(calls, without3, stream)) {
                assertEquals(Variant.LL128, ll128.variant());
                assertEquals(Variant.SIMPLE, simple.variant());
                simple.launch();
                stream.synchronize();
                PeerTimeoutException e = assertThrows(PeerTimeoutException.class, ll128::checkStatus);
                assertEquals(3, e.sourceRank(), e.getMessage());
                assertThrows(PeerTimeoutException.class, gpu::checkStatus);
            }
            gpu.reset();
            List<TensorView> after = Tensors.outputs(arena, small);
            try (KernelCall call = gpu.prepare(small.partialO(), small.partialLse(), after, LseMode.BASE2, stream)) {
                call.run();
                call.readOutputs();
            }
            try (CpuEngine cpu = CpuEngine.open(spec)) {
                List<TensorView> expected = cpu.reduceAll(small.partialO(), small.partialLse(), LseMode.BASE2);
                for (int r = 0; r < cp; r++) {
                    assertArrayEquals(Tensors.bits(expected.get(r)), Tensors.bits(after.get(r)),
                            "after the reset, rank " + r + "'s output is the CPU engine's bit for bit");
                }
            }
        }
    }

    /** Between calls every flag of ll's lines and of simple's and unfused's chunks is zero: readers consumed them. */
    @ParameterizedTest
    @EnumSource(value = Variant.class, names = {"LL", "SIMPLE", "UNFUSED"})
    void betweenCallsEveryFlagIsZero(Variant variant) {
        int cp = 3;
        WorkspaceSpec spec = new WorkspaceSpec(4, 2, cp, 200, DType.FP16);
        try (Arena arena = Arena.ofShared(); CudaGroup gpu = open(variant, spec)) {
            SplittableRandom random = new SplittableRandom();
            MemorySegment ws = arena.allocate(variant.workspaceBytes(spec), 128);
            ValueLayout.OfInt u32 = ValueLayout.JAVA_INT.withOrder(ByteOrder.LITTLE_ENDIAN);
            for (int call = 0; call < 5; call++) {
                callAndCheck(gpu, arena, Tensors.packed(arena, random, 1 + call % 4, 2, cp, 200, DType.FP16, 3.0),
                        LseMode.BASE2);
                for (int r = 0; r < cp; r++) {
                    gpu.copyWorkspace(r, ws);
                    for (int slot = 0; slot < 2; slot++) {
                        for (int src = 0; src < cp; src++) {
                            for (int row = 0; row < spec.maxRows(); row++) {
                                String at = "call " + call + " rank " + r + " slot " + slot + " src " + src + " row "
                                        + row;
                                if (variant == Variant.LL) {
                                    LlLayout ll = new LlLayout(cp, spec.maxRows(), spec.rowLayout());
                                    for (int k = 0; k < ll.linesPerRow(); k++) {
                                        assertEquals(0, ws.get(u32, ll.dataLineOffset(slot, src, row, k) + 4), at);
                                    }
                                    assertEquals(0, ws.get(u32, ll.lseLineOffset(slot, src, row) + 4), at);
                                } else {
                                    FencedLayout f = new FencedLayout(cp, spec.maxRows(), spec.rowLayout());
                                    assertEquals(0, ws.get(u32, f.flagOffset(slot, src, row)), at + " (chunk)");
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
