package io.github.dcp4j.engine;

import java.time.Duration;

/**
 * A rank stopped waiting for a peer's line: it waited longer than its timeout (the peer died, never called, or called
 * differently), or its thread was interrupted ({@link #interrupted}). The workspace group is poisoned until it is
 * reset.
 */
public final class PeerTimeoutException extends RuntimeException {
    /** The rank that waited. */
    private final int rank;
    /** The rank whose line never arrived. */
    private final int sourceRank;
    /** The row it was waiting for. */
    private final int row;
    /** The data line, or the LSE line's group. */
    private final int line;
    /** Whether the missing line was an LSE line. */
    private final boolean lseLine;

    /**
     * A wait that ran past its timeout.
     *
     * @param rank       the rank that waited
     * @param sourceRank the rank whose line never arrived
     * @param row        the row it waited for
     * @param line       the data line, or the LSE line's group where {@code lseLine}
     * @param lseLine    whether the missing line was an LSE line
     * @param timeout    how long it waited
     * @param epoch      the call counter of the call
     */
    public PeerTimeoutException(int rank, int sourceRank, int row, int line, boolean lseLine, Duration timeout,
                                int epoch) {
        this("rank " + rank + " timed out after " + timeout.toMillis() + " ms", rank, sourceRank, row, line, lseLine,
                epoch);
    }

    private PeerTimeoutException(String what, int rank, int sourceRank, int row, int line, boolean lseLine,
                                 int epoch) {
        super(what + " waiting for source rank " + sourceRank + ", row " + row + ", "
                + (lseLine ? "LSE line of group " : "data line ") + line + " (call counter "
                + Integer.toUnsignedString(epoch) + ")");
        this.rank = rank;
        this.sourceRank = sourceRank;
        this.row = row;
        this.line = line;
        this.lseLine = lseLine;
    }

    /**
     * The wait of a rank whose thread was interrupted, before its timeout.
     *
     * @param rank       the rank that waited
     * @param sourceRank the rank whose line had not arrived
     * @param row        the row it waited for
     * @param line       the data line, or the LSE line's group where {@code lseLine}
     * @param lseLine    whether the missing line was an LSE line
     * @param epoch      the call counter of the call
     * @return the exception, its message naming the interruption
     */
    public static PeerTimeoutException interrupted(int rank, int sourceRank, int row, int line, boolean lseLine,
                                                   int epoch) {
        return new PeerTimeoutException("rank " + rank + " was interrupted", rank, sourceRank, row, line, lseLine,
                epoch);
    }

    /** {@return the rank that waited} */
    public int rank() {
        return rank;
    }

    /** {@return the rank whose line never arrived} */
    public int sourceRank() {
        return sourceRank;
    }

    /** {@return the row it was waiting for} */
    public int row() {
        return row;
    }

    /** {@return the data line index, or the group index when {@link #lseLine()}} */
    public int line() {
        return line;
    }

    /** {@return true when the missing line was an LSE line} */
    public boolean lseLine() {
        return lseLine;
    }
}
