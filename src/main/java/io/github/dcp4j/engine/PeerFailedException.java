package io.github.dcp4j.engine;

/**
 * A rank stopped waiting because another rank's part of the same call failed once the call had begun (its exception
 * is the cause): the peer would never send what this rank waited for. The workspace group is poisoned until it is
 * reset.
 */
public final class PeerFailedException extends RuntimeException {
    /** The rank that stopped waiting. */
    private final int rank;
    /** The rank whose part failed. */
    private final int failedRank;

    /**
     * A rank that stopped for a peer's failure.
     *
     * @param rank       the rank that stopped waiting
     * @param failedRank the rank whose part failed
     * @param cause      that rank's exception
     */
    public PeerFailedException(int rank, int failedRank, Throwable cause) {
        super("rank " + rank + " stopped waiting: rank " + failedRank + "'s part of the call failed ("
                + cause.getMessage() + ")", cause);
        this.rank = rank;
        this.failedRank = failedRank;
    }

    /** {@return the rank that stopped waiting} */
    public int rank() {
        return rank;
    }

    /** {@return the rank whose part of the call failed} */
    public int failedRank() {
        return failedRank;
    }
}
