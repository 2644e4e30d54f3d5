package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.Tensors;
import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.CudaGraph;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.cuda.DeviceBuffer;
import io.github.dcp4j.engine.cpu.CpuEngine;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.DeviceTensor;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.peer.ExternalWorkspaces;
import io.github.dcp4j.rendezvous.DirectoryRendezvous;
import io.github.dcp4j.rendezvous.JobSecret;
import io.github.dcp4j.rendezvous.Rendezvous;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.Arena;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Device tensors on the CUDA engines, as an inference engine passes them: strided views of device memory, read and
 * written in place (outputs bit for bit the CPU engine's on the same inputs), calls on the caller's stream, eager
 * without host synchronisation and recorded inside the caller's own graph next to the caller's work, and pointers the
 * driver does not vouch for refused before anything is launched. Skipped where no CUDA driver loads.
 */
@Tag("gpu")
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class DeviceTensorGpuTest {
    private static CudaDevice device;
    private final List<DeviceBuffer> buffers = new ArrayList<>();

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

    @AfterEach
    void freeBuffers() {
        buffers.forEach(DeviceBuffer::close);
        buffers.clear();
    }

    /** The whole memory under {@code v} copied to the device, viewed with v's shape, strides and offset. */
    private DeviceTensor toDevice(TensorView v) {
        DeviceBuffer b = DeviceBuffer.allocate(device, v.memory().byteSize());
        buffers.add(b);
        b.copyFrom(v.memory(), 0);
        return new DeviceTensor(b.address(), device.ordinal(), v.dtype(), v.shape(), v.strides(), v.offset());
    }

    private List<DeviceTensor> toDevice(List<TensorView> views) {
        return views.stream().map(this::toDevice).toList();
    }

    /** Device outputs for every rank, filled with the sentinel pattern. */
    private List<DeviceTensor> deviceOutputs(Arena arena, Tensors.Group g) {
        return toDevice(Tensors.outputs(arena, g));
    }

    private static TensorView read(Arena arena, DeviceTensor d) {
        TensorView host = TensorView.allocate(arena, d.dtype(), d.shape());
        device.copyToHost(d.firstByte(), host.memory());
        return host;
    }

    private static List<TensorView> expected(Tensors.Group g, WorkspaceSpec spec, LseMode mode) {
        try (CpuEngine cpu = CpuEngine.open(spec)) {
            return cpu.reduceAll(g.partialO(), g.partialLse(), mode);
        }
    }

    private static void assertBitsEqual(Arena arena, List<TensorView> expected, List<DeviceTensor> out, String what) {
        for (int r = 0; r < out.size(); r++) {
            assertArrayEquals(Tensors.bits(expected.get(r)), Tensors.bits(read(arena, out.get(r))),
                    what + ": rank " + r + "'s device output is the CPU engine's bit for bit");
        }
    }

    private static CudaStream callerStream() {
        return callerStream(device);
    }

    /** A stream the caller creates itself on {@code on}, wrapped. */
    private static CudaStream callerStream(CudaDevice on) {
        CUstream s = new CUstream();
        on.run(() -> Cuda.check(JCudaDriver.cuStreamCreate(s, CUstream_flags.CU_STREAM_NON_BLOCKING),
                "cuStreamCreate"));
        return CudaStream.wrap(on, Cuda.address(s));
    }

    private static void destroy(CudaStream wrapped) {
        wrapped.close();  // leaves the caller's stream alone: its owner destroys it
        wrapped.device().run(() -> Cuda.check(JCudaDriver.cuStreamDestroy(wrapped.handle()), "cuStreamDestroy"));
    }

    @Test
    void stridedDeviceViewsOfAttentionOutputsGiveTheCpuEnginesOutputBitForBit() {
        int cp = 4;
        WorkspaceSpec spec = new WorkspaceSpec(3, 4, cp, 128, DType.BF16);
        try (Arena arena = Arena.ofShared(); CudaGroup gpu = CudaGroup.open(device, spec)) {
            Tensors.Group g = Tensors.strided(arena, new SplittableRandom(41), 3, 4, cp, 128, DType.BF16, 3.0);
            List<DeviceTensor> out = deviceOutputs(arena, g);
            gpu.reduceAll(toDevice(g.partialO()), toDevice(g.partialLse()), out, LseMode.BASE2);
            assertBitsEqual(arena, expected(g, spec, LseMode.BASE2), out, "strided device views");
        }
    }

    @Test
    void hostAndDeviceTensorsMixInOneCall() {
        int cp = 2;
        WorkspaceSpec spec = new WorkspaceSpec(2, 2, cp, 64, DType.FP16);
        try (Arena arena = Arena.ofShared(); CudaGroup gpu = CudaGroup.open(device, spec)) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(42), 2, 2, cp, 64, DType.FP16, 3.0);
            List<TensorView> out = Tensors.outputs(arena, g);
            gpu.reduceAll(toDevice(g.partialO()), g.partialLse(), out, LseMode.BASEE);
            List<TensorView> want = expected(g, spec, LseMode.BASEE);
            for (int r = 0; r < cp; r++) {
                assertArrayEquals(Tensors.bits(want.get(r)), Tensors.bits(out.get(r)), "rank " + r);
            }
        }
    }

    @Test
    void eagerCallsOnTheCallersStreamRunInItsOrderWithoutHostSynchronisation() {
        int cp = 8;
        WorkspaceSpec spec = new WorkspaceSpec(2, 16, cp, 512, DType.BF16);
        CudaStream stream = callerStream();
        try (Arena arena = Arena.ofShared(); CudaGroup gpu = CudaGroup.open(device, spec)) {
            SplittableRandom random = new SplittableRandom(43);
            for (int call = 0; call < 3; call++) {
                Tensors.Group g = Tensors.strided(arena, random, 2, 16, cp, 512, DType.BF16, 3.0);
                List<DeviceTensor> out = deviceOutputs(arena, g);
                gpu.enqueue(toDevice(g.partialO()), toDevice(g.partialLse()), out, LseMode.BASE2, stream);
                stream.synchronize();
                gpu.checkStatus();
                assertBitsEqual(arena, expected(g, spec, LseMode.BASE2), out, "eager call " + call);
            }
            assertEquals(3, gpu.epoch(0), "three calls ran");
        } finally {
            destroy(stream);
        }
    }

    @Test
    void repeatedEagerCallsOnTheSameTensorsReadTheirNewContentsAndStillRefuseFreedMemory() {
        int cp = 4;
        WorkspaceSpec spec = new WorkspaceSpec(1, 8, cp, 128, DType.BF16);
        CudaStream stream = callerStream();
        try (Arena arena = Arena.ofShared(); CudaGroup gpu = CudaGroup.open(device, spec)) {
            SplittableRandom random = new SplittableRandom(48);
            Tensors.Group first = Tensors.strided(arena, random, 1, 8, cp, 128, DType.BF16, 3.0);
            List<DeviceTensor> o = toDevice(first.partialO());
            List<DeviceTensor> lse = toDevice(first.partialLse());
            List<DeviceTensor> out = deviceOutputs(arena, first);
            for (int call = 0; call < 3; call++) {
                Tensors.Group g = Tensors.strided(arena, random, 1, 8, cp, 128, DType.BF16, 3.0);
                for (int r = 0; r < cp; r++) {
                    device.copyFromHost(g.partialO().get(r).memory(), o.get(r).address());
                    device.copyFromHost(g.partialLse().get(r).memory(), lse.get(r).address());
                }
                gpu.enqueue(new ArrayList<>(o), new ArrayList<>(lse), new ArrayList<>(out), LseMode.BASE2, stream);
                stream.synchronize();
                gpu.checkStatus();
                assertBitsEqual(arena, expected(g, spec, LseMode.BASE2), out, "eager call " + call + " on the same"
                        + " tensors");
            }
            buffers.get(cp + 2).close();  // rank 2's partial_lse
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> gpu.enqueue(o, lse, out, LseMode.BASE2, stream));
            assertTrue(e.getMessage().startsWith("partial_lse of rank 2"), e.getMessage());
            assertEquals(3, gpu.epoch(0), "the refused call launched nothing");
        } finally {
            destroy(stream);
        }
    }

    @Test
    void aPreparedCallInsideTheCallersGraphReadsTheTensorsAtEachReplay() {
        int cp = 4;
        int tokens = 2;
        int heads = 8;
        int headDim = 256;
        WorkspaceSpec spec = new WorkspaceSpec(tokens, heads, cp, headDim, DType.BF16);
        CudaStream stream = callerStream();
        try (Arena arena = Arena.ofShared(); CudaGroup gpu = CudaGroup.open(device, spec)) {
            SplittableRandom random = new SplittableRandom(44);
            Tensors.Group first = Tensors.strided(arena, random, tokens, heads, cp, headDim, DType.BF16, 3.0);
            // the op's inputs, and the caller's staging buffers its own work copies them from at every replay
            List<DeviceTensor> o = toDevice(first.partialO());
            List<DeviceTensor> lse = toDevice(first.partialLse());
            List<DeviceBuffer> stagingO = new ArrayList<>();
            List<DeviceBuffer> stagingLse = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                stagingO.add(staging(first.partialO().get(r).memory().byteSize()));
                stagingLse.add(staging(first.partialLse().get(r).memory().byteSize()));
            }
            List<DeviceTensor> out = deviceOutputs(arena, first);
            try (KernelCall call = gpu.prepare(o, lse, out, LseMode.BASE2, stream);
                 CudaGraph graph = CudaGraph.capture(stream, () -> {
                     for (int r = 0; r < cp; r++) {
                         copyAsync(stagingO.get(r), o.get(r), stream);
                         copyAsync(stagingLse.get(r), lse.get(r), stream);
                     }
                     call.launch();
                 })) {
                for (int replay = 0; replay < 3; replay++) {
                    Tensors.Group g = Tensors.strided(arena, random, tokens, heads, cp, headDim, DType.BF16, 3.0);
                    for (int r = 0; r < cp; r++) {
                        stagingO.get(r).copyFrom(g.partialO().get(r).memory(), 0);
                        stagingLse.get(r).copyFrom(g.partialLse().get(r).memory(), 0);
                    }
                    device.run(() -> graph.launch(stream));
                    stream.synchronize();
                    call.checkStatus();
                    assertBitsEqual(arena, expected(g, spec, LseMode.BASE2), out, "replay " + replay);
                }
            }
        } finally {
            destroy(stream);
        }
    }

    private DeviceBuffer staging(long bytes) {
        DeviceBuffer b = DeviceBuffer.allocate(device, bytes);
        buffers.add(b);
        return b;
    }

    /** The caller's own work on its stream: a device-to-device copy into the op's input. */
    private static void copyAsync(DeviceBuffer from, DeviceTensor to, CudaStream stream) {
        Cuda.check(JCudaDriver.cuMemcpyDtoDAsync(Cuda.pointer(to.address()), from.pointer(), from.byteSize(),
                stream.handle()), "cuMemcpyDtoDAsync");
    }

    @Test
    void devicePointersTheDriverDoesNotVouchForAreRefusedBeforeAnyLaunch() {
        int cp = 2;
        WorkspaceSpec spec = new WorkspaceSpec(1, 2, cp, 64, DType.BF16);
        try (Arena arena = Arena.ofShared(); CudaGroup gpu = CudaGroup.open(device, spec)) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(45), 1, 2, cp, 64, DType.BF16, 3.0);
            List<DeviceTensor> o = toDevice(g.partialO());
            List<DeviceTensor> lse = toDevice(g.partialLse());
            List<DeviceTensor> out = deviceOutputs(arena, g);
            TensorView host = g.partialO().get(1);
            DeviceTensor hostPointer = new DeviceTensor(host.memory().address(), device.ordinal(), DType.BF16,
                    host.shape(), host.strides(), 0);
            DeviceBuffer freed = DeviceBuffer.allocate(device, host.memory().byteSize());
            long freedAddress = freed.address();
            freed.close();
            DeviceTensor freedPointer = new DeviceTensor(freedAddress, device.ordinal(), DType.BF16, host.shape(),
                    host.strides(), 0);
            // a whole 2 MiB allocation (no rounding up can hide the overrun) and a view ending 128 bytes past it
            DeviceBuffer whole = staging(2L << 20);
            long spanElements = host.memory().byteSize() / 2;
            DeviceTensor pastTheEnd = new DeviceTensor(whole.address(), device.ordinal(), DType.BF16, host.shape(),
                    host.strides(), (whole.byteSize() + 128) / 2 - spanElements);
            DeviceTensor wrongGpu = new DeviceTensor(o.get(1).address(), device.ordinal() + 1, DType.BF16,
                    o.get(1).shape(), o.get(1).strides(), 0);
            assertRefused(gpu, List.of(o.get(0), hostPointer), lse, out, "partial_o of rank 1", "host pointer");
            assertRefused(gpu, List.of(o.get(0), freedPointer), lse, out, "partial_o of rank 1", "freed allocation");
            assertRefused(gpu, List.of(o.get(0), pastTheEnd), lse, out, "partial_o of rank 1", "past the end");
            assertRefused(gpu, List.of(o.get(0), wrongGpu), lse, out, "partial_o of rank 1", "declared as GPU");
            DeviceTensor freedOut = new DeviceTensor(freedAddress, device.ordinal(), DType.BF16, out.get(0).shape(),
                    out.get(0).strides(), 0);
            assertRefused(gpu, o, lse, List.of(freedOut, out.get(1)), "out of rank 0", "freed allocation");
            assertEquals(0, gpu.epoch(0), "nothing was launched");
            gpu.reduceAll(o, lse, out, LseMode.BASE2);
            assertBitsEqual(arena, expected(g, spec, LseMode.BASE2), out, "after the refusals");
            // a remembered allocation, freed: asked about anew, refused
            buffers.get(1).close();
            assertRefused(gpu, List.of(o.get(0), o.get(1)), lse, out, "partial_o of rank 1", "freed after use");
        }
    }

    /** An allocation made in a context of its own, current on a thread of its own, as a library that makes one has. */
    private record ForeignAllocation(CUcontext context, CUdeviceptr pointer) {
    }

    @Test
    void memoryOfAnotherContextOnTheSameGpuIsRefusedBeforeAnyLaunch() throws Exception {
        int cp = 2;
        WorkspaceSpec spec = new WorkspaceSpec(1, 2, cp, 64, DType.BF16);
        ExecutorService other = Executors.newSingleThreadExecutor();
        try (Arena arena = Arena.ofShared(); CudaGroup gpu = CudaGroup.open(device, spec)) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(46), 1, 2, cp, 64, DType.BF16, 3.0);
            List<DeviceTensor> o = toDevice(g.partialO());
            List<DeviceTensor> lse = toDevice(g.partialLse());
            List<DeviceTensor> out = deviceOutputs(arena, g);
            TensorView host = g.partialO().get(1);
            ForeignAllocation foreign = other.submit(() -> {
                CUdevice d = new CUdevice();
                Cuda.check(JCudaDriver.cuDeviceGet(d, device.ordinal()), "cuDeviceGet");
                CUcontext c = new CUcontext();
                Cuda.check(JCudaDriver.cuCtxCreate(c, 0, d), "cuCtxCreate");
                CUdeviceptr p = new CUdeviceptr();
                Cuda.check(JCudaDriver.cuMemAlloc(p, host.memory().byteSize()), "cuMemAlloc");
                return new ForeignAllocation(c, p);
            }).get();
            try {
                DeviceTensor inOtherContext = new DeviceTensor(Cuda.address(foreign.pointer()), device.ordinal(),
                        DType.BF16, host.shape(), host.strides(), 0);
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> gpu.reduceAll(List.of(o.get(0), inOtherContext), lse, out, LseMode.BASE2));
                assertTrue(e.getMessage().startsWith("partial_o of rank 1"), e.getMessage());
                assertTrue(e.getMessage().contains("primary context"), e.getMessage());
                assertEquals(0, gpu.epoch(0), "nothing was launched");
            } finally {
                other.submit(() -> {
                    Cuda.check(JCudaDriver.cuMemFree(foreign.pointer()), "cuMemFree");
                    Cuda.check(JCudaDriver.cuCtxDestroy(foreign.context()), "cuCtxDestroy");
                    return null;
                }).get();
            }
            gpu.reduceAll(o, lse, out, LseMode.BASE2);
            assertBitsEqual(arena, expected(g, spec, LseMode.BASE2), out, "after the refusal");
        } finally {
            other.shutdown();
        }
    }

    private static void assertRefused(CudaGroup gpu, List<DeviceTensor> o, List<DeviceTensor> lse,
                                      List<DeviceTensor> out, String argument, String why) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> gpu.reduceAll(o, lse, out, LseMode.BASE2), why);
        assertTrue(e.getMessage().startsWith(argument), why + ": " + e.getMessage());
    }

    @Test
    void enqueueRefusesHostViewsBeforeAnything() {
        int cp = 2;
        WorkspaceSpec spec = new WorkspaceSpec(1, 1, cp, 64, DType.BF16);
        CudaStream stream = callerStream();
        try (Arena arena = Arena.ofShared(); CudaGroup gpu = CudaGroup.open(device, spec)) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(46), 1, 1, cp, 64, DType.BF16, 3.0);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> gpu.enqueue(
                    toDevice(g.partialO()), g.partialLse(), deviceOutputs(arena, g), LseMode.BASE2, stream));
            assertTrue(e.getMessage().startsWith("partial_lse of rank 0 must be a DeviceTensor"), e.getMessage());
            assertEquals(0, gpu.epoch(0));
        } finally {
            destroy(stream);
        }
    }

    /** The group opened over a list of devices, every rank on one GPU: its prepared call and its eager call. */
    @Test
    void theGroupOverAListOfDevicesTakesDeviceTensorsOnTheCallersStream() {
        int cp = 2;
        WorkspaceSpec spec = new WorkspaceSpec(2, 4, cp, 128, DType.BF16);
        CudaStream stream = callerStream();
        try (Arena arena = Arena.ofShared();
             CudaGroup group = CudaGroup.open(List.of(device, device), spec, CudaGroup.DEFAULT_TIMEOUT)) {
            Tensors.Group g = Tensors.strided(arena, new SplittableRandom(47), 2, 4, cp, 128, DType.BF16, 3.0);
            List<DeviceTensor> out = deviceOutputs(arena, g);
            try (CudaGroup.Prepared call = group.prepare(toDevice(g.partialO()), toDevice(g.partialLse()), out,
                    LseMode.BASE2, Map.of(device, stream))) {
                assertEquals(1, call.launches().size(), "ranks on one GPU share one launch");
                assertEquals(stream.address(), call.launches().getFirst().stream().address());
                call.run();
            }
            assertBitsEqual(arena, expected(g, spec, LseMode.BASE2), out, "prepared on a list of devices");
            List<DeviceTensor> eagerOut = deviceOutputs(arena, g);
            group.enqueue(toDevice(g.partialO()), toDevice(g.partialLse()), eagerOut, LseMode.BASE2,
                    Map.of(device, stream));
            stream.synchronize();
            group.checkStatus();
            assertBitsEqual(arena, expected(g, spec, LseMode.BASE2), eagerOut, "enqueued on a list of devices");
        } finally {
            destroy(stream);
        }
    }

    /**
     * The rank engine (one rank per thread here, as one per process): each rank prepares its call on its own stream
     * with device tensors and captures it into its own graph after its own copy into the input; every replay reads
     * what the tensors hold then, and every rank's output is the CPU engine's bit for bit.
     */
    @Test
    void theRankEngineTakesDeviceTensorsInsideEachRanksOwnGraph(@TempDir Path dir) throws Exception {
        int cp = 3;
        int tokens = 2;
        int heads = 4;
        int headDim = 256;
        int replays = 3;
        WorkspaceSpec spec = new WorkspaceSpec(tokens, heads, cp, headDim, DType.BF16);
        JobSecret secret = JobSecret.of(JobSecret.generate());
        List<CudaDevice> devices = new ArrayList<>();
        ExecutorService ranks = Executors.newFixedThreadPool(cp);
        try (Arena arena = Arena.ofShared()) {
            List<Long> workspaces = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                devices.add(CudaDevice.open(0)); // one device thread per rank: each rank's run waits on its own
                DeviceBuffer w = staging(spec.bytes());
                w.zero();
                workspaces.add(w.address());
            }
            SplittableRandom random = new SplittableRandom(49);
            List<Tensors.Group> inputs = new ArrayList<>();
            for (int k = 0; k < replays; k++) {
                inputs.add(Tensors.strided(arena, random, tokens, heads, cp, headDim, DType.BF16, 3.0));
            }
            Tensors.Group first = inputs.getFirst();
            List<DeviceTensor> o = toDevice(first.partialO());
            List<DeviceTensor> lse = toDevice(first.partialLse());
            List<DeviceTensor> out = deviceOutputs(arena, first);
            List<DeviceBuffer> stagingO = new ArrayList<>();
            List<DeviceBuffer> stagingLse = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                stagingO.add(staging(first.partialO().get(r).memory().byteSize()));
                stagingLse.add(staging(first.partialLse().get(r).memory().byteSize()));
            }
            TensorView[][] results = new TensorView[replays][cp];
            List<Future<?>> done = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                int rank = r;
                done.add(ranks.submit(() -> {
                    CudaDevice own = devices.get(rank);
                    CudaStream stream = callerStream(own);
                    try (Rendezvous rv = new DirectoryRendezvous(dir, "device-tensors", secret, rank, cp,
                            Duration.ofSeconds(30));
                         CudaRankEngine engine = CudaRankEngine.open(new ExternalWorkspaces(own, rank, workspaces, 0,
                                 spec.bytes()), rv, CudaGroup.DEFAULT_TIMEOUT, cp);
                         KernelCall call = engine.prepare(o.get(rank), lse.get(rank), out.get(rank), rank, cp,
                                 LseMode.BASE2, stream);
                         CudaGraph graph = CudaGraph.capture(stream, () -> {
                             copyAsync(stagingO.get(rank), o.get(rank), stream);
                             copyAsync(stagingLse.get(rank), lse.get(rank), stream);
                             call.launch();
                         })) {
                        for (int k = 0; k < replays; k++) {
                            stagingO.get(rank).copyFrom(inputs.get(k).partialO().get(rank).memory(), 0);
                            stagingLse.get(rank).copyFrom(inputs.get(k).partialLse().get(rank).memory(), 0);
                            own.run(() -> graph.launch(stream));
                            stream.synchronize();
                            call.checkStatus();
                            TensorView host = TensorView.allocate(arena, out.get(rank).dtype(), out.get(rank).shape());
                            own.copyToHost(out.get(rank).firstByte(), host.memory());
                            results[k][rank] = host;
                        }
                    } finally {
                        destroy(stream);
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get(120, TimeUnit.SECONDS);
            }
            for (int k = 0; k < replays; k++) {
                List<TensorView> expected = expected(inputs.get(k), spec, LseMode.BASE2);
                for (int r = 0; r < cp; r++) {
                    assertArrayEquals(Tensors.bits(expected.get(r)), Tensors.bits(results[k][r]),
                            "replay " + k + ": rank " + r + "'s device output is the CPU engine's bit for bit");
                }
            }
        } finally {
            ranks.shutdownNow();
            devices.forEach(CudaDevice::close);
        }
    }
}
