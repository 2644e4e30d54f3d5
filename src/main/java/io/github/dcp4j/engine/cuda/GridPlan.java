package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.layout.Ll128;

/**
 * How one rank's part of a launch is laid out: which kernel (docs/CUDA.md), blocks (block b owns rows b, b + B,
 * b + 2B, ...), the rows of one receive tile (the tiled kernel's receivers finish a tile together) and its send window
 * (how many tiles a block's senders may run ahead of its receivers; 0: no bound). Every rank of a group derives the
 * same plan from the same call and block budget.
 *
 * @param rowKernel     the row kernel: each block takes its rows one at a time, every source of a row staged in
 *                      shared memory
 * @param blocksPerRank blocks of each rank
 * @param tileRows      the tiled kernel: rows in one receive tile; the row kernel: rows a block takes at once (its
 *                      step: consecutive rows, so that a source's lines of the step are consecutive); 1..{@link
 *                      Ll128#MAX_TILE_ROWS}
 * @param sendWindow    tiles the tiled kernel's senders may be ahead (the row kernel's blocks always send one step
 *                      ahead of the one they wait for)
 * @param reloadLines   the tiled kernel's receivers load a batch's lines again once they have seen all its flags
 *                      (the row kernel's always do): on by default, since the GPU tests saw torn lines without it
 *                      (docs/PROTOCOL.md)
 * @param teams         the row kernel: blocks of {@link Ll128#BLOCK_THREADS} threads (teams) in one hardware block,
 *                      each with its own shared memory and barrier (blocksPerRank counts teams, and is a multiple of
 *                      teams); the tiled kernel: 1
 */
record GridPlan(boolean rowKernel, int blocksPerRank, int tileRows, int sendWindow, boolean reloadLines, int teams) {

    /**
     * Whether the row's lines of all {@code cp} sources fit in the row kernel's shared-memory stage, so that the row
     * kernel can take the call.
     */
    static boolean rowStageFits(int cp, int dataLines) {
        return stepFits(1, cp, dataLines);
    }

    /**
     * Whether a row kernel step of {@code stepRows} rows fits: every source's lines of the step in the shared-memory
     * stage, and one source's LSE lines of the step one per lane of a warp (the weights warp polls them so, and the
     * sending warp's lanes store them).
     */
    private static boolean stepFits(int stepRows, int cp, int dataLines) {
        long lseLines = (long) stepRows * Math.ceilDiv(dataLines, Ll128.LINES_PER_GROUP);
        return (long) stepRows * cp * dataLines * Ll128.LINE_BYTES <= Ll128.ROW_STAGE_BYTES
                && lseLines <= Ll128.MAX_GROUPS;
    }

    /**
     * Whether the senders' input copies are marked first to leave L2: where a launch's inputs are larger than L2
     * they are read once and would push out the lines receivers are about to read; smaller ones stay for the next
     * call (L2-hot layer loops). {@code tuning} may force it (stream=0|1).
     */
    static boolean streamInputs(long launchInputBytes, long l2Bytes, Tuning tuning) {
        return tuning.streamInputs() < 0 ? launchInputBytes > l2Bytes : tuning.streamInputs() == 1;
    }

    /**
     * The launch parameter's slot mask (a call's slot is its epoch AND the mask): 1, the slots alternate, where the
     * group's ranks run in several launches, since one launch may then be a call ahead of another and write the next
     * call's lines while a peer still reads this call's; 0, every call takes slot 0, where all {@code cp} ranks are in
     * this launch, since nothing of a call then runs after its launch ends (the next call's blocks wait for it before
     * they read or write anything), and one slot keeps the lines of consecutive calls in the same L2 lines instead of
     * evicting the other slot's (docs/PERFORMANCE.md). {@code tuning.twoSlots()} forces two.
     */
    static int slotMask(int ranksInLaunch, int cp, Tuning tuning) {
        return ranksInLaunch == cp && !tuning.twoSlots() ? 0 : 1;
    }

    /**
     * The default send window. Lines written more than this far ahead of their reader would leave L2 before they are
     * read at large batches (docs/PERFORMANCE.md).
     */
    static final int DEFAULT_SEND_WINDOW = 2;

    /**
     * The rows a row kernel block takes at once by default where it has more rows than one: a step's fixed costs
     * (its addresses, polls, barriers and weights) are shared by its rows, and each warp has that many rows' lines in
     * flight (docs/PERFORMANCE.md).
     */
    static final int DEFAULT_STEP_ROWS = 2;

    /**
     * Overrides for kernel experiments (docs/CUDA.md), from
     * {@code -Ddcp4j.gridPlan=window=W,tileRows=T,maxBlocks=B,reload=0|1,stream=0|1,row=N,step=S,slots=2,teams=N}
     * (stream:
     * -1, the default, decides by size; row: the most rows per block the row kernel takes, 0 for never; by default no
     * bound, since the row kernel is faster than the tiled one (measured) at every batch of the layer shape, up to 63
     * rows per block, docs/PERFORMANCE.md; step: the rows a row kernel block takes at once, 1..{@link
     * Ll128#MAX_TILE_ROWS}, at most what fits; 0, the default, takes {@link #DEFAULT_STEP_ROWS} where a block has
     * several rows, else 1; slots=2: calls alternate the two workspace slots also where every rank is in one launch,
     * to measure what one slot saves; by default {@link #slotMask} decides by launch, and one slot is never forced,
     * since across launches it would let one launch overwrite lines a peer has not read yet; teams: the row kernel's
     * teams per block, 1..{@link #MAX_TEAMS}, at most what the GPU holds ({@link #teams}); 0, the default, lets
     * {@link #teams} decide).
     */
    record Tuning(int sendWindow, int maxTileRows, int maxBlocks, boolean reloadLines, int streamInputs,
                  int rowKernelRows, int stepRows, boolean twoSlots, int teams) {
        static final Tuning DEFAULT = new Tuning(DEFAULT_SEND_WINDOW, Ll128.MAX_TILE_ROWS, Integer.MAX_VALUE, true,
                -1, Integer.MAX_VALUE, 0, false, 0);
        static final String PROPERTY = "dcp4j.gridPlan";

        /** The tuning the property names, or the default; a malformed value is refused with what it got. */
        static Tuning fromSystemProperty() {
            String spec = System.getProperty(PROPERTY);
            return spec == null || spec.isBlank() ? DEFAULT : parse(spec);
        }

        static Tuning parse(String spec) {
            int window = DEFAULT.sendWindow;
            int tileRows = DEFAULT.maxTileRows;
            int blocks = DEFAULT.maxBlocks;
            boolean reload = DEFAULT.reloadLines;
            int stream = DEFAULT.streamInputs;
            int row = DEFAULT.rowKernelRows;
            int step = DEFAULT.stepRows;
            boolean twoSlots = DEFAULT.twoSlots;
            int teams = DEFAULT.teams;
            for (String part : spec.split(",")) {
                String[] kv = part.split("=", 2);
                int value;
                try {
                    value = kv.length == 2 ? Integer.parseInt(kv[1].trim()) : -1;
                } catch (NumberFormatException e) {
                    value = -1;
                }
                String key = kv[0].trim();
                switch (key) {
                    case "window" -> window = require(key, value, 0, Integer.MAX_VALUE, spec);
                    case "tileRows" -> tileRows = require(key, value, 1, Ll128.MAX_TILE_ROWS, spec);
                    case "maxBlocks" -> blocks = require(key, value, 1, Integer.MAX_VALUE, spec);
                    case "reload" -> reload = require(key, value, 0, 1, spec) == 1;
                    case "stream" -> stream = require(key, value, 0, 1, spec);
                    case "row" -> row = require(key, value, 0, Integer.MAX_VALUE, spec);
                    case "step" -> step = require(key, value, 0, Ll128.MAX_TILE_ROWS, spec);
                    case "slots" -> twoSlots = require(key, value, Ll128.NUM_SLOTS, Ll128.NUM_SLOTS, spec) > 0;
                    case "teams" -> teams = require(key, value, 0, MAX_TEAMS, spec);
                    default -> throw new IllegalArgumentException(PROPERTY + " takes window=N, tileRows=N,"
                            + " maxBlocks=N, reload=0|1, stream=0|1, row=N, step=N, slots=2 and teams=N,"
                            + " comma-separated; got '" + spec + "'");
                }
            }
            return new Tuning(window, tileRows, blocks, reload, stream, row, step, twoSlots, teams);
        }

        private static int require(String key, int value, int least, int most, String spec) {
            if (value < least || value > most) {
                throw new IllegalArgumentException(PROPERTY + ": " + key + " must be an integer in [" + least + ", "
                        + most + "]; got '" + spec + "'");
            }
            return value;
        }
    }

    /** Most teams a tuning may ask for in one block (a block of the row kernel never holds more than fit one SM). */
    static final int MAX_TEAMS = 8;

    /**
     * The row kernel's teams per block for a launch: {@code tuning.teams()} where set, else as many as one SM holds
     * ({@code maxTeams}) where the launch shares the GPU with other launches of its group at the same time
     * ({@code budget} below {@code coResident}: ranks in processes under MPS), so that an SM runs one process's blocks
     * and translates one address space (docs/PERFORMANCE.md), else 1; never more than {@code maxTeams}.
     */
    static int teams(Tuning tuning, int budget, int coResident, int maxTeams) {
        int wanted = tuning.teams() > 0 ? tuning.teams() : budget < coResident ? maxTeams : 1;
        return Math.max(1, Math.min(wanted, maxTeams));
    }

    /**
     * The plan for {@code rows} rows of {@code cp} sources and {@code dataLines} lines within {@code budget} blocks
     * per rank. The row kernel where its stage fits and no block takes more than {@code tuning.rowKernelRows()}
     * rows: a block per row while they fit the budget, else every block takes several rows in turn, {@link
     * #stepRows} at a time; in hardware blocks of {@code teams} teams (fewer where the budget holds fewer), the blocks
     * rounded up to a multiple of them (a team past the last row takes its ticket and nothing else). Otherwise the
     * tiled kernel: a block per row while they fit (each row's groups are received in parallel and each block's few
     * sends are spread over its send warps), else tiles of up to {@code tuning.maxTileRows()} rows over at most
     * {@code budget} blocks.
     */
    static GridPlan of(int rows, int cp, int dataLines, int budget, Tuning tuning, int teams) {
        int blocks = Math.max(1, Math.min(budget, tuning.maxBlocks()));
        if (tuning.rowKernelRows() > 0 && rowStageFits(cp, dataLines)
                && Math.ceilDiv(rows, blocks) <= tuning.rowKernelRows()) {
            int t = Math.max(1, Math.min(teams, blocks));
            int within = blocks / t * t;
            int step = stepRows(rows, cp, dataLines, within, tuning);
            int used = Math.max(1, Math.min(Math.ceilDiv(rows, step), within));
            return new GridPlan(true, Math.ceilDiv(used, t) * t, step, tuning.sendWindow(), tuning.reloadLines(), t);
        }
        if (rows <= blocks) {
            return new GridPlan(false, Math.max(1, rows), 1, tuning.sendWindow(), tuning.reloadLines(), 1);
        }
        int tileRows = Math.min(tuning.maxTileRows(), Math.ceilDiv(rows, blocks));
        return new GridPlan(false, Math.min(blocks, Math.ceilDiv(rows, tileRows)), tileRows, tuning.sendWindow(),
                tuning.reloadLines(), 1);
    }

    /**
     * The plan of the other variants (op.Variant: ll, simple, unfused): a block per row while the rows fit the budget
     * (or {@code tuning.maxBlocks()}), else every block takes rows b, b + B, ...; simple's and unfused's flags are one
     * per block, so every rank must derive the same B (ranks in one launch share the budget; processes compare their
     * B in the call check, CudaRankEngine).
     */
    static GridPlan forVariant(int rows, int budget, Tuning tuning) {
        int blocks = Math.max(1, Math.min(budget, tuning.maxBlocks()));
        return new GridPlan(false, Math.max(1, Math.min(rows, blocks)), 1, 0, true, 1);
    }

    /**
     * The rows a row kernel block takes at once: {@code tuning.stepRows()} where set, else {@link #DEFAULT_STEP_ROWS}
     * where the rows outnumber the blocks, else 1; never more than a block's share of the rows or than what fits.
     */
    static int stepRows(int rows, int cp, int dataLines, int blocks, Tuning tuning) {
        int wanted = tuning.stepRows() > 0 ? tuning.stepRows() : rows > blocks ? DEFAULT_STEP_ROWS : 1;
        int step = Math.max(1, Math.min(wanted, Math.ceilDiv(rows, blocks)));
        while (step > 1 && !stepFits(step, cp, dataLines)) {
            step--;
        }
        return step;
    }
}
