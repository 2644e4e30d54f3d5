package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.CudaStream;

/**
 * Workspaces serve one ordered stream: the first stream a call uses binds them, and any other is refused. Streams are
 * compared by their CUDA handle, so a caller's stream wrapped twice is the same stream.
 */
final class StreamBinding {
    private CudaStream bound;

    /** Throws if the workspaces are bound to another stream than {@code stream}; binds nothing. */
    synchronized void requireAllowed(CudaStream stream) {
        if (bound != null && bound.address() != stream.address()) {
            throw new IllegalStateException("a workspace may only be used from one ordered CUDA stream; this"
                    + " group is bound to its first stream: allocate a workspace group per concurrent stream");
        }
    }

    /** Binds the workspaces to {@code stream} if they are bound to none (once a call on it was prepared). */
    synchronized void bind(CudaStream stream) {
        requireAllowed(stream);
        if (bound == null) {
            bound = stream;
        }
    }
}
