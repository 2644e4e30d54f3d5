package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.layout.FencedLayout;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.layout.LlLayout;
import io.github.dcp4j.layout.RowLayout;
import io.github.dcp4j.layout.WorkspaceLayout;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.Variant;
import io.github.dcp4j.op.WorkspaceShape;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.reference.ConformanceCases;
import io.github.dcp4j.reference.RandomInputs;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
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
        int rows = Variant.LL.rowsHeld(layout, Variant.LL.workspaceBytes(spec));
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
        int rows = Variant.LL.rowsHeld(layout, region);
        assertTrue(rows < layout.maxRows(), rows + " rows of head_dim 120 in the ll region");
        assertTrue(new LlLayout(spec.cpSize(), rows, layout.row()).bytes() <= region);
        assertTrue(new LlLayout(spec.cpSize(), rows + 1, layout.row()).bytes() > region, "no row more would fit");
    }

    @Test
    void theOtherVariantsTakeTheContractLayoutsRowsInARegionOfTheContractsSize() {
        WorkspaceSpec spec = new WorkspaceSpec(4, 4, 4, 64, DType.BF16);
        WorkspaceLayout layout = callLayout(spec, 120);
        for (Variant v : new Variant[] {Variant.LL128, Variant.SIMPLE, Variant.UNFUSED}) {
            assertEquals(layout.maxRows(), v.rowsHeld(layout, spec.bytes()), v.toString());
        }
    }

    /**
     * The edge case: a region smaller than the contract's workspace (a hand-made VariantWorkspace) holds fewer rows in
     * every layout, and the offsets of that many rows stay inside it, so no launch writes past its region.
     */
    @Test
    void aRegionSmallerThanTheContractHoldsOnlyTheRowsThatFit() {
        SplittableRandom random = new SplittableRandom();
        WorkspaceSpec spec = new WorkspaceSpec(8 + random.nextInt(8), 4, 4, 64, DType.BF16);
        WorkspaceLayout layout = callLayout(spec, 64);
        long region = spec.bytes() / 2;
        int ll128 = Variant.LL128.rowsHeld(layout, region);
        assertTrue(ll128 < layout.maxRows() && ll128 > 0, ll128 + " of " + layout.maxRows());
        assertTrue(new WorkspaceLayout(4, ll128, layout.row()).bytes() <= region);
        assertTrue(new WorkspaceLayout(4, ll128 + 1, layout.row()).bytes() > region);
        long[] sizes = KernelCall.regionSizes(Variant.LL128, layout, ll128);
        assertEquals(new WorkspaceLayout(4, ll128, layout.row()).lseRegionOffset(), sizes[1]);
        int fenced = Variant.SIMPLE.rowsHeld(layout, region);
        assertEquals(fenced, Variant.UNFUSED.rowsHeld(layout, region));
        assertTrue(new FencedLayout(4, fenced, layout.row()).bytesUsed() <= region);
        assertTrue(new FencedLayout(4, fenced + 1, layout.row()).bytesUsed() > region);
        assertEquals(0, Variant.LL.rowsHeld(layout, Ll128.PAYLOAD_OFFSET), "a region of metadata alone holds no row");
    }

    /** Refused before any rank launches: the call's rows over what the region holds, named with both numbers. */
    @Test
    void aCallOfMoreRowsThanTheRegionHoldsIsRefusedNamingBoth() {
        WorkspaceSpec spec = new WorkspaceSpec(4, 4, 4, 64, DType.BF16);
        try (Arena arena = Arena.ofConfined()) {
            ConformanceCases.GroupInputs g = RandomInputs.group(arena, new SplittableRandom(), 4, 4, 4, 120,
                    DType.BF16, 3.0);
            TensorView out = TensorView.allocate(arena, DType.BF16, ReduceCall.outputShape(g.partialO().get(1)));
            ReduceCall call = ReduceCall.validate(g.partialO().get(1), g.partialLse().get(1), out, 1, 4,
                    LseMode.BASE2, new WorkspaceShape(4, 1, spec.bytes()));
            long region = Variant.LL.workspaceBytes(spec);
            int held = Variant.LL.rowsHeld(call.layout(), region);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> KernelCall.requireFitsRegion(Variant.LL, call, region));
            assertEquals("a call of 16 rows at head_dim 120 does not fit the ll region of " + region + " bytes, which"
                    + " holds " + held + " rows at that head_dim (it was sized for the workspace spec's head_dim);"
                    + " open the group with a spec of this head_dim", e.getMessage());
            KernelCall.requireFitsRegion(Variant.LL128, call, spec.bytes());
            KernelCall.requireFitsRegion(Variant.SIMPLE, call, spec.bytes());
        }
    }
}
