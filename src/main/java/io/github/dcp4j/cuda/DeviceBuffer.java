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

    /** {@code bytes} of uninitialised device memory. */
    public static DeviceBuffer allocate(CudaDevice device, long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("bytes must be > 0; got " + bytes);
        }
        return new DeviceBuffer(device, bytes);
    }

    public long address() {
        return address;
    }

    public CudaDevice device() {
        return device;
    }

    public long byteSize() {
        return bytes;
    }

    public CUdeviceptr pointer() {
        return pointer;
    }

    /** Sets every byte to zero (synchronously). */
    public void zero() {
        device.zero(address, bytes);
    }

    /** Queues a fill of every byte with {@code value} on {@code stream} (call on the device thread). */
    public void fillAsync(byte value, CudaStream stream) {
        Cuda.check(JCudaDriver.cuMemsetD8Async(pointer, value, bytes, stream.handle()), "cuMemsetD8Async");
    }

    /** Queues a device-to-device copy of this whole buffer into {@code target} on {@code stream} (device thread). */
    public void copyToAsync(DeviceBuffer target, CudaStream stream) {
        if (target.bytes < bytes) {
            throw new IllegalArgumentException("target of " + target.bytes + " bytes is smaller than " + bytes);
        }
        Cuda.check(JCudaDriver.cuMemcpyDtoDAsync(target.pointer, pointer, bytes, stream.handle()),
                "cuMemcpyDtoDAsync");
    }

    /** Copies {@code host} (a native segment) to {@code offset} of this buffer, synchronously. */
    public void copyFrom(MemorySegment host, long offset) {
        requireRange(offset, host.byteSize());
        device.copyFromHost(host, address + offset);
    }

    /** Copies {@code host.byteSize()} bytes from {@code offset} of this buffer into {@code host}, synchronously. */
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
