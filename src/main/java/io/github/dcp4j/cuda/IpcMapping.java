package io.github.dcp4j.cuda;

import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUipcMemHandle;
import jcuda.driver.CUipcMem_flags;
import jcuda.driver.JCudaDriver;

import java.lang.reflect.Field;

/**
 * CUDA IPC for {@code cuMemAlloc} memory: {@link #export} gives the 64 handle bytes another process passes to
 * {@link #open}, which maps the memory into that process (lazily enabling peer access when the owner is another GPU).
 * A handle cannot be opened in the process that exported it. Close every mapping before its owner frees the memory.
 */
public final class IpcMapping implements AutoCloseable {
    /** Bytes of a CUDA IPC memory handle. */
    public static final int HANDLE_BYTES = 64;
    private static final Field RESERVED;

    static {
        try {
            RESERVED = CUipcMemHandle.class.getDeclaredField("reserved");
            RESERVED.setAccessible(true);
        } catch (NoSuchFieldException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final CudaDevice device;
    private final CUdeviceptr pointer = new CUdeviceptr();
    private final long address;
    private boolean closed;

    private IpcMapping(CudaDevice device, byte[] handle) {
        this.device = device;
        CUipcMemHandle h = new CUipcMemHandle();
        System.arraycopy(handle, 0, reserved(h), 0, HANDLE_BYTES);
        device.run(() -> Cuda.check(JCudaDriver.cuIpcOpenMemHandle(pointer, h,
                CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle"));
        this.address = Cuda.address(pointer);
    }

    /**
     * The IPC handle of {@code buffer}'s allocation, as 64 bytes to send to other processes.
     *
     * @param buffer memory this process allocated
     * @return the handle's bytes
     */
    public static byte[] export(DeviceBuffer buffer) {
        CUipcMemHandle h = new CUipcMemHandle();
        buffer.device().run(() -> Cuda.check(JCudaDriver.cuIpcGetMemHandle(h, buffer.pointer()),
                "cuIpcGetMemHandle"));
        return reserved(h).clone();
    }

    /**
     * Maps the allocation {@code handle} ({@link #export} of another process) into this process on {@code device}.
     *
     * @param device the GPU whose context maps it
     * @param handle the 64 bytes another process exported
     * @return the mapping; close it to unmap
     */
    public static IpcMapping open(CudaDevice device, byte[] handle) {
        if (handle.length != HANDLE_BYTES) {
            throw new IllegalArgumentException("a CUDA IPC handle has " + HANDLE_BYTES + " bytes; got "
                    + handle.length);
        }
        return new IpcMapping(device, handle);
    }

    private static byte[] reserved(CUipcMemHandle h) {
        try {
            return (byte[]) RESERVED.get(h);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    /** {@return the mapped allocation's base address in this process} */
    public long address() {
        return address;
    }

    /** Unmaps the allocation from this process. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        device.run(() -> Cuda.check(JCudaDriver.cuIpcCloseMemHandle(pointer), "cuIpcCloseMemHandle"));
    }
}
