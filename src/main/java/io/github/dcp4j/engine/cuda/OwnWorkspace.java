package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.peer.PeerWorkspaces;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.time.Duration;

/** The host's reads and writes of a rank's own workspace (through its view): metadata words, and the reset. */
final class OwnWorkspace {
    private static final ValueLayout.OfInt LE_INT = ValueLayout.JAVA_INT.withOrder(ByteOrder.LITTLE_ENDIAN);

    private OwnWorkspace() {
    }

    /** The metadata words: epoch, arrivals, timeout kind, source, row, line, epoch of the failed call. */
    static int[] metadata(PeerWorkspaces view) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment m = arena.allocate(Ll128.METADATA_RECORD_BYTES, Integer.BYTES);
            view.device().copyToHost(view.workspaceAddress(view.rank()), m);
            return m.toArray(LE_INT);
        }
    }

    /** The device-side call counter. */
    static int epoch(PeerWorkspaces view) {
        return metadata(view)[Ll128.EPOCH_OFFSET / Integer.BYTES];
    }

    /** Overwrites the device-side call counter (white-box, for the wrap tests). */
    static void forceEpoch(PeerWorkspaces view, int epoch) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment word = arena.allocate(Integer.BYTES, Integer.BYTES);
            word.set(LE_INT, 0, epoch);
            view.device().copyFromHost(word, view.workspaceAddress(view.rank()) + Ll128.EPOCH_OFFSET);
        }
    }

    /** The timeout the rank recorded in its last call, or null. */
    static PeerTimeoutException timeoutRecord(PeerWorkspaces view, Duration timeout) {
        int[] m = metadata(view);
        int kind = m[Ll128.TIMEOUT_OFFSET / Integer.BYTES];
        if (kind == 0) {
            return null;
        }
        return new PeerTimeoutException(view.rank(), m[Ll128.TIMEOUT_SOURCE_OFFSET / Integer.BYTES],
                m[Ll128.TIMEOUT_ROW_OFFSET / Integer.BYTES], m[Ll128.TIMEOUT_LINE_OFFSET / Integer.BYTES],
                kind == Ll128.TIMEOUT_LSE_LINE, timeout, m[Ll128.TIMEOUT_EPOCH_OFFSET / Integer.BYTES]);
    }

    /** Whether the workspace is marked poisoned (a wait of this rank gave up since its last re-zeroing). */
    static boolean poisoned(PeerWorkspaces view) {
        return (Integer.toUnsignedLong(metadata(view)[Ll128.ARRIVALS_OFFSET / Integer.BYTES]) & Ll128.POISONED_BIT)
                != 0;
    }

    /** Re-zeroes the whole workspace (epoch, flags, timeout record), synchronously; no call may be in flight. */
    static void zero(PeerWorkspaces view) {
        view.device().zero(view.workspaceAddress(view.rank()), view.workspaceBytes());
    }
}
