package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.CudaStream;

import java.util.Objects;

/**
 * Workspaces serve one ordered stream on their GPU: the first stream a call uses binds them, and any other is
 * refused. Streams are compared by their CUDA handle, so a caller's stream wrapped twice is the same stream.
 */
final class StreamBinding {
    private final CudaDevice device;
    private CudaStream bound;

    /** For workspaces whose calls launch on {@code device}. */
    StreamBinding(CudaDevice device) {
        this.device = device;
    }

    /** Throws if {@code stream} is not on the workspaces' GPU or they are bound to another stream; binds nothing. */
    synchronized void requireAllowed(CudaStream stream) {
        Objects.requireNonNull(stream, "stream");
        if (stream.device() != device) {
            throw new IllegalArgumentException("stream must be on " + device + ", where the call launches; got one on "
                    + stream.device());
        }
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
