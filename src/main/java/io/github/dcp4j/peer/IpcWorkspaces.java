package io.github.dcp4j.peer;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.DeviceBuffer;
import io.github.dcp4j.cuda.IpcMapping;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.rendezvous.Rendezvous;
import io.github.dcp4j.rendezvous.RendezvousException;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * One process per rank over CUDA IPC (several processes may share one GPU): this rank's workspace is a zeroed
 * {@code cuMemAlloc} buffer whose IPC handle is exchanged through the rendezvous, and every other rank's is opened
 * here with {@code cuIpcOpenMemHandle}. Before anything is allocated, the ranks check that they agree on the protocol
 * and the workspace size; a disagreement is refused on every rank. Every rank must run on the same node.
 *
 * <p>Close is collective too: each rank unmaps its peers' buffers, waits at the rendezvous until every rank has,
 * and only then frees its own.
 */
public final class IpcWorkspaces implements PeerWorkspaces, AutoCloseable {
    private final CudaDevice device;
    private final Rendezvous rendezvous;
    private final DeviceBuffer own;
    private final List<IpcMapping> mappings = new ArrayList<>();
    private final long[] bases;
    private final long workspaceBytes;
    private boolean closed;

    private IpcWorkspaces(CudaDevice device, Rendezvous rendezvous, long workspaceBytes) {
        this.device = device;
        this.rendezvous = rendezvous;
        this.workspaceBytes = workspaceBytes;
        int world = rendezvous.worldSize();
        GroupCheck.agree(rendezvous, "ipc-group", "the CUDA IPC workspace group",
                GroupCheck.Claim.of("protocol", Ll128.PROTOCOL_ID, "workspace_bytes", workspaceBytes));
        this.own = DeviceBuffer.allocate(device, workspaceBytes);
        this.bases = new long[world];
        try {
            own.zero();
            List<byte[]> handles = rendezvous.allGather("ipc-handles", IpcMapping.export(own));
            for (int r = 0; r < world; r++) {
                if (r == rendezvous.rank()) {
                    bases[r] = own.address();
                } else {
                    IpcMapping m = IpcMapping.open(device, handles.get(r));
                    mappings.add(m);
                    bases[r] = m.address();
                }
            }
            PeerWorkspaces.requireValid(this);
        } catch (RuntimeException e) {
            release();
            throw e;
        }
    }

    /**
     * This process's rank of the group {@code rendezvous} connects: allocates and zeroes a workspace of
     * {@code workspaceBytes} on {@code device}, exchanges IPC handles, maps every peer's. Collective: every rank calls
     * it with the same size.
     *
     * @param device         this rank's GPU
     * @param workspaceBytes every rank's workspace size
     * @param rendezvous     the group's rendezvous, for the handles
     * @return every rank's workspace as mapped here; close it to unmap and free
     */
    public static IpcWorkspaces open(CudaDevice device, long workspaceBytes, Rendezvous rendezvous) {
        Objects.requireNonNull(device, "device");
        Objects.requireNonNull(rendezvous, "rendezvous");
        if (workspaceBytes <= 0) {
            throw new IllegalArgumentException("workspace bytes must be > 0; got " + workspaceBytes);
        }
        return new IpcWorkspaces(device, rendezvous, workspaceBytes);
    }

    @Override
    public String provider() {
        return "ipc";
    }

    @Override
    public CudaDevice device() {
        return device;
    }

    @Override
    public int rank() {
        return rendezvous.rank();
    }

    @Override
    public int cpSize() {
        return bases.length;
    }

    @Override
    public long workspaceBytes() {
        return workspaceBytes;
    }

    @Override
    public long offset() {
        return 0;
    }

    @Override
    public long baseAddress(int r) {
        return bases[r];
    }

    /**
     * Unmaps every peer's buffer, waits until every rank has (bounded by the rendezvous timeout: a dead rank's mappings
     * are gone with it), then frees this rank's workspace. Collective.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        device.synchronize();
        for (IpcMapping m : mappings) {
            m.close();
        }
        mappings.clear();
        try {
            rendezvous.barrier("ipc-unmapped");
        } catch (RendezvousException e) {
            System.getLogger(IpcWorkspaces.class.getName()).log(System.Logger.Level.WARNING,
                    "freeing rank " + rank() + "'s workspace without every peer's unmap: " + e.getMessage());
        } finally {
            own.close();
        }
    }

    private void release() {
        for (IpcMapping m : mappings) {
            m.close();
        }
        own.close();
    }

    @Override
    public String toString() {
        return "rank " + rank() + " of " + cpSize() + " over CUDA IPC on " + device + ", workspaces at "
                + Arrays.toString(Arrays.stream(bases).mapToObj(Long::toHexString).toArray());
    }
}
