package io.github.dcp4j.engine;

import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.Tensor;
import io.github.dcp4j.op.WorkspaceShape;

/**
 * One rank's workspace on some engine: the memory peers send this rank's rows into, and the engine that runs this
 * rank's part of each call. Whoever created it owns its memory and frees it (an {@code AutoCloseable} group or
 * provider).
 */
public interface RankWorkspace {

    /**
     * This workspace's rank in its group.
     *
     * @return the rank, {@code 0 <= rank < cpSize()}
     */
    int rank();

    /**
     * Ranks in the group.
     *
     * @return cp
     */
    int cpSize();

    /**
     * Size in bytes; the same on every rank of the group.
     *
     * @return the workspace's size
     */
    long byteSize();

    /**
     * What a call on this workspace is validated against.
     *
     * @return the group's size, this rank and the workspace's size
     */
    default WorkspaceShape shape() {
        return new WorkspaceShape(cpSize(), rank(), byteSize());
    }

    /**
     * The engine's name as the CLI prints it.
     *
     * @return {@code cpu} or {@code cuda}
     */
    String engineName();

    /**
     * Runs this rank's part of one collective call: sends its slices to every peer, receives and merges its rows into
     * {@code call.out()}. Every rank of the group must make the same calls in the same order.
     *
     * @param call this rank's call, validated against this workspace
     * @throws PeerTimeoutException where a peer's lines do not arrive within the timeout
     */
    void execute(ReduceCall call);

    /**
     * Validates one rank's arguments against this workspace and runs the call ({@link #execute}). Engines whose ranks
     * live in several processes override it to check the arguments on every rank before any launches.
     *
     * @param partialO   this rank's partial outputs
     * @param partialLse this rank's log-sum-exps
     * @param out        where the merged rows go
     * @param cpRank     this rank
     * @param cpSize     ranks in the group
     * @param mode       the LSEs' base
     * @throws IllegalArgumentException naming the first argument refused (nothing is sent)
     * @throws PeerTimeoutException where a peer's lines do not arrive within the timeout
     */
    default void reduce(Tensor partialO, Tensor partialLse, Tensor out, int cpRank, int cpSize, LseMode mode) {
        execute(ReduceCall.validate(partialO, partialLse, out, cpRank, cpSize, mode, shape()));
    }
}
