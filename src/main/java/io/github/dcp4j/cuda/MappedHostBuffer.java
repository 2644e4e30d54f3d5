package io.github.dcp4j.cuda;

import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.JCudaDriver;

import java.lang.foreign.MemorySegment;

/**
 * Page-locked host memory mapped into every GPU's address space ({@code cuMemHostAlloc} with
 * {@code DEVICEMAP | PORTABLE}): kernels write it with plain stores, and the host reads it as memory, with no copy
 * call. Zeroed at allocation; freed on close.
 */
public final class MappedHostBuffer implements AutoCloseable {
    private static final int CU_MEMHOSTALLOC_PORTABLE = 0x01;
    private static final int CU_MEMHOSTALLOC_DEVICEMAP = 0x02;

    private final CudaDevice device;
    private final Pointer host = new Pointer();
    private final long deviceAddress;
    private final MemorySegment memory;
    private boolean closed;

    private MappedHostBuffer(CudaDevice device, long bytes) {
        this.device = device;
        CUdeviceptr mapped = new CUdeviceptr();
        device.run(() -> {
            Cuda.check(JCudaDriver.cuMemHostAlloc(host, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
                    "cuMemHostAlloc(" + bytes + ")");
            int r = JCudaDriver.cuMemHostGetDevicePointer(mapped, host, 0);
            if (r != 0) {
                JCudaDriver.cuMemFreeHost(host);
                Cuda.check(r, "cuMemHostGetDevicePointer");
            }
        });
        this.deviceAddress = Cuda.address(mapped);
        this.memory = MemorySegment.ofAddress(Cuda.address(host)).reinterpret(bytes);
        memory.fill((byte) 0);
    }

    /**
     * {@code bytes} of zeroed, mapped host memory, allocated in {@code device}'s context.
     *
     * @param device the GPU whose context maps it
     * @param bytes  the size
     * @return the buffer; close it to free the memory
     */
    public static MappedHostBuffer allocate(CudaDevice device, long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("bytes must be > 0; got " + bytes);
        }
        return new MappedHostBuffer(device, bytes);
    }

    /** {@return the address kernels use} */
    public long deviceAddress() {
        requireOpen();
        return deviceAddress;
    }

    /** {@return the host's view of the memory (valid until close)} */
    public MemorySegment memory() {
        requireOpen();
        return memory;
    }

    private void requireOpen() {
        if (closed) {
            throw new IllegalStateException("mapped host buffer is closed");
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        device.run(() -> Cuda.check(JCudaDriver.cuMemFreeHost(host), "cuMemFreeHost"));
    }
}
