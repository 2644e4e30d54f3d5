package io.github.dcp4j.layout;

/**
 * Byte offsets inside one rank's workspace for a call with {@code cpSize} sources and rows laid out as {@code row}.
 * See {@link Ll128} for the diagram.
 *
 * @param cpSize  source ranks
 * @param maxRows rows the workspace holds per source and slot
 * @param row     the row layout
 */
public record WorkspaceLayout(int cpSize, int maxRows, RowLayout row) {

    /**
     * A layout, checked: cp within 1..{@link Ll128#MAX_RANKS}, at least one row, and max rows x max(cp, 32) within
     * an int (the kernel's row arithmetic).
     */
    public WorkspaceLayout {
        if (cpSize < 1 || cpSize > Ll128.MAX_RANKS) {
            throw new IllegalArgumentException("cp_size must be in [1, " + Ll128.MAX_RANKS + "]; got " + cpSize);
        }
        if (maxRows < 1) {
            throw new IllegalArgumentException("max rows must be >= 1; got " + maxRows);
        }
        if (maxRows > mostRows(cpSize)) {
            throw new IllegalArgumentException("max rows x max(cp_size, 32) must fit in an int; got " + maxRows
                    + " rows at cp_size " + cpSize);
        }
    }

    /**
     * The most rows a layout for {@code cpSize} sources may have: max rows x max(cp, 32) within an int, as the
     * kernel's row arithmetic needs.
     *
     * @param cpSize ranks in the group, 1..{@link Ll128#MAX_RANKS}
     * @return {@code Integer.MAX_VALUE / max(cpSize, 32)}
     */
    public static int mostRows(int cpSize) {
        return Integer.MAX_VALUE / Math.max(cpSize, 32);
    }

    /**
     * Total workspace bytes.
     *
     * @param cpSize  ranks in the group
     * @param maxRows rows per source and slot
     * @param row     the row layout
     * @return 128 + 2 x cp x maxRows x rowBytes
     */
    public static long bytes(int cpSize, long maxRows, RowLayout row) {
        return Math.addExact(Ll128.PAYLOAD_OFFSET,
                Math.multiplyExact(Math.multiplyExact((long) Ll128.NUM_SLOTS * cpSize, maxRows), row.rowBytes()));
    }

    /**
     * The layout a call sees in a workspace of {@code workspaceBytes}: max rows = (bytes - 128) / (2 x cp x rowBytes),
     * which must divide exactly (a workspace made for another cp_size or head_dim is refused).
     *
     * @param workspaceBytes the workspace's size
     * @param cpSize         ranks in the group
     * @param row            the call's row layout
     * @return the layout
     * @throws IllegalArgumentException where the size does not hold whole rows
     */
    public static WorkspaceLayout forWorkspace(long workspaceBytes, int cpSize, RowLayout row) {
        long perRow = (long) Ll128.NUM_SLOTS * cpSize * row.rowBytes();
        long payload = workspaceBytes - Ll128.PAYLOAD_OFFSET;
        if (payload <= 0 || payload % perRow != 0) {
            throw new IllegalArgumentException("workspace of " + workspaceBytes + " bytes does not hold whole rows of "
                    + row.rowBytes() + " bytes for cp_size " + cpSize + " (head_dim " + row.headDim() + " x "
                    + row.elementBytes() + " bytes): expected 128 + a multiple of " + perRow);
        }
        long maxRows = payload / perRow;
        if (maxRows > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("workspace of " + workspaceBytes + " bytes holds " + maxRows
                    + " rows; at most " + Integer.MAX_VALUE + " are supported");
        }
        return new WorkspaceLayout(cpSize, (int) maxRows, row);
    }

    /** {@return the total workspace bytes} */
    public long bytes() {
        return bytes(cpSize, maxRows, row);
    }

    /** {@return the bytes of data lines in one slot (all sources, all rows)} */
    public long dataSlotBytes() {
        return (long) cpSize * maxRows * row.dataLineBytes();
    }

    /** {@return the bytes of LSE lines in one slot} */
    public long lseSlotBytes() {
        return (long) cpSize * maxRows * row.lseLineBytes();
    }

    /** {@return the offset of the first LSE line (slot 0, source 0, row 0, group 0)} */
    public long lseRegionOffset() {
        return Ll128.PAYLOAD_OFFSET + Ll128.NUM_SLOTS * dataSlotBytes();
    }

    /**
     * Offset of data line {@code line} of {@code row} sent by {@code src}, in {@code slot}.
     *
     * @param slot     0 or 1
     * @param src      the sending rank
     * @param rowIndex the row
     * @param line     the line of the row
     * @return its byte offset in the workspace
     */
    public long dataLineOffset(int slot, int src, int rowIndex, int line) {
        return Ll128.PAYLOAD_OFFSET + slot * dataSlotBytes()
                + (((long) src * maxRows + rowIndex) * row.dataLines() + line) * Ll128.LINE_BYTES;
    }

    /**
     * Offset of the LSE line of {@code group} of {@code row} sent by {@code src}, in {@code slot}.
     *
     * @param slot     0 or 1
     * @param src      the sending rank
     * @param rowIndex the row
     * @param group    the line group of the row
     * @return its byte offset in the workspace
     */
    public long lseLineOffset(int slot, int src, int rowIndex, int group) {
        return lseRegionOffset() + slot * lseSlotBytes()
                + (((long) src * maxRows + rowIndex) * row.lineGroups() + group) * Ll128.LSE_LINE_BYTES;
    }
}
