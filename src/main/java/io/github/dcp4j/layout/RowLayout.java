package io.github.dcp4j.layout;

/**
 * How one row slice ({@code head_dim} elements for one destination) travels: as {@code dataLines} 128-byte lines
 * in {@code lineGroups} groups of four, plus one 16-byte LSE line per group.
 *
 * @param headDim      elements in the slice
 * @param elementBytes bytes of one element (2: fp16 or bf16)
 * @param dataWords    8-byte words of data: headDim x elementBytes / 8
 * @param dataLines    ceil(dataWords / 15)
 * @param lineGroups   ceil(dataLines / 4)
 */
public record RowLayout(int headDim, int elementBytes, int dataWords, int dataLines, int lineGroups) {

    /** Bytes of one element of a row: the op moves 16-bit elements (fp16 or bf16) only. */
    public static final int ELEMENT_BYTES = 2;

    /**
     * The layout of a row of {@code headDim} elements of {@code elementBytes} each, after checking both.
     *
     * @param headDim      elements of one head
     * @param elementBytes bytes of one element (2)
     * @return the layout
     */
    public static RowLayout of(int headDim, int elementBytes) {
        if (elementBytes != ELEMENT_BYTES) {
            throw new IllegalArgumentException("row elements must be " + ELEMENT_BYTES + " bytes (fp16 or bf16); got "
                    + elementBytes);
        }
        if (headDim <= 0) {
            throw new IllegalArgumentException("head_dim must be > 0; got " + headDim);
        }
        long rowBytes = (long) headDim * elementBytes;
        if (rowBytes % Ll128.ROW_DATA_GRANULE != 0) {
            throw new IllegalArgumentException("head_dim x element size must be a multiple of "
                    + Ll128.ROW_DATA_GRANULE + " bytes; got head_dim " + headDim + " x " + elementBytes + " = "
                    + rowBytes);
        }
        if (rowBytes > Ll128.MAX_ROW_DATA_BYTES) {
            throw new IllegalArgumentException("head_dim x element size must be at most " + Ll128.MAX_ROW_DATA_BYTES
                    + " bytes (" + Ll128.MAX_GROUPS + " line groups); got head_dim " + headDim + " x "
                    + elementBytes + " = " + rowBytes);
        }
        int dataWords = (int) (rowBytes / Ll128.WORD_BYTES);
        int dataLines = ceilDiv(dataWords, Ll128.LINE_DATA_WORDS);
        int lineGroups = ceilDiv(dataLines, Ll128.LINES_PER_GROUP);
        return new RowLayout(headDim, elementBytes, dataWords, dataLines, lineGroups);
    }

    /** {@return the bytes of the slice itself: headDim x elementBytes} */
    public int dataBytes() {
        return dataWords * Ll128.WORD_BYTES;
    }

    /** {@return the bytes of data lines for one row} */
    public int dataLineBytes() {
        return dataLines * Ll128.LINE_BYTES;
    }

    /** {@return the bytes of LSE lines for one row} */
    public int lseLineBytes() {
        return lineGroups * Ll128.LSE_LINE_BYTES;
    }

    /** {@return the workspace bytes per row, per source, per slot: 128 x dataLines + 16 x lineGroups} */
    public int rowBytes() {
        return dataLineBytes() + lseLineBytes();
    }

    private static int ceilDiv(int a, int b) {
        return (a + b - 1) / b;
    }
}
