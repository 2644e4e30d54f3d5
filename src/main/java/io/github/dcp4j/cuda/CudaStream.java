package io.github.dcp4j.cuda;

import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;

/** A non-blocking CUDA stream on one device. */
public final class CudaStream implements AutoCloseable {
    private final CudaDevice device;
    private final CUstream stream = new CUstream();
    private boolean closed;

    public CudaStream(CudaDevice device) {
        this.device = device;
        device.run(() -> Cuda.check(JCudaDriver.cuStreamCreate(stream, CUstream_flags.CU_STREAM_NON_BLOCKING),
                "cuStreamCreate"));
    }

    public CUstream handle() {
        return stream;
    }

    public CudaDevice device() {
        return device;
    }

    /** Waits until everything queued on this stream has run. */
    public void synchronize() {
        device.run(() -> Cuda.check(JCudaDriver.cuStreamSynchronize(stream), "cuStreamSynchronize"));
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            device.run(() -> Cuda.check(JCudaDriver.cuStreamDestroy(stream), "cuStreamDestroy"));
        }
    }
}
