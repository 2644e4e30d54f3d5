package io.github.dcp4j.layout;

/**
 * The workspace of the fence-and-flag variants ({@code simple}, and {@code unfused}'s copy kernel): row slices travel
 * as they are, with no framing, and one flag per (source, chunk) says that a chunk's rows and LSEs have all landed.
 * A chunk is the rows one block of the sender owns (block b of B: rows b, b + B, ...), which block b of the receiver
 * owns too: every rank derives the same grid from the same call. It fits in the contract's workspace ({@link
 * WorkspaceLayout}: a row there takes at least 24 bytes more than its data, and this layout takes 8), so these variants
 * run on workspaces of the contract's size; the metadata is {@link Ll128}'s.
 *
 * <pre>
 *   0 .. 128   metadata, as {@link Ll128} draws it (epoch, arrivals, timeout record)
 *   128 = PAYLOAD_OFFSET
 *   +--------------------------------------------------------------------+
 *   | data  [slot 0..1][src 0..cp-1][row 0..maxRows-1]  dataBytes, raw   |
 *   +--------------------------------------------------------------------+
 *   | LSE   [slot 0..1][src 0..cp-1][row 0..maxRows-1]  4 B, fp32        |
 *   +--------------------------------------------------------------------+
 *   | flags [slot 0..1][src 0..cp-1][chunk 0..maxRows-1] 4 B             |
 *   +--------------------------------------------------------------------+
 *   flag = {@link Ll128#lseFlag}(epoch), written with release semantics (system scope) after every data and LSE
 *   store of the chunk; the receiver acquires it, then reads the chunk and zeroes the flag.
 * </pre>
 *
 * @param cpSize  source ranks
 * @param maxRows rows the workspace holds per source and slot
 * @param row     the row layout (its data bytes are what travels)
 */
public record FencedLayout(int cpSize, int maxRows, RowLayout row) {
    /** Bytes of one LSE value, and of one chunk flag. */
    public static final int WORD_BYTES = 4;

    /** A layout, checked as {@link WorkspaceLayout} checks its arguments. */
    public FencedLayout {
        new WorkspaceLayout(cpSize, maxRows, row);
    }

    /** {@return the bytes this layout uses: 128 + 2 x cp x maxRows x (dataBytes + 8), within the contract's size} */
    public long bytesUsed() {
        return Math.addExact(Ll128.PAYLOAD_OFFSET, Math.multiplyExact(
                Math.multiplyExact((long) Ll128.NUM_SLOTS * cpSize, maxRows), rowBytes(row)));
    }

    /**
     * The workspace bytes of one row of {@code row}'s shape, per source and slot: its data, its LSE value and its
     * share of the flags (a chunk has at least one row, so the flags never take more than one word a row).
     *
     * @param row the row's shape
     * @return dataBytes + 8
     */
    public static long rowBytes(RowLayout row) {
        return (long) row.dataBytes() + 2 * WORD_BYTES;
    }

    /** {@return the bytes of row data in one slot (all sources, all rows)} */
    public long dataSlotBytes() {
        return (long) cpSize * maxRows * row.dataBytes();
    }

    /** {@return the bytes of LSE values in one slot; the flags of a slot take as many} */
    public long lseSlotBytes() {
        return (long) cpSize * maxRows * WORD_BYTES;
    }

    /** {@return the offset of the first LSE value (slot 0, source 0, row 0)} */
    public long lseRegionOffset() {
        return Ll128.PAYLOAD_OFFSET + Ll128.NUM_SLOTS * dataSlotBytes();
    }

    /** {@return the offset of the first flag (slot 0, source 0, chunk 0)} */
    public long flagRegionOffset() {
        return lseRegionOffset() + Ll128.NUM_SLOTS * lseSlotBytes();
    }

    /**
     * Offset of the slice of {@code rowIndex} sent by {@code src}, in {@code slot}.
     *
     * @param slot     0 or 1
     * @param src      the sending rank
     * @param rowIndex the row
     * @return its byte offset in the workspace
     */
    public long dataOffset(int slot, int src, int rowIndex) {
        return Ll128.PAYLOAD_OFFSET + slot * dataSlotBytes() + ((long) src * maxRows + rowIndex) * row.dataBytes();
    }

    /**
     * Offset of the LSE value of {@code rowIndex} sent by {@code src}, in {@code slot}.
     *
     * @param slot     0 or 1
     * @param src      the sending rank
     * @param rowIndex the row
     * @return its byte offset in the workspace
     */
    public long lseOffset(int slot, int src, int rowIndex) {
        return lseRegionOffset() + slot * lseSlotBytes() + ((long) src * maxRows + rowIndex) * WORD_BYTES;
    }

    /**
     * Offset of the flag of {@code chunk} sent by {@code src}, in {@code slot}.
     *
     * @param slot  0 or 1
     * @param src   the sending rank
     * @param chunk the sender's block index
     * @return its byte offset in the workspace
     */
    public long flagOffset(int slot, int src, int chunk) {
        return flagRegionOffset() + slot * lseSlotBytes() + ((long) src * maxRows + chunk) * WORD_BYTES;
    }
}
