package io.github.dcp4j.engine;

import java.time.Duration;

/**
 * A rank stopped waiting for a peer's line: it waited longer than its timeout (the peer died, never called, or called
 * differently), or its thread was interrupted ({@link #interrupted}). The workspace group is poisoned until it is
 * reset.
 */
public final class PeerTimeoutException extends RuntimeException {
    private final int rank;
    private final int sourceRank;
    private final int row;
    private final int line;
    private final boolean lseLine;

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

    /** The wait of a rank whose thread was interrupted, before its timeout. */
    public static PeerTimeoutException interrupted(int rank, int sourceRank, int row, int line, boolean lseLine,
                                                   int epoch) {
        return new PeerTimeoutException("rank " + rank + " was interrupted", rank, sourceRank, row, line, lseLine,
                epoch);
    }

    /** The rank that waited. */
    public int rank() {
        return rank;
    }

    /** The rank whose line never arrived. */
    public int sourceRank() {
        return sourceRank;
    }

    /** The row it was waiting for. */
    public int row() {
        return row;
    }

    /** The data line index, or the group index when {@link #lseLine()}. */
    public int line() {
        return line;
    }

    /** True when the missing line was an LSE line. */
    public boolean lseLine() {
        return lseLine;
    }
}
