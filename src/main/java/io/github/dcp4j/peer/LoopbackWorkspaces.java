package io.github.dcp4j.peer;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.DeviceBuffer;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Every rank's workspace on one GPU, in this process: one zeroed {@code cuMemAlloc} buffer per rank. The loopback
 * engine runs all ranks in one launch against them; {@link #rank(int)} is rank r's view.
 */
public final class LoopbackWorkspaces implements AutoCloseable {
    private final CudaDevice device;
    private final List<DeviceBuffer> buffers = new ArrayList<>();
    private boolean closed;

    private LoopbackWorkspaces(CudaDevice device, int cpSize, long workspaceBytes) {
        this.device = device;
        try {
            for (int r = 0; r < cpSize; r++) {
                DeviceBuffer w = DeviceBuffer.allocate(device, workspaceBytes);
                buffers.add(w);
                w.zero();
            }
        } catch (RuntimeException e) {
            close();
            throw e;
        }
    }

    /**
     * {@code cpSize} zeroed workspaces of {@code workspaceBytes} on {@code device}.
     *
     * @param device         the GPU
     * @param cpSize         ranks in the group
     * @param workspaceBytes each rank's workspace size
     * @return the workspaces; close to free them
     */
    public static LoopbackWorkspaces allocate(CudaDevice device, int cpSize, long workspaceBytes) {
        Objects.requireNonNull(device, "device");
        if (cpSize < 1) {
            throw new IllegalArgumentException("cp_size must be >= 1; got " + cpSize);
        }
        if (workspaceBytes <= 0) {
            throw new IllegalArgumentException("workspace bytes must be > 0; got " + workspaceBytes);
        }
        return new LoopbackWorkspaces(device, cpSize, workspaceBytes);
    }

    /** {@return the ranks in the group} */
    public int cpSize() {
        return buffers.size();
    }

    /**
     * Rank {@code r}'s view of the group.
     *
     * @param r a rank
     * @return its view: every rank's workspace address
     */
    public PeerWorkspaces rank(int r) {
        return GroupView.of("loopback", device, r, buffers);
    }

    /** Frees every workspace; no launch may be in flight. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (DeviceBuffer b : buffers) {
            b.close();
        }
    }
}
