package io.github.dcp4j.peer;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.layout.Ll128;

import java.util.function.IntToLongFunction;

/**
 * One rank's view of its group's workspaces: for every rank, the base address of the buffer that holds its workspace,
 * valid in this process on {@link #device()}, and the offset of the workspace inside every such buffer (the
 * reference's buffer pointers and {@code get_offset()}). Rank d's workspace is at {@code baseAddress(d) + offset()}.
 *
 * <p>Providers: {@link PeerAccessWorkspaces} (one JVM, rank r on {@code devices[r]}: loopback where every rank is on
 * one GPU), {@link IpcWorkspaces} (one process per rank, CUDA IPC), {@link ExternalWorkspaces} (the application's own
 * symmetric memory). Whoever created a view owns the memory behind it.
 */
public interface PeerWorkspaces {

    /** {@return the provider's name: loopback, ipc, peer-access or external} */
    String provider();

    /** {@return the GPU this rank's kernel runs on; every address is valid in this process's context on it} */
    CudaDevice device();

    /** {@return this rank} */
    int rank();

    /** {@return the ranks in the group} */
    int cpSize();

    /** {@return the bytes of every rank's workspace (the same on all ranks)} */
    long workspaceBytes();

    /** {@return the offset of the workspace inside every rank's buffer} */
    long offset();

    /**
     * Base address of rank {@code r}'s buffer, in this process.
     *
     * @param r a rank
     * @return the address
     */
    long baseAddress(int r);

    /**
     * Address of rank {@code r}'s workspace, in this process.
     *
     * @param r a rank
     * @return the buffer's base address plus the offset
     */
    default long workspaceAddress(int r) {
        return baseAddress(r) + offset();
    }

    /**
     * The local checks every rank runs before any launch: rank within the group, a workspace of at least the
     * metadata line, and every workspace address non-null and 128-byte aligned.
     *
     * @param p the view to check
     */
    static void requireValid(PeerWorkspaces p) {
        requireValid(p.rank(), p.cpSize(), p.workspaceBytes(), p.offset(), p::baseAddress);
    }

    /**
     * As {@link #requireValid(PeerWorkspaces)}, on the values a view is made of.
     *
     * @param rank           this rank
     * @param cpSize         ranks in the group
     * @param workspaceBytes every rank's workspace size
     * @param offset         the workspace's offset in every buffer
     * @param baseAddress    rank r's buffer base address
     */
    static void requireValid(int rank, int cpSize, long workspaceBytes, long offset, IntToLongFunction baseAddress) {
        if (cpSize < 1 || cpSize > Ll128.MAX_RANKS) {
            throw new IllegalArgumentException("cp_size must be in [1, " + Ll128.MAX_RANKS + "]; got " + cpSize);
        }
        if (rank < 0 || rank >= cpSize) {
            throw new IllegalArgumentException("rank must be in [0, " + cpSize + "); got " + rank);
        }
        if (workspaceBytes <= Ll128.PAYLOAD_OFFSET) {
            throw new IllegalArgumentException("workspace bytes must be > " + Ll128.PAYLOAD_OFFSET + "; got "
                    + workspaceBytes);
        }
        if (offset < 0) {
            throw new IllegalArgumentException("workspace offset must be >= 0; got " + offset);
        }
        for (int r = 0; r < cpSize; r++) {
            long base = baseAddress.applyAsLong(r);
            if (base == 0) {
                throw new IllegalArgumentException("rank " + r + "'s workspace address is null");
            }
            if ((base + offset) % Ll128.LINE_BYTES != 0) {
                throw new IllegalArgumentException("rank " + r + "'s workspace address 0x"
                        + Long.toHexString(base + offset) + " (base 0x" + Long.toHexString(base) + " + offset "
                        + offset + ") is not " + Ll128.LINE_BYTES + "-byte aligned");
            }
        }
    }
}
