package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.CudaStream;

/**
 * Workspaces serve one ordered stream: the first stream a call uses binds them, and any other is refused. Streams are
 * compared by their CUDA handle, so a caller's stream wrapped twice is the same stream.
 */
final class StreamBinding {
    private CudaStream bound;

    synchronized void bind(CudaStream stream) {
        if (bound == null) {
            bound = stream;
        } else if (bound.address() != stream.address()) {
            throw new IllegalStateException("a workspace may only be used from one ordered CUDA stream; this"
                    + " group is bound to its first stream: allocate a workspace group per concurrent stream");
        }
    }
}
