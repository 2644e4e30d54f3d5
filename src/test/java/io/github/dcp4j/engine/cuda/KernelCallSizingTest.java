package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.layout.RowLayout;
import io.github.dcp4j.op.DType;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** Each rank's grid: one block per (group of rows, destination) for the send, capped by the block budget. No GPU. */
class KernelCallSizingTest {
    private static final int WARPS_PER_BLOCK = Ll128.BLOCK_THREADS / 32;
    private static final int BIG_BUDGET = 1 << 20;

    @Test
    void fewerRowsThanABlocksWarpsStillGetOneBlockPerDestination() {
        // reference shape 1x2x64: 2 rows; the send pads them to one group per destination
        int lineGroups = RowLayout.of(64, DType.BF16).lineGroups();
        assertEquals(8, KernelCall.blocksPerRank(2, 8, lineGroups, BIG_BUDGET));
    }

    @Test
    void theSendSizesTheLayerShape() {
        int rows = 16;  // batch 1, 16 heads
        int lineGroups = RowLayout.of(512, DType.BF16).lineGroups();
        int send = Math.ceilDiv(rows, WARPS_PER_BLOCK) * 8;
        assertEquals(send, KernelCall.blocksPerRank(rows, 8, lineGroups, BIG_BUDGET));
    }

    @Test
    void theReceiveSizesASmallGroupWithLongRows() {
        // cp 2: 2 destinations, but 3 line groups per row of 512 elements
        int rows = 64;
        int lineGroups = RowLayout.of(512, DType.BF16).lineGroups();
        int receive = Math.ceilDiv(rows * lineGroups, WARPS_PER_BLOCK);
        assertEquals(receive, KernelCall.blocksPerRank(rows, 2, lineGroups, BIG_BUDGET));
    }

    @Test
    void theBudgetCapsALargeBatchAndAtLeastOneBlockRuns() {
        assertEquals(33, KernelCall.blocksPerRank(4096, 8, 3, 33));
        assertEquals(1, KernelCall.blocksPerRank(4096, 8, 3, 0));
    }
}
