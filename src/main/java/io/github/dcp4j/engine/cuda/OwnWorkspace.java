package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.layout.Ll128Lines;
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

    /** The era the next call will take (the arrivals word's bits at {@link Ll128#ERA_SHIFT}). */
    static int era(PeerWorkspaces view) {
        return eraOf(metadata(view)[Ll128.ARRIVALS_OFFSET / Integer.BYTES]);
    }

    private static int eraOf(int arrivals) {
        return Ll128Lines.era(Integer.toUnsignedLong(arrivals) << 32);
    }

    /**
     * Overwrites the device-side call counter (white-box, for the wrap tests), advancing the era, so that no line an
     * earlier call left behind carries a keyed flag of the calls to come; no call may be in flight.
     */
    static void forceEpoch(PeerWorkspaces view, int epoch) {
        int arrivals = metadata(view)[Ll128.ARRIVALS_OFFSET / Integer.BYTES];
        writeTicket(view, epoch, nextEra(arrivals) | (int) (arrivals & Ll128.POISONED_BIT));
    }

    /** The arrivals word of no arrival in the era after the one {@code arrivals} holds (the poisoned bit clear). */
    private static int nextEra(int arrivals) {
        return (int) (((eraOf(arrivals) + 1) & Ll128.ERA_MASK) << Ll128.ERA_SHIFT);
    }

    private static void writeTicket(PeerWorkspaces view, int epoch, int arrivals) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment word = arena.allocate(2 * Integer.BYTES, Long.BYTES);
            word.set(LE_INT, Ll128.EPOCH_OFFSET, epoch);
            word.set(LE_INT, Ll128.ARRIVALS_OFFSET, arrivals);
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

    /**
     * Re-zeroes the whole workspace (epoch, flags, timeout record, the poisoned bit), synchronously, but for the era,
     * which advances (so that no line of a call before the reset carries a keyed flag of the calls after it); no call
     * may be in flight.
     */
    static void zero(PeerWorkspaces view) {
        int arrivals = metadata(view)[Ll128.ARRIVALS_OFFSET / Integer.BYTES];
        view.device().zero(view.workspaceAddress(view.rank()), view.workspaceBytes());
        writeTicket(view, 0, nextEra(arrivals));
    }
}
