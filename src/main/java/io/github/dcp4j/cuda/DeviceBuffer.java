package io.github.dcp4j.cuda;

import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.JCudaDriver;

import java.lang.foreign.MemorySegment;

/** Device memory from {@code cuMemAlloc} (256-byte aligned), freed on close. */
public final class DeviceBuffer implements AutoCloseable {
    private final CudaDevice device;
    private final CUdeviceptr pointer = new CUdeviceptr();
    private final long bytes;
    private final long address;
    private boolean closed;

    private DeviceBuffer(CudaDevice device, long bytes) {
        this.device = device;
        this.bytes = bytes;
        device.run(() -> Cuda.check(JCudaDriver.cuMemAlloc(pointer, bytes), "cuMemAlloc(" + bytes + ")"));
        this.address = Cuda.address(pointer);
    }

    /**
     * {@code bytes} of uninitialised device memory.
     *
     * @param device the GPU
     * @param bytes  the size
     * @return the buffer; close it to free the memory
     */
    public static DeviceBuffer allocate(CudaDevice device, long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("bytes must be > 0; got " + bytes);
        }
        return new DeviceBuffer(device, bytes);
    }

    /** {@return the device address of the first byte} */
    public long address() {
        return address;
    }

    /** {@return the GPU that holds the memory} */
    public CudaDevice device() {
        return device;
    }

    /** {@return the size in bytes} */
    public long byteSize() {
        return bytes;
    }

    /** {@return the JCuda pointer to the first byte} */
    public CUdeviceptr pointer() {
        return pointer;
    }

    /** Sets every byte to zero (synchronously). */
    public void zero() {
        device.zero(address, bytes);
    }

    /**
     * Queues a fill of every byte with {@code value} on {@code stream} (call on the device thread).
     *
     * @param value  the byte
     * @param stream where the fill is queued
     */
    public void fillAsync(byte value, CudaStream stream) {
        Cuda.check(JCudaDriver.cuMemsetD8Async(pointer, value, bytes, stream.handle()), "cuMemsetD8Async");
    }

    /**
     * Queues a device-to-device copy of this whole buffer into {@code target} on {@code stream} (device thread).
     *
     * @param target a buffer at least as large
     * @param stream where the copy is queued
     */
    public void copyToAsync(DeviceBuffer target, CudaStream stream) {
        if (target.bytes < bytes) {
            throw new IllegalArgumentException("target of " + target.bytes + " bytes is smaller than " + bytes);
        }
        Cuda.check(JCudaDriver.cuMemcpyDtoDAsync(target.pointer, pointer, bytes, stream.handle()),
                "cuMemcpyDtoDAsync");
    }

    /**
     * Copies {@code host} (a native segment) to {@code offset} of this buffer, synchronously.
     *
     * @param host   the bytes (its whole size)
     * @param offset the first byte of this buffer to write
     */
    public void copyFrom(MemorySegment host, long offset) {
        requireRange(offset, host.byteSize());
        device.copyFromHost(host, address + offset);
    }

    /**
     * Copies {@code host.byteSize()} bytes from {@code offset} of this buffer into {@code host}, synchronously.
     *
     * @param offset the first byte of this buffer to read
     * @param host   where the bytes go (its whole size)
     */
    public void copyTo(long offset, MemorySegment host) {
        requireRange(offset, host.byteSize());
        device.copyToHost(address + offset, host);
    }

    private void requireRange(long offset, long length) {
        if (closed) {
            throw new IllegalStateException("device buffer is closed");
        }
        if (offset < 0 || length < 0 || offset + length > bytes) {
            throw new IllegalArgumentException("range [" + offset + ", " + (offset + length)
                    + ") outside a device buffer of " + bytes + " bytes");
        }
    }

    static Pointer hostPointer(MemorySegment host) {
        if (!host.isNative()) {
            throw new IllegalArgumentException("host memory for a copy must be native (off-heap)");
        }
        return Pointer.to(host.asByteBuffer());
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        CudaDevice.forgetAllocation(address);
        device.run(() -> Cuda.check(JCudaDriver.cuMemFree(pointer), "cuMemFree"));
    }
}
