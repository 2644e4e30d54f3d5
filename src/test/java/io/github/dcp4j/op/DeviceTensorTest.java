package io.github.dcp4j.op;

import io.github.dcp4j.DcpLseReduce;
import io.github.dcp4j.Engines;
import io.github.dcp4j.Tensors;
import io.github.dcp4j.engine.cpu.CpuEngine;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.List;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Device tensors without a GPU: their geometry is the host view's (the same strided [T, H, cp, D] view of an
 * attention output), the op's validation treats them alike, and the CPU engine refuses them before anything runs.
 */
class DeviceTensorTest {
    private static final long ADDRESS = 0x7f00_0000_0000L;

    @Test
    void theAttentionOutputViewHasTheHostViewsShapeStridesAndOffset() {
        int tokens = 3;
        int cp = 4;
        int heads = 2;
        int headDim = 64;
        try (Arena arena = Arena.ofConfined()) {
            TensorView host = TensorView.allocate(arena, DType.BF16, tokens, (long) cp * heads, headDim)
                    .unflatten(1, cp, heads).permute(0, 2, 1, 3);
            DeviceTensor device = DeviceTensor.contiguous(ADDRESS, 0, DType.BF16, tokens, (long) cp * heads, headDim)
                    .unflatten(1, cp, heads).permute(0, 2, 1, 3);
            assertArrayEquals(host.shape(), device.shape());
            assertArrayEquals(host.strides(), device.strides());
            assertEquals(host.offset(), device.offset());
            assertEquals(host.lastElement(), device.lastElement());
            assertEquals(host.isContiguous(), device.isContiguous());
            assertEquals((long) tokens * cp * heads * headDim * 2, device.spanBytes());
            assertEquals(ADDRESS, device.firstByte());
        }
    }

    @Test
    void anOffsetMovesTheFirstByteAndTheSpanEndsAtTheLastElement() {
        DeviceTensor t = new DeviceTensor(ADDRESS, 1, DType.FP32, new long[] {2, 3}, new long[] {8, 1}, 5);
        assertEquals(ADDRESS + 20, t.firstByte());
        assertEquals((5 + 8 + 2 + 1 - 5) * 4L, t.spanBytes(), "from element 5 to element 15, inclusive");
    }

    @Test
    void badGeometryIsRefusedNamingTheValue() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> DeviceTensor.contiguous(0, 0, DType.BF16, 4));
        assertTrue(e.getMessage().contains("0 (null)"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> DeviceTensor.contiguous(ADDRESS, -1, DType.BF16, 4));
        assertTrue(e.getMessage().contains("-1"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> new DeviceTensor(ADDRESS, 0, DType.BF16, new long[] {4}, new long[] {-1}, 0));
        assertTrue(e.getMessage().contains("negative stride"), e.getMessage());
    }

    @Test
    void validationTreatsDeviceTensorsAsHostViewsAndChecksTheirAddressAlignment() {
        int cp = 2;
        DeviceTensor o = DeviceTensor.contiguous(ADDRESS, 0, DType.BF16, 1, 2, cp, 64);
        DeviceTensor lse = DeviceTensor.contiguous(ADDRESS + 4096, 0, DType.FP32, 1, 2, cp);
        DeviceTensor out = DeviceTensor.contiguous(ADDRESS + 8192, 0, DType.BF16, 2, 64);
        WorkspaceShape ws = new WorkspaceShape(cp, 1, new WorkspaceSpec(1, 2, cp, 64, DType.BF16).bytes());
        ReduceCall call = ReduceCall.validate(o, lse, out, 1, cp, LseMode.BASE2, ws);
        assertEquals(2, call.rows());
        assertEquals(ws.bytes(), call.layout().bytes(), "the call carries its workspace's layout");
        DeviceTensor misaligned = DeviceTensor.contiguous(ADDRESS + 4, 0, DType.BF16, 1, 2, cp, 64);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> ReduceCall.validate(misaligned, lse, out, 1, cp, LseMode.BASE2, ws));
        assertTrue(e.getMessage().contains("at address 0x7f0000000004"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> ReduceCall.validate(o, lse, out, 0, cp, LseMode.BASE2, ws));
        assertTrue(e.getMessage().contains("cp_rank must be the workspace's rank 1; got 0"), e.getMessage());
        DeviceTensor outOffByOne = new DeviceTensor(ADDRESS + 8192, 0, DType.BF16, new long[] {2, 64},
                new long[] {64, 1}, 1);
        e = assertThrows(IllegalArgumentException.class,
                () -> ReduceCall.validate(o, lse, outOffByOne, 1, cp, LseMode.BASE2, ws));
        assertTrue(e.getMessage().startsWith("out must start 8-byte aligned; got offset 1"), e.getMessage());
        DeviceTensor lseAtTwo = DeviceTensor.contiguous(ADDRESS + 4098, 0, DType.FP32, 1, 2, cp);
        e = assertThrows(IllegalArgumentException.class,
                () -> ReduceCall.validate(o, lseAtTwo, out, 1, cp, LseMode.BASE2, ws));
        assertTrue(e.getMessage().startsWith("partial_lse must start 4-byte aligned"), e.getMessage());
    }

    @Test
    void aViewWhoseLastElementOverflowsIsRefused() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new DeviceTensor(ADDRESS, 0, DType.BF16, new long[] {5, 1}, new long[] {1L << 62, 1}, 0));
        assertTrue(e.getMessage().contains("reach past 2^63 bytes"), e.getMessage());
    }

    @Test
    void theCpuEngineRefusesDeviceTensorsBeforeAnyRankRuns() {
        int cp = 2;
        try (Arena arena = Arena.ofShared();
             CpuEngine group = CpuEngine.open(new WorkspaceSpec(1, 2, cp, 64, DType.BF16))) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(12), 1, 2, cp, 64, DType.BF16, 3.0);
            List<TensorView> out = Tensors.outputs(arena, g);
            short[] before = Tensors.bits(out.get(0));
            DeviceTensor onGpu = DeviceTensor.contiguous(ADDRESS, 0, DType.BF16, g.partialO().get(1).shape());
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> group.reduceAll(List.of(g.partialO().get(0), onGpu), g.partialLse(), out, LseMode.BASE2));
            assertTrue(e.getMessage().startsWith("partial_o of rank 1 must be in host memory"), e.getMessage());
            assertArrayEquals(before, Tensors.bits(out.get(0)), "rank 0 wrote nothing");
            e = assertThrows(IllegalArgumentException.class, () -> DcpLseReduce.reduce(onGpu,
                    g.partialLse().get(1), group.workspace(1), 1, cp, LseMode.BASE2, out.get(1)));
            assertTrue(e.getMessage().startsWith("partial_o must be in host memory"), e.getMessage());
            assertEquals(0, group.workspace(1).epoch(), "the refused rank took no ticket");
        }
    }

    @Test
    void theEngineFactoryNamesItsChoiceAndWhy() {
        assertEquals(Engines.Choice.CPU, Engines.resolve(Engines.Choice.CPU).engine());
        assertEquals("asked for", Engines.resolve(Engines.Choice.CPU).reason());
        Engines.Resolved auto = Engines.resolve(Engines.Choice.AUTO);
        assertTrue(auto.engine() != Engines.Choice.AUTO, "auto resolves to an engine");
        assertTrue(!auto.reason().isEmpty());
        assertEquals(Engines.Choice.CUDA, Engines.Choice.parse("cuda"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Engines.Choice.parse("tpu"));
        assertEquals("engine must be auto, cpu, cuda or tornado; got 'tpu'", e.getMessage());
    }

    /**
     * The test JVM runs without TornadoVM's argument file: without the tornado profile no provider is on the class
     * path, with it the provider is there and TornadoVM's runtime does not start. Either way the reason is given.
     */
    @Test
    void theTornadoEngineIsRefusedWithTheReasonWhereItCannotRunHere() {
        assertEquals(Engines.Choice.TORNADO, Engines.Choice.parse("tornado"));
        Engines.Resolved tornado = Engines.resolve(Engines.Choice.TORNADO);
        assertEquals(Engines.Choice.TORNADO, tornado.engine());
        assertTrue(tornado.reason().startsWith("asked for, but "), tornado.reason());
        assertTrue(tornado.reason().contains("no GroupProvider named tornado is on the class path")
                || tornado.reason().contains("TornadoVM's runtime did not start"), tornado.reason());
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> Engines.openGroup(
                Engines.Choice.TORNADO, new WorkspaceSpec(1, 1, 2, 64, DType.BF16), Duration.ofSeconds(1)));
        assertTrue(e.getMessage().startsWith("the tornado engine cannot run here: "), e.getMessage());
        assertTrue(e.getMessage().contains("tornado-config/"), e.getMessage());
    }
}
