package io.github.dcp4j.engine;

import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.Tensor;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.Variant;
import io.github.dcp4j.op.WorkspaceShape;

import java.lang.foreign.Arena;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Every rank of a group in this process: the CPU engine (ranks as threads) or the CUDA engine's group (the ranks on
 * each GPU as slices of one launch there). One call takes one input per rank, in rank order.
 */
public interface LocalGroup extends AutoCloseable {

    /**
     * The engine's name as the CLI prints it.
     *
     * @return {@code cpu} or {@code cuda}
     */
    String engineName();

    /**
     * What runs the ranks, for reports.
     *
     * @return threads and cores, or the GPU
     */
    String description();

    /**
     * Ranks in the group.
     *
     * @return cp
     */
    int cpSize();

    /**
     * Validates every rank's arguments (before anything runs) and prepares the call; {@link PreparedCall#run()} then
     * runs it, as often as wanted, on the same inputs.
     *
     * @param partialO   every rank's partial outputs, in rank order
     * @param partialLse every rank's log-sum-exps, in rank order
     * @param out        every rank's output, in rank order
     * @param mode       the LSEs' base
     * @return the prepared call; close it when done
     * @throws IllegalArgumentException naming the rank and the first argument refused
     */
    PreparedCall prepare(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                         List<? extends Tensor> out, LseMode mode);

    /**
     * The protocol variant a call of this size runs (op.Variant): the group's own, or the one auto picks for it. The
     * CPU engine runs ll128.
     *
     * @param rows    the call's rows
     * @param headDim elements of one head
     * @param dtype   the element type
     * @return a variant other than auto
     */
    default Variant variantFor(int rows, int headDim, DType dtype) {
        return Variant.LL128;
    }

    /** Re-zeroes every workspace after a failed call (the collective reset); no call may be in flight. */
    void reset();

    /** Frees the workspaces (and the engine's GPU resources); no call may be in flight. */
    @Override
    void close();

    /** One call of the group, prepared. */
    interface PreparedCall extends AutoCloseable {
        /**
         * Runs the call on every rank and waits for it; a timeout throws {@link PeerTimeoutException}, and on the CPU
         * engine a rank whose part failed stops the others with {@link PeerFailedException}.
         */
        void run();

        /** Makes the last run's outputs visible in the host outputs given to {@code prepare} (device outputs are). */
        void readOutputs();

        /** Frees what the call holds (device copies of host inputs, its launch); the group stays open. */
        @Override
        void close();
    }

    /**
     * One call on every rank: rank r reduces {@code partialO.get(r)}, {@code partialLse.get(r)} into
     * {@code out.get(r)}.
     *
     * @param partialO   every rank's partial outputs, in rank order
     * @param partialLse every rank's log-sum-exps, in rank order
     * @param out        every rank's output, in rank order
     * @param mode       the LSEs' base
     */
    default void reduceAll(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                           List<? extends Tensor> out, LseMode mode) {
        try (PreparedCall call = prepare(partialO, partialLse, out, mode)) {
            call.run();
            call.readOutputs();
        }
    }

    /**
     * As {@link #reduceAll(List, List, List, LseMode)}, into fresh outputs.
     *
     * @param partialO   every rank's partial outputs, in rank order
     * @param partialLse every rank's log-sum-exps, in rank order
     * @param mode       the LSEs' base
     * @return every rank's output, in rank order, in host memory
     */
    default List<TensorView> reduceAll(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                                       LseMode mode) {
        Objects.requireNonNull(partialO, "partial_o");
        List<TensorView> out = new ArrayList<>(partialO.size());
        Arena auto = Arena.ofAuto();
        for (Tensor o : partialO) {
            out.add(TensorView.allocate(auto, o.dtype(), ReduceCall.outputShape(o)));
        }
        reduceAll(partialO, partialLse, out, mode);
        return out;
    }

    /**
     * Every rank's call of a group of {@code cpSize} ranks whose workspaces have {@code workspaceBytes} each: one
     * tensor per rank in each list, each rank's arguments validated, before anything runs.
     *
     * @param partialO       every rank's partial outputs
     * @param partialLse     every rank's log-sum-exps
     * @param out            every rank's output
     * @param cpSize         ranks in the group
     * @param workspaceBytes each rank's workspace size
     * @param mode           the LSEs' base
     * @return the validated calls, in rank order
     * @throws IllegalArgumentException naming the rank and the first argument refused
     */
    static List<ReduceCall> validateAll(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                                        List<? extends Tensor> out, int cpSize, long workspaceBytes, LseMode mode) {
        requireOnePerRank("partial_o", partialO, cpSize);
        requireOnePerRank("partial_lse", partialLse, cpSize);
        requireOnePerRank("out", out, cpSize);
        List<ReduceCall> calls = new ArrayList<>(cpSize);
        for (int r = 0; r < cpSize; r++) {
            calls.add(ReduceCall.validate(partialO.get(r), partialLse.get(r), out.get(r), r, cpSize, mode,
                    new WorkspaceShape(cpSize, r, workspaceBytes)));
        }
        return calls;
    }

    private static void requireOnePerRank(String name, List<? extends Tensor> tensors, int cpSize) {
        Objects.requireNonNull(tensors, name);
        if (tensors.size() != cpSize) {
            throw new IllegalArgumentException(name + " must hold one tensor per rank (" + cpSize + "); got "
                    + tensors.size());
        }
    }
}
