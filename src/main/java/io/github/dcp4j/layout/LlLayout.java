package io.github.dcp4j.layout;

/**
 * The workspace of the {@code ll} variant (NCCL's LL protocol): every 4 data bytes travel in an 8-byte line with
 * their own 4-byte flag, so a line is one 8-byte store and lands whole on any interconnect. It needs more than the
 * contract's workspace ({@link WorkspaceLayout}), so it has its own size; the metadata is {@link Ll128}'s.
 *
 * <pre>
 *   0 .. 128   metadata, as {@link Ll128} draws it (epoch, arrivals, timeout record)
 *   128 = PAYLOAD_OFFSET
 *   +--------------------------------------------------------------------------------+
 *   | data lines [slot 0..1][src 0..cp-1][row 0..maxRows-1][k 0..dataBytes/4-1]  8 B  |
 *   +--------------------------------------------------------------------------------+
 *   | LSE lines  [slot 0..1][src 0..cp-1][row 0..maxRows-1]                      8 B  |
 *   +--------------------------------------------------------------------------------+
 *
 *   data line k                     LSE line
 *   0            4          8       0            4          8
 *   +------------+----------+       +------------+----------+
 *   | bytes 4k.. | flag     |       | lse bits   | flag     |
 *   +------------+----------+       +------------+----------+
 *   flag = {@link Ll128#lseFlag}(epoch): epoch + 1, or 1 where that is 0 (never zero; readers zero it)
 * </pre>
 *
 * @param cpSize  source ranks
 * @param maxRows rows the workspace holds per source and slot
 * @param row     the row layout (its data bytes are what travels)
 */
public record LlLayout(int cpSize, int maxRows, RowLayout row) {
    /** Bytes of one LL line: 4 data bytes and a 4-byte flag, written by one 8-byte store. */
    public static final int LINE_BYTES = 8;
    /** Data bytes in one LL line. */
    public static final int LINE_DATA_BYTES = 4;

    /** A layout, checked as {@link WorkspaceLayout} checks its arguments. */
    public LlLayout {
        new WorkspaceLayout(cpSize, maxRows, row);
    }

    /** {@return the LL lines of one row slice: its data bytes / 4} */
    public int linesPerRow() {
        return row.dataBytes() / LINE_DATA_BYTES;
    }

    /** {@return the workspace bytes of one row, per source and slot: its data lines and its LSE line} */
    public long rowBytes() {
        return rowBytes(row);
    }

    /**
     * The workspace bytes of one row of {@code row}'s shape, per source and slot: its data lines and its LSE line.
     *
     * @param row the row's shape
     * @return the bytes
     */
    public static long rowBytes(RowLayout row) {
        return (long) row.dataBytes() / LINE_DATA_BYTES * LINE_BYTES + LINE_BYTES;
    }

    /** {@return the workspace's size: 128 + 2 x cp x maxRows x (2 x dataBytes + 8)} */
    public long bytes() {
        return Math.addExact(Ll128.PAYLOAD_OFFSET,
                Math.multiplyExact(Math.multiplyExact((long) Ll128.NUM_SLOTS * cpSize, maxRows), rowBytes()));
    }

    /** {@return the bytes of data lines in one slot (all sources, all rows)} */
    public long dataSlotBytes() {
        return (long) cpSize * maxRows * linesPerRow() * LINE_BYTES;
    }

    /** {@return the bytes of LSE lines in one slot} */
    public long lseSlotBytes() {
        return (long) cpSize * maxRows * LINE_BYTES;
    }

    /** {@return the offset of the first LSE line (slot 0, source 0, row 0)} */
    public long lseRegionOffset() {
        return Ll128.PAYLOAD_OFFSET + Ll128.NUM_SLOTS * dataSlotBytes();
    }

    /**
     * Offset of LL line {@code k} of {@code rowIndex} sent by {@code src}, in {@code slot}.
     *
     * @param slot     0 or 1
     * @param src      the sending rank
     * @param rowIndex the row
     * @param k        the line: data bytes 4k .. 4k + 3 of the slice
     * @return its byte offset in the workspace
     */
    public long dataLineOffset(int slot, int src, int rowIndex, int k) {
        return Ll128.PAYLOAD_OFFSET + slot * dataSlotBytes()
                + (((long) src * maxRows + rowIndex) * linesPerRow() + k) * LINE_BYTES;
    }

    /**
     * Offset of the LSE line of {@code rowIndex} sent by {@code src}, in {@code slot}.
     *
     * @param slot     0 or 1
     * @param src      the sending rank
     * @param rowIndex the row
     * @return its byte offset in the workspace
     */
    public long lseLineOffset(int slot, int src, int rowIndex) {
        return lseRegionOffset() + slot * lseSlotBytes() + ((long) src * maxRows + rowIndex) * LINE_BYTES;
    }
}
