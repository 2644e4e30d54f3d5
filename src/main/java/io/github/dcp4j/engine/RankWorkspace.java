package io.github.dcp4j.engine;

import io.github.dcp4j.DcpLseReduce;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;

/**
 * One rank's workspace on some engine: the memory peers send this rank's rows into, and the engine that runs this
 * rank's part of each call. Whoever created it owns its memory and frees it (an {@code AutoCloseable} group or
 * provider).
 */
public interface RankWorkspace {

    /** This workspace's rank in its group. */
    int rank();

    /** Ranks in the group. */
    int cpSize();

    /** Size in bytes; the same on every rank of the group. */
    long byteSize();

    /** The engine's name as the CLI prints it ({@code cpu}, {@code cuda}). */
    String engineName();

    /**
     * Runs this rank's part of one collective call: sends its slices to every peer, receives and merges its rows into
     * {@code call.out()}. Every rank of the group must make the same calls in the same order.
     */
    void execute(ReduceCall call);

    /**
     * Validates one rank's arguments against this workspace and runs the call ({@link #execute}). Engines whose ranks
     * live in several processes override it to check the arguments on every rank before any launches.
     */
    default void reduce(TensorView partialO, TensorView partialLse, TensorView out, int cpRank, int cpSize,
                        LseMode mode) {
        execute(DcpLseReduce.validate(partialO, partialLse, out, this, cpRank, cpSize, mode));
    }
}
