package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.layout.Ll128;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Each rank's grid plan: blocks, receive tile rows and the send window, within the block budget. No GPU. */
class GridPlanTest {
    private static final GridPlan.Tuning DEFAULT = GridPlan.Tuning.DEFAULT;

    @Test
    void fewerRowsThanTheBudgetGetABlockPerRowInTilesOfOne() {
        // layer shape, batch 1: 16 rows of a rank, a share of 66 blocks
        assertEquals(new GridPlan(16, 1, GridPlan.DEFAULT_SEND_WINDOW, true), GridPlan.of(16, 66, DEFAULT));
    }

    @Test
    void moreRowsThanTheBudgetFillItInTilesOfUpToFourRows() {
        assertEquals(new GridPlan(64, 2, GridPlan.DEFAULT_SEND_WINDOW, true), GridPlan.of(128, 66, DEFAULT));
        assertEquals(new GridPlan(64, 4, GridPlan.DEFAULT_SEND_WINDOW, true), GridPlan.of(256, 66, DEFAULT));
        GridPlan large = GridPlan.of(4096, 66, DEFAULT);
        assertEquals(66, large.blocksPerRank());
        assertEquals(Ll128.MAX_TILE_ROWS, large.tileRows());
    }

    @Test
    void everyRowIsOwnedByABlockWithinTheBudget() {
        for (int rows = 1; rows <= 600; rows++) {
            for (int budget : new int[] {1, 7, 33, 66, 528}) {
                GridPlan p = GridPlan.of(rows, budget, DEFAULT);
                assertTrue(p.blocksPerRank() >= 1 && p.blocksPerRank() <= budget, rows + " rows, budget " + budget);
                assertTrue(p.tileRows() >= 1 && p.tileRows() <= Ll128.MAX_TILE_ROWS);
                assertTrue(p.blocksPerRank() <= rows, "no block without a row");
            }
        }
    }

    @Test
    void inputsLargerThanL2AreStreamedUnlessTheTuningSaysOtherwise() {
        long l2 = 50L << 20;
        assertTrue(GridPlan.streamInputs(l2 + 1, l2, DEFAULT));
        assertTrue(!GridPlan.streamInputs(l2, l2, DEFAULT));
        assertTrue(GridPlan.streamInputs(1, l2, GridPlan.Tuning.parse("stream=1")));
        assertTrue(!GridPlan.streamInputs(l2 + 1, l2, GridPlan.Tuning.parse("stream=0")));
    }

    @Test
    void aZeroBudgetStillRunsOneBlock() {
        assertEquals(1, GridPlan.of(4096, 0, DEFAULT).blocksPerRank());
    }

    @Test
    void tuningOverridesParseAndBadValuesAreRefusedNamingThem() {
        assertEquals(new GridPlan.Tuning(0, 2, 40, true, 1, false),
                GridPlan.Tuning.parse("window=0, tileRows=2,maxBlocks=40,reload=1,stream=1,row=0"));
        assertEquals(new GridPlan(40, 2, 0, false),
                GridPlan.of(4096, 66, GridPlan.Tuning.parse("window=0,tileRows=2,maxBlocks=40,reload=0")));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> GridPlan.Tuning.parse("window=-1"));
        assertTrue(e.getMessage().contains("window") && e.getMessage().contains(GridPlan.Tuning.PROPERTY),
                e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("tiles=2"));
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("maxBlocks=x"));
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("reload=2"));
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("tileRows=5"));
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("row=yes"));
    }

    @Test
    void theRowKernelRunsWhereEveryRowHasABlockAndARowOfEverySourceFitsItsStage() {
        // layer shape, batch 1: 16 rows, cp 8, head_dim 512 bf16 (9 lines): 8 x 9 x 128 bytes staged
        assertTrue(GridPlan.of(16, 66, DEFAULT).rowKernel(16, 8, 9, DEFAULT));
        // batch 16: 256 rows in tiles over 64 blocks
        assertTrue(!GridPlan.of(256, 66, DEFAULT).rowKernel(256, 8, 9, DEFAULT));
        // the largest stage that fits, and one line more
        int lines = Ll128.ROW_STAGE_BYTES / Ll128.LINE_BYTES / 64;
        assertTrue(GridPlan.of(1, 66, DEFAULT).rowKernel(1, 64, lines, DEFAULT));
        assertTrue(!GridPlan.of(1, 66, DEFAULT).rowKernel(1, 64, lines + 1, DEFAULT));
        // turned off for comparisons
        assertTrue(!GridPlan.of(16, 66, DEFAULT).rowKernel(16, 8, 9, GridPlan.Tuning.parse("row=0")));
    }
}
