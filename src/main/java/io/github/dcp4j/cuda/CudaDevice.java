package io.github.dcp4j.cuda;

import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUdevice_attribute;
import jcuda.driver.CUresult;
import jcuda.driver.JCudaDriver;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * One GPU: its primary context (the one the CUDA runtime and other in-process users share) and the one platform
 * thread that makes every CUDA call for it. The context is current on that thread only; CUDA's current context is
 * OS-thread state, so no CUDA call is ever made from a virtual thread or from a caller's thread.
 */
public final class CudaDevice implements AutoCloseable {
    private final int ordinal;
    private final CUdevice device = new CUdevice();
    private final CUcontext context = new CUcontext();
    private final ExecutorService thread;
    private final Thread owner;
    private final String name;
    private final int major;
    private final int minor;
    private final int multiprocessors;
    private final long l2Bytes;
    private volatile boolean closed;
    /**
     * Allocations the driver vouched for, by their first byte (requireDeviceSpan): one map for the process, since
     * device addresses are unique across GPUs (unified addressing).
     */
    private static final TreeMap<Long, DeviceSpan> ALLOCATIONS = new TreeMap<>();
    /** Counts the times an allocation was forgotten: a check made before is still good while it stands. */
    private static volatile long forgotten;

    private CudaDevice(int ordinal) {
        this.ordinal = ordinal;
        Thread[] created = new Thread[1];
        this.thread = Executors.newSingleThreadExecutor(r -> {
            Thread t = Thread.ofPlatform().daemon().name("dcp4j-cuda-" + ordinal).unstarted(r);
            created[0] = t;
            return t;
        });
        int[] props = call(() -> {
            Cuda.check(JCudaDriver.cuDeviceGet(device, ordinal), "cuDeviceGet(" + ordinal + ")");
            Cuda.check(JCudaDriver.cuDevicePrimaryCtxRetain(context, device), "cuDevicePrimaryCtxRetain");
            Cuda.check(JCudaDriver.cuCtxSetCurrent(context), "cuCtxSetCurrent");
            return new int[] {attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
                attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
                attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)};
        });
        this.owner = created[0];
        this.major = props[0];
        this.minor = props[1];
        this.multiprocessors = props[2];
        this.l2Bytes = Integer.toUnsignedLong(props[3]);
        this.name = call(() -> {
            byte[] buf = new byte[256];
            Cuda.check(JCudaDriver.cuDeviceGetName(buf, buf.length, device), "cuDeviceGetName");
            int n = 0;
            while (n < buf.length && buf[n] != 0) {
                n++;
            }
            return new String(buf, 0, n, StandardCharsets.UTF_8);
        });
    }

    /**
     * Opens GPU {@code ordinal}; the driver must be available ({@link Cuda#availability()}).
     *
     * @param ordinal the GPU's ordinal, as CUDA numbers the visible GPUs
     * @return the device, its primary context retained until {@link #close()}
     */
    public static CudaDevice open(int ordinal) {
        Cuda.Availability a = Cuda.availability();
        if (!a.available()) {
            throw new IllegalStateException("no CUDA device: " + a.reason());
        }
        if (ordinal < 0 || ordinal >= a.deviceCount()) {
            throw new IllegalArgumentException("GPU ordinal must be in [0, " + a.deviceCount() + "); got " + ordinal);
        }
        return new CudaDevice(ordinal);
    }

    private int attribute(int attribute) {
        int[] v = new int[1];
        Cuda.check(JCudaDriver.cuDeviceGetAttribute(v, attribute, device), "cuDeviceGetAttribute(" + attribute + ")");
        return v[0];
    }

    /**
     * Runs {@code work} on this device's thread, with its context current, and returns its result.
     *
     * @param <T>  the result's type
     * @param work what to run
     * @return its result
     */
    public <T> T call(Callable<T> work) {
        if (Thread.currentThread() == owner) {
            try {
                return work.call();
            } catch (RuntimeException | Error e) {
                throw e;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }
        if (closed) {
            throw new IllegalStateException("CUDA device " + ordinal + " is closed");
        }
        Future<T> f = thread.submit(work);
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return f.get();
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof RuntimeException re) {
                throw re;
            }
            if (c instanceof Error err) {
                throw err;
            }
            throw new IllegalStateException(c);
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * As {@link #call}, for work without a result.
     *
     * @param work what to run
     */
    public void run(Runnable work) {
        call(() -> {
            work.run();
            return null;
        });
    }

    /**
     * Whether kernels on this GPU can read and write {@code other}'s memory (peer access; NVLink or PCIe).
     *
     * @param other another GPU (or this one)
     * @return what the driver reports (true for this GPU itself)
     */
    public boolean canAccessPeer(CudaDevice other) {
        if (other.ordinal == ordinal) {
            return true;
        }
        int[] can = new int[1];
        run(() -> Cuda.check(JCudaDriver.cuDeviceCanAccessPeer(can, device, other.device),
                "cuDeviceCanAccessPeer(" + ordinal + ", " + other.ordinal + ")"));
        return can[0] != 0;
    }

    /** {@return this GPU's PCI address as the driver names it, {@code domain:bus:device.function} (0000:19:00.0)} */
    public String pciBusId() {
        return call(() -> {
            String[] id = new String[1];
            Cuda.check(JCudaDriver.cuDeviceGetPCIBusId(id, 32, device), "cuDeviceGetPCIBusId(" + ordinal + ")");
            return id[0].trim();
        });
    }

    /** The primary context's handle (what {@code cuStreamGetCtx} gives for this device's streams). */
    long contextAddress() {
        return Cuda.address(context);
    }

    /**
     * Requires {@code bytes} from device address {@code first} to be device memory of this GPU, inside one
     * allocation, and {@code declaredOrdinal} to be this GPU: refused with an {@link IllegalArgumentException} that
     * names {@code argument} otherwise (host memory, a freed or foreign pointer, a span past the allocation's end,
     * another GPU than declared, memory of another GPU: the kernel reads a rank's tensors from the rank's own GPU,
     * where no peer access needs enabling; memory allocated in another context than this GPU's primary context,
     * which kernels launched in the primary context cannot address). Memory mapped in several chunks ({@code cuMemMap}) counts as one
     * allocation per chunk, so a tensor must lie inside one chunk.
     *
     * <p>The driver is asked once per allocation: an allocation that passed is remembered (up to
     * {@link #REMEMBERED_ALLOCATIONS}), and a later span inside it is accepted without a driver call, so an eager call
     * on the same tensors costs no query. {@link DeviceBuffer#close()} forgets its own allocation; memory freed by
     * other means must be forgotten with {@link #forgetAllocation} before its address could be passed again.
     *
     * @param argument        the argument's name, for the message
     * @param first           the device address of the span's first byte
     * @param bytes           the span's length
     * @param declaredOrdinal the GPU the caller says holds the memory
     */
    public void requireDeviceSpan(String argument, long first, long bytes, int declaredOrdinal) {
        if (vouchedFor(first, bytes, declaredOrdinal)) {
            return;
        }
        DeviceSpan span = call(() -> DeviceSpan.query(first));
        String at = argument + " at 0x" + Long.toHexString(first);
        if (span == null) {
            throw new IllegalArgumentException(at + " is not memory the CUDA driver knows: a host pointer, a freed"
                    + " allocation or another process's address; pass device memory (or a TensorView for host memory)");
        }
        if (span.memoryType() != DeviceSpan.DEVICE) {
            throw new IllegalArgumentException(at + " is " + (span.memoryType() == DeviceSpan.HOST ? "host" : "not")
                    + " device memory (CUmemorytype " + span.memoryType() + "); pass device memory (or a TensorView"
                    + " for host memory)");
        }
        if (span.deviceOrdinal() != declaredOrdinal) {
            throw new IllegalArgumentException(at + " is memory of GPU " + span.deviceOrdinal() + ", declared as GPU "
                    + declaredOrdinal);
        }
        if (span.deviceOrdinal() != ordinal) {
            throw new IllegalArgumentException(at + " is memory of GPU " + span.deviceOrdinal() + "; the call runs"
                    + " on " + this + ": pass each rank's tensors on its own GPU");
        }
        long ours = contextAddress();
        if (span.context() != 0 && span.context() != ours) {
            throw new IllegalArgumentException(at + " was allocated in CUDA context 0x" + Long.toHexString(
                    span.context()) + ", not in GPU " + ordinal + "'s primary context 0x" + Long.toHexString(ours)
                    + " that dcp4j runs in; allocate it in the primary context (as the CUDA runtime and PyTorch do)");
        }
        if (!span.contains(first, bytes)) {
            throw new IllegalArgumentException(at + " spans " + bytes + " bytes, past the end of its allocation [0x"
                    + Long.toHexString(span.rangeStart()) + ", 0x" + Long.toHexString(span.rangeStart()
                    + span.rangeBytes()) + ")");
        }
        remember(span);
    }

    /**
     * Whether {@link #requireDeviceSpan} would accept the span without asking the driver: it lies inside an
     * allocation of this GPU the driver vouched for before, and {@code declaredOrdinal} is this GPU.
     *
     * @param first           the device address of the span's first byte
     * @param bytes           the span's length
     * @param declaredOrdinal the GPU the caller says holds the memory
     * @return true where no driver call is needed
     */
    public boolean vouchedFor(long first, long bytes, int declaredOrdinal) {
        DeviceSpan known = rememberedSpan(first);
        return known != null && declaredOrdinal == ordinal && known.deviceOrdinal() == ordinal
                && known.contains(first, bytes);
    }

    /**
     * How many times a remembered allocation was forgotten so far: spans {@link #vouchedFor} accepted stay accepted
     * while this is unchanged (nothing remembered can have been freed through dcp4j since).
     *
     * @return the count, over every GPU of the process
     */
    public static long forgottenAllocations() {
        return forgotten;
    }

    /** Allocations {@link #requireDeviceSpan} remembers at most; beyond, it starts over. */
    public static final int REMEMBERED_ALLOCATIONS = 1024;

    private static DeviceSpan rememberedSpan(long address) {
        synchronized (ALLOCATIONS) {
            Map.Entry<Long, DeviceSpan> e = ALLOCATIONS.floorEntry(address);
            return e == null ? null : e.getValue();
        }
    }

    private static void remember(DeviceSpan span) {
        synchronized (ALLOCATIONS) {
            if (ALLOCATIONS.size() >= REMEMBERED_ALLOCATIONS) {
                ALLOCATIONS.clear();
                forgotten++;
            }
            ALLOCATIONS.put(span.rangeStart(), span);
        }
    }

    /**
     * Forgets the allocation that holds {@code address}, if {@link #requireDeviceSpan} remembered one (on any GPU):
     * call it after freeing memory the op was given, so that its address is asked about anew.
     *
     * @param address any device address inside the freed allocation
     */
    public static void forgetAllocation(long address) {
        synchronized (ALLOCATIONS) {
            Map.Entry<Long, DeviceSpan> e = ALLOCATIONS.floorEntry(address);
            if (e != null && address - e.getKey() < e.getValue().rangeBytes()) {
                ALLOCATIONS.remove(e.getKey());
                forgotten++;
            }
        }
    }

    /**
     * Lets kernels in this device's context access {@code other}'s memory. Returns true if this call enabled it, false
     * if it was enabled already (by the application or an earlier group), so that only the enabler disables it.
     *
     * @param other the GPU whose memory becomes accessible
     * @return whether this call enabled it
     */
    public boolean enablePeerAccess(CudaDevice other) {
        return call(() -> {
            int r = JCudaDriver.cuCtxEnablePeerAccess(other.context, 0);
            if (r == CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
                return false;
            }
            Cuda.check(r, "cuCtxEnablePeerAccess(" + ordinal + " -> " + other.ordinal + ")");
            return true;
        });
    }

    /**
     * Undoes {@link #enablePeerAccess} (only where that call returned true).
     *
     * @param other the GPU whose memory stops being accessible
     */
    public void disablePeerAccess(CudaDevice other) {
        run(() -> Cuda.check(JCudaDriver.cuCtxDisablePeerAccess(other.context),
                "cuCtxDisablePeerAccess(" + ordinal + " -> " + other.ordinal + ")"));
    }

    /**
     * Copies {@code host.byteSize()} bytes from device address {@code address} into {@code host}, synchronously.
     *
     * @param address the device address to copy from
     * @param host    where the bytes go (its whole size)
     */
    public void copyToHost(long address, MemorySegment host) {
        run(() -> Cuda.check(JCudaDriver.cuMemcpyDtoH(DeviceBuffer.hostPointer(host), Cuda.pointer(address),
                host.byteSize()), "cuMemcpyDtoH"));
    }

    /**
     * Copies {@code host} to device address {@code address}, synchronously.
     *
     * @param host    the bytes to copy (its whole size)
     * @param address the device address to copy to
     */
    public void copyFromHost(MemorySegment host, long address) {
        run(() -> Cuda.check(JCudaDriver.cuMemcpyHtoD(Cuda.pointer(address), DeviceBuffer.hostPointer(host),
                host.byteSize()), "cuMemcpyHtoD"));
    }

    /**
     * Sets {@code bytes} bytes from device address {@code address} to zero, synchronously.
     *
     * @param address the first byte's device address
     * @param bytes   how many bytes
     */
    public void zero(long address, long bytes) {
        run(() -> Cuda.check(JCudaDriver.cuMemsetD8(Cuda.pointer(address), (byte) 0, bytes), "cuMemsetD8"));
    }

    /** Waits until all work queued on this device has run. */
    public void synchronize() {
        run(() -> Cuda.check(JCudaDriver.cuCtxSynchronize(), "cuCtxSynchronize"));
    }

    /** {@return the GPU's ordinal} */
    public int ordinal() {
        return ordinal;
    }

    /** {@return the GPU's name as the driver reports it} */
    public String name() {
        return name;
    }

    /** {@return the compute capability as major x 10 + minor (90 for Hopper)} */
    public int computeCapability() {
        return major * 10 + minor;
    }

    /** {@return the number of streaming multiprocessors} */
    public int multiprocessors() {
        return multiprocessors;
    }

    /** {@return the bytes of L2 cache} */
    public long l2Bytes() {
        return l2Bytes;
    }

    /** Releases the primary context and stops the device thread. Everything allocated on it must be closed first. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        run(() -> JCudaDriver.cuDevicePrimaryCtxRelease(device));
        closed = true;
        thread.shutdown();
    }

    @Override
    public String toString() {
        return "GPU " + ordinal + " (" + name + ", sm_" + computeCapability() + ", " + multiprocessors + " SMs)";
    }
}
