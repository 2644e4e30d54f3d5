package io.github.dcp4j.cuda;

import jcuda.driver.CUcontext;
import jcuda.driver.CUresult;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;

import java.util.Objects;

/**
 * A CUDA stream on one device: one this class created (non-blocking, destroyed on close), or a caller's stream
 * wrapped without taking it over ({@link #wrap}: closing the wrapper leaves the stream alone).
 */
public final class CudaStream implements AutoCloseable {
    /** {@code CU_STREAM_PER_THREAD} (cuda.h): a name that each thread resolves to its own stream. */
    private static final long PER_THREAD_DEFAULT_STREAM = 0x2;

    private final CudaDevice device;
    private final CUstream stream;
    private final boolean owned;
    private boolean closed;

    /**
     * A new non-blocking stream of {@code device}'s primary context, owned by this object (closed with it).
     *
     * @param device the GPU
     */
    public CudaStream(CudaDevice device) {
        this.device = device;
        this.stream = new CUstream();
        this.owned = true;
        device.run(() -> Cuda.check(JCudaDriver.cuStreamCreate(stream, CUstream_flags.CU_STREAM_NON_BLOCKING),
                "cuStreamCreate"));
    }

    private CudaStream(CudaDevice device, CUstream stream) {
        this.device = device;
        this.stream = stream;
        this.owned = false;
    }

    /**
     * The caller's stream {@code stream}, which must belong to {@code device}'s primary context (the one the CUDA
     * runtime uses, so a stream from {@code cudaStreamCreate} or torch qualifies). Work queued here runs after what
     * the caller queued before it and before what the caller queues after; the stream stays the caller's.
     *
     * @param device the GPU whose primary context the stream belongs to
     * @param stream the caller's stream (not the per-thread default stream)
     * @return the wrapped stream; closing it leaves the caller's stream as it is
     */
    public static CudaStream wrap(CudaDevice device, CUstream stream) {
        Objects.requireNonNull(device, "device");
        Objects.requireNonNull(stream, "stream");
        if (Cuda.address(stream) == PER_THREAD_DEFAULT_STREAM) {
            throw new IllegalArgumentException("stream must be a stream handle, not CU_STREAM_PER_THREAD (0x2): that"
                    + " names the calling thread's default stream, and dcp4j launches from its own device thread");
        }
        CUcontext context = new CUcontext();
        device.run(() -> Cuda.check(JCudaDriver.cuStreamGetCtx(stream, context), "cuStreamGetCtx"));
        if (Cuda.address(context) != device.contextAddress()) {
            throw new IllegalArgumentException("stream 0x" + Long.toHexString(Cuda.address(stream))
                    + " belongs to another CUDA context than " + device + "'s primary context");
        }
        return new CudaStream(device, stream);
    }

    /**
     * As {@link #wrap(CudaDevice, CUstream)} for a raw {@code CUstream} / {@code cudaStream_t} handle.
     *
     * @param device the GPU whose primary context the stream belongs to
     * @param handle the raw handle (0 is the legacy default stream)
     * @return the wrapped stream
     */
    public static CudaStream wrap(CudaDevice device, long handle) {
        return wrap(device, Cuda.stream(handle));
    }

    /** {@return the JCuda stream object} */
    public CUstream handle() {
        return stream;
    }

    /** {@return the raw {@code CUstream} handle} */
    public long address() {
        return Cuda.address(stream);
    }

    /** {@return the GPU the stream belongs to} */
    public CudaDevice device() {
        return device;
    }

    /** Waits until everything queued on this stream has run. */
    public void synchronize() {
        device.run(() -> Cuda.check(JCudaDriver.cuStreamSynchronize(stream), "cuStreamSynchronize"));
    }

    /**
     * Whether everything queued on this stream has run, without waiting ({@code cuStreamQuery}).
     *
     * @return true when the stream is idle, false while work queued on it still runs
     */
    public boolean idle() {
        return device.call(() -> {
            int result = JCudaDriver.cuStreamQuery(stream);
            if (result == CUresult.CUDA_ERROR_NOT_READY) {
                return false;
            }
            Cuda.check(result, "cuStreamQuery");
            return true;
        });
    }

    /** Destroys a stream this class created; a wrapped caller's stream is left as it is. */
    @Override
    public void close() {
        if (!closed) {
            closed = true;
            if (owned) {
                device.run(() -> Cuda.check(JCudaDriver.cuStreamDestroy(stream), "cuStreamDestroy"));
            }
        }
    }
}
