package io.github.dcp4j;

import io.github.dcp4j.engine.RankWorkspace;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.Tensor;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.Variant;
import io.github.dcp4j.op.WorkspaceSpec;

import java.lang.foreign.Arena;
import java.util.Objects;

/**
 * The op: fused decode context-parallel all-to-all + LSE merge. Rank r holds {@code partial_o [..., cp, D]} whose
 * slice {@code [..., p, :]} belongs to rank p, with its log-sum-exp {@code partial_lse [..., cp]}; after the call,
 * each rank holds {@code out [rows, D]}, the LSE-weighted merge of the cp slices addressed to it.
 *
 * <p>Collective: every rank of the group makes the same calls in the same order, each on its own workspace. Every
 * argument is checked before anything is sent; a rejected call writes nothing. Tensors are host views
 * ({@link TensorView}) or, on a CUDA engine, device memory ({@link io.github.dcp4j.op.DeviceTensor}, no copy).
 */
public final class DcpLseReduce {
    private DcpLseReduce() {
    }

    /**
     * Bytes of one rank's workspace: 128 + 2 x cp x (maxTokens x localHeads) x RowBytes, where RowBytes =
     * 128 x ceil(W / 15) + 16 x ceil(ceil(W / 15) / 4) and W = headDim x elemBytes / 8.
     *
     * @param maxTokens  the most tokens one call may carry
     * @param localHeads heads each rank owns after the call (H)
     * @param cpSize     ranks in the group (cp)
     * @param headDim    elements of one head (D)
     * @param dtype      the element type of partial_o and the output
     * @return the workspace's size in bytes, the same on every rank
     * @throws IllegalArgumentException where an argument is out of its range (named in the message)
     */
    public static long workspaceSize(int maxTokens, int localHeads, int cpSize, int headDim, DType dtype) {
        return new WorkspaceSpec(maxTokens, localHeads, cpSize, headDim, dtype).bytes();
    }

    /**
     * Bytes of one rank's workspace for a protocol variant: {@link #workspaceSize(int, int, int, int, DType)} for
     * ll128, simple and unfused; ll's own, larger size (8-byte lines of 4 data bytes and a flag, layout.LlLayout). For
     * auto, whose size depends on the variants it may pick, see {@link io.github.dcp4j.op.VariantWorkspace}.
     *
     * @param maxTokens  the most tokens one call may carry
     * @param localHeads heads each rank owns after the call (H)
     * @param cpSize     ranks in the group (cp)
     * @param headDim    elements of one head (D)
     * @param dtype      the element type of partial_o and the output
     * @param variant    the protocol variant, not auto
     * @return the workspace's size in bytes, the same on every rank
     * @throws IllegalArgumentException where an argument is out of its range (named in the message), or for auto
     */
    public static long workspaceSize(int maxTokens, int localHeads, int cpSize, int headDim, DType dtype,
                                     Variant variant) {
        Objects.requireNonNull(variant, "variant");
        return variant.workspaceBytes(new WorkspaceSpec(maxTokens, localHeads, cpSize, headDim, dtype));
    }

    /**
     * Rank {@code cpRank}'s part of one call, into a fresh host output {@code [rows, D]}; base-2 LSEs.
     *
     * @param partialO   this rank's {@code [T, H, cp, D]} (or {@code [rows, cp, D]}) partial outputs, fp16 or bf16
     * @param partialLse this rank's {@code [T, H, cp]} log-sum-exps, fp32
     * @param workspace  this rank's workspace of its group
     * @param cpRank     this rank, {@code 0 <= cpRank < cpSize}
     * @param cpSize     ranks in the group
     * @return the merged rows this rank owns, in host memory
     * @throws IllegalArgumentException where an argument is refused (nothing is sent)
     * @throws io.github.dcp4j.engine.PeerTimeoutException where a peer's lines do not arrive within the timeout
     */
    public static TensorView reduce(Tensor partialO, Tensor partialLse, RankWorkspace workspace, int cpRank,
                                    int cpSize) {
        return reduce(partialO, partialLse, workspace, cpRank, cpSize, LseMode.BASE2);
    }

    /**
     * Rank {@code cpRank}'s part of one call, into a fresh host output {@code [rows, D]}.
     *
     * @param partialO   this rank's {@code [T, H, cp, D]} (or {@code [rows, cp, D]}) partial outputs, fp16 or bf16
     * @param partialLse this rank's {@code [T, H, cp]} log-sum-exps, fp32
     * @param workspace  this rank's workspace of its group
     * @param cpRank     this rank, {@code 0 <= cpRank < cpSize}
     * @param cpSize     ranks in the group
     * @param mode       whether the LSEs are base 2 or base e
     * @return the merged rows this rank owns, in host memory
     * @throws IllegalArgumentException where an argument is refused (nothing is sent)
     * @throws io.github.dcp4j.engine.PeerTimeoutException where a peer's lines do not arrive within the timeout
     */
    public static TensorView reduce(Tensor partialO, Tensor partialLse, RankWorkspace workspace, int cpRank,
                                    int cpSize, LseMode mode) {
        Objects.requireNonNull(partialO, "partial_o");
        TensorView out = TensorView.allocate(Arena.ofAuto(), partialO.dtype(), ReduceCall.outputShape(partialO));
        reduce(partialO, partialLse, workspace, cpRank, cpSize, mode, out);
        return out;
    }

    /**
     * Rank {@code cpRank}'s part of one call, into {@code out} ({@code [rows, D]}, contiguous, partial_o's dtype).
     *
     * @param partialO   this rank's {@code [T, H, cp, D]} (or {@code [rows, cp, D]}) partial outputs, fp16 or bf16
     * @param partialLse this rank's {@code [T, H, cp]} log-sum-exps, fp32
     * @param workspace  this rank's workspace of its group
     * @param cpRank     this rank, {@code 0 <= cpRank < cpSize}
     * @param cpSize     ranks in the group
     * @param mode       whether the LSEs are base 2 or base e
     * @param out        where the merged rows go; left untouched where the call is refused
     * @throws IllegalArgumentException where an argument is refused (nothing is sent)
     * @throws io.github.dcp4j.engine.PeerTimeoutException where a peer's lines do not arrive within the timeout
     */
    public static void reduce(Tensor partialO, Tensor partialLse, RankWorkspace workspace, int cpRank, int cpSize,
                              LseMode mode, Tensor out) {
        Objects.requireNonNull(workspace, "workspace");
        workspace.reduce(partialO, partialLse, out, cpRank, cpSize, mode);
    }

    /**
     * Every check of one rank's call, including those against its workspace; nothing is read or written.
     *
     * @param partialO   this rank's partial outputs
     * @param partialLse this rank's log-sum-exps
     * @param out        where the merged rows would go
     * @param workspace  this rank's workspace of its group
     * @param cpRank     this rank
     * @param cpSize     ranks in the group
     * @param mode       whether the LSEs are base 2 or base e
     * @return the validated call, with its workspace layout
     * @throws IllegalArgumentException naming the first argument that is refused, its value and what is allowed
     */
    public static ReduceCall validate(Tensor partialO, Tensor partialLse, Tensor out, RankWorkspace workspace,
                                      int cpRank, int cpSize, LseMode mode) {
        Objects.requireNonNull(workspace, "workspace");
        return ReduceCall.validate(partialO, partialLse, out, cpRank, cpSize, mode, workspace.shape());
    }
}
