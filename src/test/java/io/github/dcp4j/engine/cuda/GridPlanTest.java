package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.layout.Ll128;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Each rank's grid plan: the kernel, blocks, receive tile rows and the send window, within the budget. No GPU. */
class GridPlanTest {
    private static final GridPlan.Tuning DEFAULT = GridPlan.Tuning.DEFAULT;
    private static final GridPlan.Tuning TILED = GridPlan.Tuning.parse("row=0");
    /** The layer shape's row: cp 8, head_dim 512 bf16 (9 lines a source), 8 x 9 x 128 bytes staged. */
    private static final int CP = 8;
    private static final int LINES = 9;
    /** More lines than the row kernel's stage holds for cp 8. */
    private static final int TOO_MANY_LINES = Ll128.ROW_STAGE_BYTES / Ll128.LINE_BYTES / CP + 1;

    @Test
    void theRowKernelTakesABlockPerRowWhileTheyFitTheBudget() {
        // layer shape, batch 1: 16 rows of a rank, a share of 66 blocks
        assertEquals(new GridPlan(true, 16, 1, GridPlan.DEFAULT_SEND_WINDOW, true),
                GridPlan.of(16, CP, LINES, 66, DEFAULT));
    }

    @Test
    void theRowKernelSpreadsMoreRowsThanTheBudgetOverEveryBlockInStepsOfSeveralRows() {
        // batch 16 and 256: 256 and 4096 rows over 66 blocks, each taking its rows in turn, DEFAULT_STEP_ROWS at once
        int step = GridPlan.DEFAULT_STEP_ROWS;
        assertEquals(new GridPlan(true, Math.min(66, Math.ceilDiv(256, step)), step, GridPlan.DEFAULT_SEND_WINDOW,
                true), GridPlan.of(256, CP, LINES, 66, DEFAULT));
        assertEquals(new GridPlan(true, 66, step, GridPlan.DEFAULT_SEND_WINDOW, true),
                GridPlan.of(4096, CP, LINES, 66, DEFAULT));
        // batch 8: 128 rows, two for each of 64 blocks
        assertEquals(new GridPlan(true, 64, 2, GridPlan.DEFAULT_SEND_WINDOW, true),
                GridPlan.of(128, CP, LINES, 66, GridPlan.Tuning.parse("step=2")));
    }

    @Test
    void stepNSetsTheRowsABlockTakesAtOnceWithinItsShareAndWhatFits() {
        assertEquals(3, GridPlan.of(4096, CP, LINES, 66, GridPlan.Tuning.parse("step=3")).tileRows());
        assertEquals(1, GridPlan.of(4096, CP, LINES, 66, GridPlan.Tuning.parse("step=1")).tileRows());
        // a block per row: one at a time, whatever the tuning asks
        assertEquals(1, GridPlan.of(16, CP, LINES, 66, GridPlan.Tuning.parse("step=4")).tileRows());
        // two rows per block at most: a step of two
        assertEquals(2, GridPlan.of(100, CP, LINES, 66, GridPlan.Tuning.parse("step=4")).tileRows());
        // cp 8 x 9 lines x 128 bytes = 9 KB a row: three rows fill the 32 KB stage, four do not
        assertEquals(3, GridPlan.of(4096, CP, LINES, 66, GridPlan.Tuning.parse("step=4")).tileRows());
        // a row of 9 groups (36 lines) at cp 2: three rows have 27 LSE lines a source, four 36, more than a warp's
        assertEquals(3, GridPlan.of(4096, 2, 36, 66, GridPlan.Tuning.parse("step=4")).tileRows());
        // a row whose sources fill the stage alone: one at a time
        assertEquals(1, GridPlan.of(4096, 64, Ll128.ROW_STAGE_BYTES / Ll128.LINE_BYTES / 64, 66, DEFAULT).tileRows());
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("step=5"));
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("step=-1"));
    }

    @Test
    void row4BoundsTheRowsEachBlockOfTheRowKernelTakes() {
        GridPlan.Tuning four = GridPlan.Tuning.parse("row=4");
        assertEquals(new GridPlan(true, 66, GridPlan.DEFAULT_STEP_ROWS, GridPlan.DEFAULT_SEND_WINDOW, true),
                GridPlan.of(4 * 66, CP, LINES, 66, four));
        assertTrue(!GridPlan.of(4 * 66 + 1, CP, LINES, 66, four).rowKernel());
        assertTrue(GridPlan.of(4096, CP, LINES, 66, GridPlan.Tuning.parse("row=63")).rowKernel());
        assertTrue(!GridPlan.of(4096, CP, LINES, 66, GridPlan.Tuning.parse("row=62")).rowKernel());
    }

    @Test
    void theTiledKernelTakesRowsWhoseSourcesDoNotFitTheStage() {
        int lines = Ll128.ROW_STAGE_BYTES / Ll128.LINE_BYTES / 64;  // the largest stage that fits at cp 64
        assertTrue(GridPlan.of(1, 64, lines, 66, DEFAULT).rowKernel());
        assertTrue(!GridPlan.of(1, 64, lines + 1, 66, DEFAULT).rowKernel());
        assertTrue(!GridPlan.of(16, CP, TOO_MANY_LINES, 66, DEFAULT).rowKernel());
    }

    @Test
    void theTiledKernelFillsTheBudgetInTilesOfUpToFourRows() {
        assertEquals(new GridPlan(false, 16, 1, GridPlan.DEFAULT_SEND_WINDOW, true),
                GridPlan.of(16, CP, LINES, 66, TILED));
        assertEquals(new GridPlan(false, 64, 2, GridPlan.DEFAULT_SEND_WINDOW, true),
                GridPlan.of(128, CP, LINES, 66, TILED));
        assertEquals(new GridPlan(false, 64, 4, GridPlan.DEFAULT_SEND_WINDOW, true),
                GridPlan.of(256, CP, TOO_MANY_LINES, 66, DEFAULT));
        GridPlan large = GridPlan.of(4096, CP, LINES, 66, TILED);
        assertEquals(66, large.blocksPerRank());
        assertEquals(Ll128.MAX_TILE_ROWS, large.tileRows());
    }

    @Test
    void everyRowIsOwnedByABlockWithinTheBudget() {
        for (GridPlan.Tuning tuning : new GridPlan.Tuning[] {DEFAULT, TILED}) {
            for (int rows = 1; rows <= 600; rows++) {
                for (int budget : new int[] {1, 7, 33, 66, 528}) {
                    GridPlan p = GridPlan.of(rows, CP, LINES, budget, tuning);
                    assertTrue(p.blocksPerRank() >= 1 && p.blocksPerRank() <= budget, rows + " rows, budget " + budget);
                    assertTrue(p.tileRows() >= 1 && p.tileRows() <= Ll128.MAX_TILE_ROWS);
                    assertTrue(p.blocksPerRank() <= rows, "no block without a row");
                    assertTrue(Math.ceilDiv(rows, p.tileRows()) >= p.blocksPerRank() || !p.rowKernel(),
                            "no row kernel block without a step");
                }
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
    void noRowsStillPlanOneBlockAndRow0NeverPlansTheRowKernel() {
        assertEquals(new GridPlan(true, 1, 1, GridPlan.DEFAULT_SEND_WINDOW, true),
                GridPlan.of(0, CP, LINES, 66, DEFAULT));
        assertEquals(new GridPlan(false, 1, 1, GridPlan.DEFAULT_SEND_WINDOW, true),
                GridPlan.of(0, CP, LINES, 66, TILED));
    }

    @Test
    void aZeroBudgetStillRunsOneBlock() {
        assertEquals(1, GridPlan.of(4096, CP, LINES, 0, DEFAULT).blocksPerRank());
        assertEquals(1, GridPlan.of(4096, CP, LINES, 0, TILED).blocksPerRank());
    }

    /**
     * One slot only where every rank of the group is in the launch (nothing of a call outlives its launch); two where
     * the ranks are spread over launches, which may be a call apart; the tuning forces two, never one.
     */
    @Test
    void oneSlotOnlyWhereTheWholeGroupIsOneLaunch() {
        assertEquals(0, GridPlan.slotMask(CP, CP, DEFAULT));
        assertEquals(1, GridPlan.slotMask(1, CP, DEFAULT));
        assertEquals(1, GridPlan.slotMask(CP - 1, CP, DEFAULT));
        assertEquals(1, GridPlan.slotMask(CP, CP, GridPlan.Tuning.parse("slots=2")));
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("slots=1"));
    }

    @Test
    void tuningOverridesParseAndBadValuesAreRefusedNamingThem() {
        assertEquals(new GridPlan.Tuning(0, 2, 40, true, 1, 0, 3, true),
                GridPlan.Tuning.parse("window=0, tileRows=2,maxBlocks=40,reload=1,stream=1,row=0,step=3,slots=2"));
        assertEquals(new GridPlan(false, 40, 2, 0, false), GridPlan.of(4096, CP, LINES, 66,
                GridPlan.Tuning.parse("window=0,tileRows=2,maxBlocks=40,reload=0,row=0")));
        assertEquals(new GridPlan(true, 40, GridPlan.DEFAULT_STEP_ROWS, GridPlan.DEFAULT_SEND_WINDOW, true),
                GridPlan.of(4096, CP, LINES, 66, GridPlan.Tuning.parse("maxBlocks=40")));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> GridPlan.Tuning.parse("window=-1"));
        assertTrue(e.getMessage().contains("window") && e.getMessage().contains(GridPlan.Tuning.PROPERTY),
                e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("tiles=2"));
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("slots=3"));
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("maxBlocks=x"));
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("reload=2"));
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("tileRows=5"));
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("row=yes"));
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("row=-1"));
    }
}
