package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.MappedHostBuffer;
import io.github.dcp4j.engine.FirstFailure;
import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.peer.PeerWorkspaces;

import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.List;

/**
 * Whether a group's workspaces may take a call: not once closed, and not after a failed call until a reset (a timed
 * out call leaves lines and counters of a call that never completed). Shared by an engine and the calls it prepared.
 *
 * <p>It holds the engine's status word: one u32 of mapped host memory that every launch of the engine's calls
 * writes {@link Ll128#STATUS_FAILED} into when a wait gives up or a call finds its workspace poisoned. Checking a
 * call, eager or replayed in a graph, is one read of host memory, with no copy; the ranks' records are read only
 * when it is set.
 */
final class WorkspaceState {
    private static final VarHandle STATUS = ValueLayout.JAVA_INT.varHandle();
    private static final SecureRandom RANDOM = new SecureRandom();

    private final String what;
    private final MappedHostBuffer status;
    private final long flagKey;
    private volatile boolean closed;
    private volatile RuntimeException poison;

    /**
     * @param what    names the workspaces in messages ("the CUDA workspace group")
     * @param device  the GPU whose context allocates the status word (every GPU of the process can write it)
     * @param flagKey the group's key of its LL128 data flags ({@link Ll128#flagKey}), the same on every rank
     */
    WorkspaceState(String what, CudaDevice device, long flagKey) {
        if ((flagKey & Ll128.FLAG_KEY_BIT) == 0) {
            throw new IllegalArgumentException("flagKey must have bit 63 set (Ll128.flagKey); got 0x"
                    + Long.toHexString(flagKey));
        }
        this.what = what;
        this.flagKey = flagKey;
        this.status = MappedHostBuffer.allocate(device, Integer.BYTES);
    }

    /** {@return a fresh flag key for a group that one process opens: 63 bits from a SecureRandom} */
    static long newFlagKey() {
        return Ll128.flagKey(RANDOM.nextLong());
    }

    /** {@return the group's key of its LL128 data flags, for the launch arguments} */
    long flagKey() {
        return flagKey;
    }

    /** Throws if no call may run now: closed, or poisoned by an earlier failure. */
    void requireUsable() {
        requireOpen();
        RuntimeException p = poison;
        if (p != null) {
            throw new IllegalStateException(poisonReason(), p);
        }
    }

    /**
     * Why no call may run now where the workspaces are poisoned, for a group check that names it to every rank; null
     * where they are not.
     */
    String poisonReason() {
        RuntimeException p = poison;
        return p == null ? null : what + " is poisoned by an earlier failure (" + p.getMessage()
                + "); call reset() on every rank";
    }

    /** Poisons the workspaces with {@code cause}, a failure of this rank's part of a call the group agreed on. */
    void poison(RuntimeException cause) {
        if (poison == null) {
            poison = cause;
        }
    }

    void requireOpen() {
        if (closed) {
            throw new IllegalStateException(what + " is closed");
        }
    }

    /** The status word's device address, for the launch arguments. */
    long statusAddress() {
        return status.deviceAddress();
    }

    /** Whether a launch reported a failure since the last reset (read after the launches have finished). */
    boolean statusFailed() {
        return (int) STATUS.getAcquire(status.memory(), 0L) != 0;
    }

    /**
     * After the launches of {@code views}' ranks have run: one read of the status word; if a launch reported a
     * failure, the ranks' records are read and the first one is raised (the others suppressed in it), and the
     * workspaces are poisoned until their reset. (A group whose launches span several GPUs shares one status word:
     * views whose ranks recorded nothing return.)
     */
    void check(List<PeerWorkspaces> views, Duration timeout) {
        if (!statusFailed()) {
            return;
        }
        FirstFailure<PeerTimeoutException> failure = new FirstFailure<>();
        for (PeerWorkspaces view : views) {
            PeerTimeoutException e = OwnWorkspace.timeoutRecord(view, timeout);
            if (e != null) {
                failure.add(e);
            }
        }
        if (failure.first() != null) {
            poison = failure.first();
        }
        failure.throwIfAny();
    }

    /** After the workspaces were re-zeroed: the status word and the poison are cleared. */
    void clearPoison() {
        STATUS.setRelease(status.memory(), 0L, 0);
        poison = null;
    }

    /**
     * Marks the workspaces closed; returns false if they were already. The status word stays until {@link #free()}:
     * kernels still queued write it, so the engine frees it after it has waited for them.
     */
    boolean beginClose() {
        if (closed) {
            return false;
        }
        closed = true;
        return true;
    }

    /** Frees the status word (after {@link #beginClose()} and once no kernel of the engine can run). */
    void free() {
        status.close();
    }
}
