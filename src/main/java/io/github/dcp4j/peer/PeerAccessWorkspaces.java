package io.github.dcp4j.peer;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.DeviceBuffer;
import io.github.dcp4j.cuda.GpuLinks;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * One JVM driving its group's GPUs, rank r on {@code devices.get(r)}: every rank's workspace is a zeroed buffer on its
 * own GPU, and peer access is enabled between every pair of distinct GPUs (refused with a clear error, before anything
 * is allocated, where the driver reports no peer access). Ranks may share a GPU (no peer access is needed between
 * them): loopback is every rank on one GPU.
 * Peer access this group enabled is disabled again on close; access the application had enabled stays.
 */
public final class PeerAccessWorkspaces implements AutoCloseable {
    /** Every GPU of one process is on its node. */
    private static final String THIS_NODE = "this node";

    private final List<CudaDevice> devices;
    private final List<DeviceBuffer> buffers = new ArrayList<>();
    private final List<CudaDevice[]> enabled = new ArrayList<>();
    private boolean closed;

    private PeerAccessWorkspaces(List<CudaDevice> devices, long workspaceBytes) {
        this.devices = List.copyOf(devices);
        try {
            for (CudaDevice a : distinct(devices)) {
                for (CudaDevice b : distinct(devices)) {
                    if (a != b && a.enablePeerAccess(b)) {
                        enabled.add(new CudaDevice[] {a, b});
                    }
                }
            }
            for (CudaDevice d : devices) {
                DeviceBuffer w = DeviceBuffer.allocate(d, workspaceBytes);
                buffers.add(w);
                w.zero();
            }
        } catch (RuntimeException e) {
            close();
            throw e;
        }
    }

    /**
     * Rank r's zeroed workspace of {@code workspaceBytes} on {@code devices.get(r)}, with peer access between every
     * pair of distinct GPUs. The devices stay the caller's.
     *
     * @param devices        rank r's GPU at index r
     * @param workspaceBytes each rank's workspace size
     * @return the workspaces; close to free them and undo the peer access this enabled
     * @throws IllegalArgumentException where two GPUs have no peer access or cannot carry LL128 between them
     */
    public static PeerAccessWorkspaces allocate(List<CudaDevice> devices, long workspaceBytes) {
        Objects.requireNonNull(devices, "devices");
        if (devices.isEmpty()) {
            throw new IllegalArgumentException("devices must name one GPU per rank; got none");
        }
        if (workspaceBytes <= 0) {
            throw new IllegalArgumentException("workspace bytes must be > 0; got " + workspaceBytes);
        }
        for (CudaDevice a : distinct(devices)) {
            for (CudaDevice b : distinct(devices)) {
                if (a != b && a.ordinal() == b.ordinal()) {
                    throw new IllegalArgumentException("devices holds two CudaDevice objects for GPU " + a.ordinal()
                            + ": pass the same CudaDevice for every rank on one GPU");
                }
                if (a != b && !a.canAccessPeer(b)) {
                    throw new IllegalArgumentException(a + " cannot access " + b + " (the driver reports no peer"
                            + " access between them): in-process ranks need peer access between every pair of GPUs,"
                            + " and LL128 needs NVLink");
                }
            }
        }
        List<GpuLinks.Gpu> gpus = new ArrayList<>();
        for (CudaDevice d : devices) {
            gpus.add(new GpuLinks.Gpu(THIS_NODE, THIS_NODE, d.pciBusId()));
        }
        GpuLinks.requireLl128Links(gpus, GpuLinks.nvml());
        return new PeerAccessWorkspaces(devices, workspaceBytes);
    }

    private static List<CudaDevice> distinct(List<CudaDevice> devices) {
        List<CudaDevice> d = new ArrayList<>();
        for (CudaDevice x : devices) {
            if (!d.contains(x)) {
                d.add(x);
            }
        }
        return d;
    }

    /** {@return the ranks in the group} */
    public int cpSize() {
        return devices.size();
    }

    /**
     * Rank {@code r}'s view: its GPU and every rank's workspace address (valid in every context of this process).
     *
     * @param r a rank
     * @return its view
     */
    public PeerWorkspaces rank(int r) {
        if (r < 0 || r >= devices.size()) {
            throw new IllegalArgumentException("rank must be in [0, " + devices.size() + "); got " + r);
        }
        return GroupView.of("peer-access", devices.get(r), r, buffers);
    }

    /** Frees every workspace and disables the peer access this group enabled; no launch may be in flight. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (DeviceBuffer b : buffers) {
            b.close();
        }
        for (CudaDevice[] pair : enabled) {
            pair[0].disablePeerAccess(pair[1]);
        }
    }
}
