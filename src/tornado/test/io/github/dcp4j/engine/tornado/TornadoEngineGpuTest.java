package io.github.dcp4j.engine.tornado;

import io.github.dcp4j.Tensors;
import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.engine.cpu.CpuEngine;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.layout.Ll128Lines;
import io.github.dcp4j.layout.RowLayout;
import io.github.dcp4j.layout.WorkspaceLayout;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.TensorView;
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
import org.junit.jupiter.params.provider.MethodSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The TornadoVM engine on a GPU: the shared conformance cases at cp 2, 4, 8 and 64 (or those
 * {@code -Ddcp4j.tornado.test.cp} lists) against the CPU engine (outputs
 * bit for bit: both compute ExactMerge's arithmetic), with TornadoVM's CUDA graphs, with the example user merge (and
 * the one {@code -Ddcp4j.tornado.merge} names), a provoked timeout with its record, poison and reset. The cases of one
 * spec share a group, so they also run one after the other on one set of workspaces. Skipped where
 * TornadoVM's runtime does not start (a JVM without TornadoVM's argument file, or no GPU).
 */
@Tag("gpu")
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class TornadoEngineGpuTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(5);

    @BeforeAll
    static void requireTornadoVm() {
        String why = TornadoEngine.unavailableReason();
        Assumptions.assumeTrue(why == null, () -> "no TornadoVM device: " + why);
    }

    /** The system property that lists the cp values of {@link #conformanceCase} (the bundle runs 64 apart). */
    static final String CP_PROPERTY = "dcp4j.tornado.test.cp";

    static Stream<Arguments> conformance() {
        return Stream.of(System.getProperty(CP_PROPERTY, "2,4,8,64").split(",")).map(String::strip)
                .map(Integer::parseInt)
                .flatMap(cp -> ConformanceCases.all().stream().map(c -> Arguments.of(cp, c)));
    }

    @ParameterizedTest(name = "cp {0}: {1}")
    @MethodSource("conformance")
    void conformanceCase(int cp, ConformanceCases.Case c) {
        runCase(cp, c, new TornadoEngine.Options(MergeVariant.standard(), false, false));
    }

    /** The cases at cp 8 with executions replaying TornadoVM's CUDA graph (one graph, every row count). */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.github.dcp4j.reference.ConformanceCases#all")
    void conformanceCaseWithCudaGraphs(ConformanceCases.Case c) {
        runCase(8, c, new TornadoEngine.Options(MergeVariant.standard(), true, false));
    }

    /** The cases at cp 4 with the example of a user's merge, and with the merge the system property names. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("io.github.dcp4j.reference.ConformanceCases#all")
    void conformanceCaseWithSuppliedMerges(ConformanceCases.Case c) {
        runCase(4, c, new TornadoEngine.Options(
                MergeVariant.named(ExampleMerges.class.getName() + "::elementPerThread"), false, false));
        if (System.getProperty(MergeVariant.PROPERTY) != null) {
            runCase(4, c, TornadoEngine.Options.fromSystemProperties());
        }
    }

    /** A group per spec and options: the cases of both LSE modes share one (TornadoVM compiles once per group). */
    private record GroupKey(WorkspaceSpec spec, String merge, boolean cudaGraph) {
    }

    /** The groups of the latest cases, the least recently used closed beyond {@link #OPEN_GROUPS}. */
    private static final Map<GroupKey, TornadoEngine> GROUPS = new LinkedHashMap<>(16, 0.75f, true);
    private static final int OPEN_GROUPS = 4;

    @AfterAll
    static void closeGroups() {
        GROUPS.values().forEach(TornadoEngine::close);
        GROUPS.clear();
    }

    private static TornadoEngine group(WorkspaceSpec spec, TornadoEngine.Options options) {
        GroupKey key = new GroupKey(spec, options.merge().name(), options.cudaGraph());
        TornadoEngine engine = GROUPS.get(key);
        if (engine == null) {
            if (GROUPS.size() == OPEN_GROUPS) {
                GroupKey eldest = GROUPS.keySet().iterator().next();
                GROUPS.remove(eldest).close();
            }
            engine = TornadoEngine.open(spec, TIMEOUT, options);
            GROUPS.put(key, engine);
        }
        return engine;
    }

    private static void runCase(int cp, ConformanceCases.Case c, TornadoEngine.Options options) {
        try {
            runCase(cp, c, options, group(c.spec(cp), options));
        } catch (RuntimeException | AssertionError e) {
            // a failed case leaves its group in an unknown state (poisoned, say): the next case gets a fresh one
            TornadoEngine failed = GROUPS.remove(new GroupKey(c.spec(cp), options.merge().name(), options.cudaGraph()));
            if (failed != null) {
                failed.close();
            }
            throw e;
        }
    }

    private static void runCase(int cp, ConformanceCases.Case c, TornadoEngine.Options options,
                                TornadoEngine tornado) {
        int epochBefore = options.cudaGraph() ? 0 : tornado.epoch(0);
        try (Arena arena = Arena.ofShared(); CpuEngine cpu = CpuEngine.open(c.spec(cp))) {
            for (int call = 0; call < c.tokens().size(); call++) {
                Tensors.Group g = Tensors.of(c.inputs(arena, ConformanceCases.SEED, cp, call));
                List<TensorView> expected = cpu.reduceAll(g.partialO(), g.partialLse(), c.mode());
                List<TensorView> got = tornado.reduceAll(g.partialO(), g.partialLse(), c.mode());
                for (int r = 0; r < cp; r++) {
                    assertArrayEquals(Tensors.bits(expected.get(r)), Tensors.bits(got.get(r)),
                            c + " cp " + cp + " call " + call + " merge " + options.merge().name() + " rank " + r);
                }
            }
            if (!options.cudaGraph()) {
                // an under-demand read-back, asked outside TornadoVM's graph mode only (replays: checked by outputs)
                assertEquals(epochBefore + c.tokens().size(), tornado.epoch(0), "one epoch per call");
                assertEveryFlagZero(tornado, c.spec(cp), c + " cp " + cp);
            }
        }
    }

    /** Between calls every data line's flag word and every LSE line of both slots is zero (the exchange zeroes them). */
    private static void assertEveryFlagZero(TornadoEngine tornado, WorkspaceSpec spec, String where) {
        WorkspaceLayout layout = WorkspaceLayout.forWorkspace(spec.bytes(), spec.cpSize(),
                RowLayout.of(spec.headDim(), spec.dtype().bytes()));
        for (int r = 0; r < spec.cpSize(); r++) {
            MemorySegment ws = tornado.workspaceOnDevice(r);
            for (int slot = 0; slot < Ll128.NUM_SLOTS; slot++) {
                for (int src = 0; src < spec.cpSize(); src++) {
                    for (int row = 0; row < layout.maxRows(); row++) {
                        for (int line = 0; line < layout.row().dataLines(); line++) {
                            long at = layout.dataLineOffset(slot, src, row, line);
                            assertEquals(0L, Ll128Lines.getDataFlagAcquire(ws, at), where + ": rank " + r + " slot "
                                    + slot + " source " + src + " row " + row + " line " + line + " flag");
                        }
                        for (int k = 0; k < layout.row().lineGroups(); k++) {
                            long at = layout.lseLineOffset(slot, src, row, k);
                            assertEquals(-1L, ws.asSlice(at, Ll128.LSE_LINE_BYTES).mismatch(
                                    MemorySegment.ofArray(new byte[Ll128.LSE_LINE_BYTES])), where + ": rank " + r
                                    + " slot " + slot + " source " + src + " row " + row + " LSE line " + k);
                        }
                    }
                }
            }
        }
    }

    /**
     * A rank that sends nothing: its peers' waits give up after the timeout, the call fails naming that source, the
     * group is poisoned on the device and refuses calls until reset, and after the reset calls give the CPU's results.
     */
    @Test
    void aSilentRankTimesOutPoisonsAndResetRecovers() {
        int cp = 4;
        int silent = 2;
        WorkspaceSpec spec = new WorkspaceSpec(2, 2, cp, 128, DType.BF16);
        try (Arena arena = Arena.ofShared(); CpuEngine cpu = CpuEngine.open(spec);
             TornadoEngine tornado = TornadoEngine.open(spec, Duration.ofMillis(200),
                     new TornadoEngine.Options(MergeVariant.standard(), false, false))) {
            SplittableRandom random = new SplittableRandom(System.nanoTime());
            Tensors.Group g = Tensors.packed(arena, random, 2, 2, cp, 128, DType.BF16, 3.0);
            List<TensorView> out = Tensors.outputs(arena, g);
            PeerTimeoutException e;
            try (var call = tornado.prepareWithoutSender(g.partialO(), g.partialLse(), out, LseMode.BASE2, silent)) {
                e = assertThrows(PeerTimeoutException.class, call::run);
            }
            assertEquals(silent, e.sourceRank(), e.getMessage());
            assertTrue(e.rank() != silent, e.getMessage());
            assertTrue(tornado.poisonedOnDevice(e.rank()), "the waiting rank's workspace is poisoned");
            IllegalStateException refused = assertThrows(IllegalStateException.class,
                    () -> tornado.reduceAll(g.partialO(), g.partialLse(), LseMode.BASE2));
            assertTrue(refused.getMessage().contains("reset()"), refused.getMessage());

            tornado.reset();
            List<TensorView> expected = cpu.reduceAll(g.partialO(), g.partialLse(), LseMode.BASE2);
            List<TensorView> got = tornado.reduceAll(g.partialO(), g.partialLse(), LseMode.BASE2);
            for (int r = 0; r < cp; r++) {
                assertArrayEquals(Tensors.bits(expected.get(r)), Tensors.bits(got.get(r)), "after reset, rank " + r);
            }
        }
    }
}
