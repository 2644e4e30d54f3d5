package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.engine.PeerTimeoutException;

/**
 * Whether a group's workspaces may take a call: not once closed, and not after a timeout until a reset (a timed-out
 * call leaves lines and counters of a call that never completed). Shared by an engine and the calls it prepared.
 */
final class WorkspaceState {
    private final String what;
    private volatile boolean closed;
    private volatile PeerTimeoutException poison;

    /** @param what names the workspaces in messages ("the CUDA workspace group") */
    WorkspaceState(String what) {
        this.what = what;
    }

    /** Throws if no call may run now: closed, or poisoned by an earlier timeout. */
    void requireUsable() {
        requireOpen();
        PeerTimeoutException p = poison;
        if (p != null) {
            throw new IllegalStateException(what + " is poisoned by an earlier timeout (" + p.getMessage()
                    + "); call reset() (on every rank)", p);
        }
    }

    void requireOpen() {
        if (closed) {
            throw new IllegalStateException(what + " is closed");
        }
    }

    void poison(PeerTimeoutException failure) {
        poison = failure;
    }

    void clearPoison() {
        poison = null;
    }

    /** Marks the workspaces closed; returns false if they were already. */
    boolean close() {
        if (closed) {
            return false;
        }
        closed = true;
        return true;
    }
}
