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
        assertEquals(new GridPlan(true, 16, 1, GridPlan.DEFAULT_SEND_WINDOW, true, 1),
                GridPlan.of(16, CP, LINES, 66, DEFAULT, 1));
    }

    @Test
    void theRowKernelSpreadsMoreRowsThanTheBudgetOverEveryBlockInStepsOfSeveralRows() {
        // batch 16 and 256: 256 and 4096 rows over 66 blocks, each taking its rows in turn, DEFAULT_STEP_ROWS at once
        int step = GridPlan.DEFAULT_STEP_ROWS;
        assertEquals(new GridPlan(true, Math.min(66, Math.ceilDiv(256, step)), step, GridPlan.DEFAULT_SEND_WINDOW,
                true, 1), GridPlan.of(256, CP, LINES, 66, DEFAULT, 1));
        assertEquals(new GridPlan(true, 66, step, GridPlan.DEFAULT_SEND_WINDOW, true, 1),
                GridPlan.of(4096, CP, LINES, 66, DEFAULT, 1));
        // batch 8: 128 rows, two for each of 64 blocks
        assertEquals(new GridPlan(true, 64, 2, GridPlan.DEFAULT_SEND_WINDOW, true, 1),
                GridPlan.of(128, CP, LINES, 66, GridPlan.Tuning.parse("step=2"), 1));
    }

    @Test
    void stepNSetsTheRowsABlockTakesAtOnceWithinItsShareAndWhatFits() {
        assertEquals(3, GridPlan.of(4096, CP, LINES, 66, GridPlan.Tuning.parse("step=3"), 1).tileRows());
        assertEquals(1, GridPlan.of(4096, CP, LINES, 66, GridPlan.Tuning.parse("step=1"), 1).tileRows());
        // a block per row: one at a time, whatever the tuning asks
        assertEquals(1, GridPlan.of(16, CP, LINES, 66, GridPlan.Tuning.parse("step=4"), 1).tileRows());
        // two rows per block at most: a step of two
        assertEquals(2, GridPlan.of(100, CP, LINES, 66, GridPlan.Tuning.parse("step=4"), 1).tileRows());
        // cp 8 x 9 lines x 128 bytes = 9 KB a row: three rows fill the 32 KB stage, four do not
        assertEquals(3, GridPlan.of(4096, CP, LINES, 66, GridPlan.Tuning.parse("step=4"), 1).tileRows());
        // a row of 9 groups (36 lines) at cp 2: three rows have 27 LSE lines a source, four 36, more than a warp's
        assertEquals(3, GridPlan.of(4096, 2, 36, 66, GridPlan.Tuning.parse("step=4"), 1).tileRows());
        // a row whose sources fill the stage alone: one at a time
        assertEquals(1, GridPlan.of(4096, 64, Ll128.ROW_STAGE_BYTES / Ll128.LINE_BYTES / 64, 66, DEFAULT, 1).tileRows());
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("step=5"));
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("step=-1"));
    }

    @Test
    void row4BoundsTheRowsEachBlockOfTheRowKernelTakes() {
        GridPlan.Tuning four = GridPlan.Tuning.parse("row=4");
        assertEquals(new GridPlan(true, 66, GridPlan.DEFAULT_STEP_ROWS, GridPlan.DEFAULT_SEND_WINDOW, true, 1),
                GridPlan.of(4 * 66, CP, LINES, 66, four, 1));
        assertTrue(!GridPlan.of(4 * 66 + 1, CP, LINES, 66, four, 1).rowKernel());
        assertTrue(GridPlan.of(4096, CP, LINES, 66, GridPlan.Tuning.parse("row=63"), 1).rowKernel());
        assertTrue(!GridPlan.of(4096, CP, LINES, 66, GridPlan.Tuning.parse("row=62"), 1).rowKernel());
    }

    @Test
    void theTiledKernelTakesRowsWhoseSourcesDoNotFitTheStage() {
        int lines = Ll128.ROW_STAGE_BYTES / Ll128.LINE_BYTES / 64;  // the largest stage that fits at cp 64
        assertTrue(GridPlan.of(1, 64, lines, 66, DEFAULT, 1).rowKernel());
        assertTrue(!GridPlan.of(1, 64, lines + 1, 66, DEFAULT, 1).rowKernel());
        assertTrue(!GridPlan.of(16, CP, TOO_MANY_LINES, 66, DEFAULT, 1).rowKernel());
    }

    @Test
    void theTiledKernelFillsTheBudgetInTilesOfUpToFourRows() {
        assertEquals(new GridPlan(false, 16, 1, GridPlan.DEFAULT_SEND_WINDOW, true, 1),
                GridPlan.of(16, CP, LINES, 66, TILED, 1));
        assertEquals(new GridPlan(false, 64, 2, GridPlan.DEFAULT_SEND_WINDOW, true, 1),
                GridPlan.of(128, CP, LINES, 66, TILED, 1));
        assertEquals(new GridPlan(false, 64, 4, GridPlan.DEFAULT_SEND_WINDOW, true, 1),
                GridPlan.of(256, CP, TOO_MANY_LINES, 66, DEFAULT, 1));
        GridPlan large = GridPlan.of(4096, CP, LINES, 66, TILED, 1);
        assertEquals(66, large.blocksPerRank());
        assertEquals(Ll128.MAX_TILE_ROWS, large.tileRows());
    }

    @Test
    void everyRowIsOwnedByABlockWithinTheBudget() {
        for (GridPlan.Tuning tuning : new GridPlan.Tuning[] {DEFAULT, TILED}) {
            for (int rows = 1; rows <= 600; rows++) {
                for (int budget : new int[] {1, 7, 33, 66, 528}) {
                    for (int teams : new int[] {1, 3, 4}) {
                        GridPlan p = GridPlan.of(rows, CP, LINES, budget, tuning, teams);
                        String what = rows + " rows, budget " + budget + ", teams " + teams;
                        assertTrue(p.blocksPerRank() >= 1 && p.blocksPerRank() <= budget, what);
                        assertTrue(p.tileRows() >= 1 && p.tileRows() <= Ll128.MAX_TILE_ROWS, what);
                        assertTrue(p.teams() >= 1 && p.teams() <= teams && p.blocksPerRank() % p.teams() == 0, what);
                        assertTrue(p.rowKernel() || p.teams() == 1, what + ": the tiled kernel's blocks are one team");
                        // blocks without a row (or a row kernel step) only where the blocks are rounded up to teams
                        int owners = p.rowKernel() ? Math.ceilDiv(rows, p.tileRows()) : rows;
                        assertTrue(p.blocksPerRank() - p.teams() < owners, what + ": a block of teams without a row");
                    }
                }
            }
        }
    }

    @Test
    void theRowKernelInBlocksOfTeamsTakesAMultipleOfTheTeamsWithinTheBudget() {
        // batch 256 in one process of eight: a budget of 66 blocks, 64 of them in blocks of 4 teams
        GridPlan large = GridPlan.of(4096, CP, LINES, 66, DEFAULT, 4);
        assertEquals(new GridPlan(true, 64, GridPlan.DEFAULT_STEP_ROWS, GridPlan.DEFAULT_SEND_WINDOW, true, 4), large);
        // batch 1: a block per row, 16 rows in 4 blocks of 4 teams
        assertEquals(new GridPlan(true, 16, 1, GridPlan.DEFAULT_SEND_WINDOW, true, 4),
                GridPlan.of(16, CP, LINES, 66, DEFAULT, 4));
        // 17 rows: rounded up to 20 teams, the last 3 without a row
        assertEquals(20, GridPlan.of(17, CP, LINES, 66, DEFAULT, 4).blocksPerRank());
        // a budget below the teams: one block of as many teams as the budget
        GridPlan small = GridPlan.of(4096, CP, LINES, 3, DEFAULT, 4);
        assertEquals(3, small.teams());
        assertEquals(3, small.blocksPerRank());
        // the tiled kernel: one team a block
        assertEquals(1, GridPlan.of(16, CP, TOO_MANY_LINES, 66, DEFAULT, 4).teams());
    }

    /** Several teams a block where other launches of the group share the GPU at once (processes), else one. */
    @Test
    void teamsFillAnSmWhereLaunchesShareTheGpuUnlessTheTuningSaysOtherwise() {
        assertEquals(4, GridPlan.teams(DEFAULT, 66, 528, 4));
        assertEquals(1, GridPlan.teams(DEFAULT, 528, 528, 4));
        assertEquals(2, GridPlan.teams(GridPlan.Tuning.parse("teams=2"), 528, 528, 4));
        assertEquals(1, GridPlan.teams(GridPlan.Tuning.parse("teams=1"), 66, 528, 4));
        assertEquals(3, GridPlan.teams(GridPlan.Tuning.parse("teams=8"), 66, 528, 3), "at most what the GPU holds");
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("teams=9"));
        assertThrows(IllegalArgumentException.class, () -> GridPlan.Tuning.parse("teams=-1"));
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
        assertEquals(new GridPlan(true, 1, 1, GridPlan.DEFAULT_SEND_WINDOW, true, 1),
                GridPlan.of(0, CP, LINES, 66, DEFAULT, 1));
        assertEquals(new GridPlan(false, 1, 1, GridPlan.DEFAULT_SEND_WINDOW, true, 1),
                GridPlan.of(0, CP, LINES, 66, TILED, 1));
    }

    @Test
    void aZeroBudgetStillRunsOneBlock() {
        assertEquals(1, GridPlan.of(4096, CP, LINES, 0, DEFAULT, 1).blocksPerRank());
        assertEquals(1, GridPlan.of(4096, CP, LINES, 0, TILED, 1).blocksPerRank());
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
        assertEquals(new GridPlan.Tuning(0, 2, 40, true, 1, 0, 3, true, 2), GridPlan.Tuning.parse(
                "window=0, tileRows=2,maxBlocks=40,reload=1,stream=1,row=0,step=3,slots=2,teams=2"));
        assertEquals(new GridPlan(false, 40, 2, 0, false, 1), GridPlan.of(4096, CP, LINES, 66,
                GridPlan.Tuning.parse("window=0,tileRows=2,maxBlocks=40,reload=0,row=0"), 1));
        assertEquals(new GridPlan(true, 40, GridPlan.DEFAULT_STEP_ROWS, GridPlan.DEFAULT_SEND_WINDOW, true, 1),
                GridPlan.of(4096, CP, LINES, 66, GridPlan.Tuning.parse("maxBlocks=40"), 1));
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
