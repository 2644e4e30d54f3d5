package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.layout.LlLayout;
import io.github.dcp4j.layout.RowLayout;
import io.github.dcp4j.layout.WorkspaceLayout;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.Variant;
import io.github.dcp4j.op.WorkspaceSpec;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The rows a variant's region holds for a call's row, which every launch's offsets are computed from (no GPU). */
class RegionRowsTest {

    /** The call's layout, as ReduceCall.validate makes it: the contract's bytes at the call's head_dim. */
    private static WorkspaceLayout callLayout(WorkspaceSpec spec, int headDim) {
        return WorkspaceLayout.forWorkspace(spec.bytes(), spec.cpSize(), RowLayout.of(headDim, DType.BF16.bytes()));
    }

    @Test
    void llAtTheSpecsHeadDimHoldsEveryRowTheContractDoes() {
        WorkspaceSpec spec = new WorkspaceSpec(4, 4, 4, 64, DType.BF16);
        WorkspaceLayout layout = callLayout(spec, 64);
        int rows = KernelCall.regionRows(Variant.LL, layout, Variant.LL.workspaceBytes(spec));
        assertEquals(layout.maxRows(), rows);
        long[] sizes = KernelCall.regionSizes(Variant.LL, layout, rows);
        LlLayout ll = new LlLayout(spec.cpSize(), rows, layout.row());
        assertTrue(ll.bytes() <= Variant.LL.workspaceBytes(spec), "the ll offsets stay inside the region");
        assertEquals(ll.lseRegionOffset(), sizes[1]);
    }

    /**
     * The edge case: a call whose head_dim takes as many contract bytes per row as the spec's (bf16 rows of 120 and
     * of 64 elements both take two LL128 lines and their LSE line) has larger ll rows; the region holds fewer of
     * them, and the offsets computed for that many rows stay inside it.
     */
    @Test
    void llAtALargerHeadDimHoldsOnlyTheRowsThatFitItsRegion() {
        WorkspaceSpec spec = new WorkspaceSpec(4, 4, 4, 64, DType.BF16);
        long region = Variant.LL.workspaceBytes(spec);
        WorkspaceLayout layout = callLayout(spec, 120);
        assertEquals(callLayout(spec, 64).maxRows(), layout.maxRows(), "the contract holds as many rows of both");
        int rows = KernelCall.regionRows(Variant.LL, layout, region);
        assertTrue(rows < layout.maxRows(), rows + " rows of head_dim 120 in the ll region");
        assertTrue(new LlLayout(spec.cpSize(), rows, layout.row()).bytes() <= region);
        assertTrue(new LlLayout(spec.cpSize(), rows + 1, layout.row()).bytes() > region, "no row more would fit");
    }

    @Test
    void theOtherVariantsTakeTheContractLayoutsRows() {
        WorkspaceSpec spec = new WorkspaceSpec(4, 4, 4, 64, DType.BF16);
        WorkspaceLayout layout = callLayout(spec, 120);
        for (Variant v : new Variant[] {Variant.LL128, Variant.SIMPLE, Variant.UNFUSED}) {
            assertEquals(layout.maxRows(), KernelCall.regionRows(v, layout, spec.bytes()), v.toString());
        }
    }
}
