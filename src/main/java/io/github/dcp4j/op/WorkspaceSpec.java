package io.github.dcp4j.op;

import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.layout.RowLayout;
import io.github.dcp4j.layout.WorkspaceLayout;

/**
 * What a workspace is sized for: up to {@code maxTokens x localHeads} rows of {@code headDim} elements of
 * {@code dtype}, from each of {@code cpSize} ranks. Every argument is checked on construction.
 *
 * @param maxTokens  the most tokens one call may carry
 * @param localHeads heads each rank owns after the call
 * @param cpSize     ranks in the group, 1..{@link Ll128#MAX_RANKS}
 * @param headDim    elements of one head
 * @param dtype      fp16 or bf16
 */
public record WorkspaceSpec(int maxTokens, int localHeads, int cpSize, int headDim, DType dtype) {

    /**
     * A checked spec.
     *
     * @throws IllegalArgumentException naming the argument out of its range, its value and the range
     */
    public WorkspaceSpec {
        DType.requireHalf("dtype", dtype);
        if (maxTokens <= 0) {
            throw new IllegalArgumentException("max_tokens must be > 0; got " + maxTokens);
        }
        if (localHeads <= 0) {
            throw new IllegalArgumentException("local_heads must be > 0; got " + localHeads);
        }
        if (cpSize < 1 || cpSize > Ll128.MAX_RANKS) {
            throw new IllegalArgumentException("cp_size must be in [1, " + Ll128.MAX_RANKS + "]; got " + cpSize);
        }
        if ((long) maxTokens * localHeads > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("max_tokens x local_heads must be at most " + Integer.MAX_VALUE
                    + "; got " + maxTokens + " x " + localHeads);
        }
        new WorkspaceLayout(cpSize, maxTokens * localHeads, RowLayout.of(headDim, dtype.bytes())).bytes();
    }

    /**
     * Rows the workspace holds per source and slot.
     *
     * @return maxTokens x localHeads
     */
    public int maxRows() {
        return maxTokens * localHeads;
    }

    /**
     * How one row lies in LL128 lines.
     *
     * @return the row layout of headDim elements of dtype
     */
    public RowLayout rowLayout() {
        return RowLayout.of(headDim, dtype.bytes());
    }

    /**
     * Where everything lies in the workspace.
     *
     * @return the workspace layout for this spec
     */
    public WorkspaceLayout layout() {
        return new WorkspaceLayout(cpSize, maxRows(), rowLayout());
    }

    /**
     * The workspace's size.
     *
     * @return 128 + 2 x cp x rows x RowBytes bytes (see {@link Ll128})
     */
    public long bytes() {
        return layout().bytes();
    }
}
