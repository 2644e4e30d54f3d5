package io.github.dcp4j.cuda;

import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.JCudaDriver;

/** A CUDA event with timing, for measuring stream time. */
public final class CudaEvent implements AutoCloseable {
    private final CudaDevice device;
    private final CUevent event = new CUevent();
    private boolean closed;

    /**
     * A timing event of {@code device}.
     *
     * @param device the GPU
     */
    public CudaEvent(CudaDevice device) {
        this.device = device;
        device.run(() -> Cuda.check(JCudaDriver.cuEventCreate(event, CUevent_flags.CU_EVENT_DEFAULT),
                "cuEventCreate"));
    }

    /**
     * Records the event on {@code stream} (call on the device thread, inside timed work).
     *
     * @param stream where the event is recorded
     */
    public void record(CudaStream stream) {
        Cuda.check(JCudaDriver.cuEventRecord(event, stream.handle()), "cuEventRecord");
    }

    /**
     * Milliseconds between {@code start} and {@code end}, after waiting for {@code end}.
     *
     * @param start the earlier event
     * @param end   the later event
     * @return the time between them, in milliseconds
     */
    public static float elapsedMillis(CudaEvent start, CudaEvent end) {
        return end.device.call(() -> {
            Cuda.check(JCudaDriver.cuEventSynchronize(end.event), "cuEventSynchronize");
            float[] ms = new float[1];
            Cuda.check(JCudaDriver.cuEventElapsedTime(ms, start.event, end.event), "cuEventElapsedTime");
            return ms[0];
        });
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            device.run(() -> Cuda.check(JCudaDriver.cuEventDestroy(event), "cuEventDestroy"));
        }
    }
}
