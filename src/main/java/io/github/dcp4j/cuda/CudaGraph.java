package io.github.dcp4j.cuda;

import jcuda.driver.CUgraph;
import jcuda.driver.CUgraphExec;
import jcuda.driver.CUstreamCaptureMode;
import jcuda.driver.JCudaDriver;

/**
 * A CUDA graph captured from work queued on a stream, instantiated once and replayed. Device-side state that the
 * captured work reads and writes (such as the op's call counter) advances with every replay.
 */
public final class CudaGraph implements AutoCloseable {
    private final CudaDevice device;
    private final CUgraph graph = new CUgraph();
    private final CUgraphExec exec = new CUgraphExec();
    private boolean closed;

    private CudaGraph(CudaDevice device) {
        this.device = device;
    }

    /**
     * Captures whatever {@code work} queues on {@code stream} (on the device thread) into an executable graph.
     *
     * @param stream the stream to capture (not the legacy default stream)
     * @param work   what queues the work, run once during the capture
     * @return the instantiated graph; close it to free it
     */
    public static CudaGraph capture(CudaStream stream, Runnable work) {
        CudaDevice device = stream.device();
        CudaGraph g = new CudaGraph(device);
        device.run(() -> {
            Cuda.check(JCudaDriver.cuStreamBeginCapture(stream.handle(),
                    CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
            try {
                work.run();
            } finally {
                Cuda.check(JCudaDriver.cuStreamEndCapture(stream.handle(), g.graph), "cuStreamEndCapture");
            }
            Cuda.check(JCudaDriver.cuGraphInstantiate(g.exec, g.graph, 0), "cuGraphInstantiate");
        });
        return g;
    }

    /**
     * Queues one replay on {@code stream} (call on the device thread).
     *
     * @param stream where the replay is queued
     */
    public void launch(CudaStream stream) {
        Cuda.check(JCudaDriver.cuGraphLaunch(exec, stream.handle()), "cuGraphLaunch");
    }

    /**
     * Queues {@code times} replays on {@code stream} and waits for them.
     *
     * @param stream where the replays are queued
     * @param times  how many
     */
    public void replay(CudaStream stream, int times) {
        device.run(() -> {
            for (int i = 0; i < times; i++) {
                launch(stream);
            }
            Cuda.check(JCudaDriver.cuStreamSynchronize(stream.handle()), "cuStreamSynchronize");
        });
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            device.run(() -> {
                Cuda.check(JCudaDriver.cuGraphExecDestroy(exec), "cuGraphExecDestroy");
                Cuda.check(JCudaDriver.cuGraphDestroy(graph), "cuGraphDestroy");
            });
        }
    }
}
