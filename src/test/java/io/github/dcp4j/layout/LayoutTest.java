package io.github.dcp4j.layout;

import io.github.dcp4j.DcpLseReduce;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.DTypeException;
import io.github.dcp4j.op.WorkspaceSpec;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.EnumSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class LayoutTest {

    @Test
    void workspaceSizeOfTheUpstreamTestCase() {
        assertEquals(51328, DcpLseReduce.workspaceSize(8, 2, 4, 128, DType.BF16));
        assertEquals(128 + 2 * 4 * 8 * 2 * (3 * 128 + 16), DcpLseReduce.workspaceSize(8, 2, 4, 128, DType.FP16));
    }

    @Test
    void headDim512Bf16RowIs1200Bytes() {
        RowLayout row = RowLayout.of(512, DType.BF16.bytes());
        assertEquals(128, row.dataWords());
        assertEquals(9, row.dataLines());
        assertEquals(3, row.lineGroups());
        assertEquals(1200, row.rowBytes());
    }

    /** Independent formula from the contract, for every head_dim the row limit allows. */
    @ParameterizedTest
    @EnumSource(value = DType.class, names = {"FP16", "BF16"})
    void rowBytesFollowTheFormulaUpToTheRowLimit(DType dtype) {
        for (int headDim = 8; headDim * 2 <= 15360; headDim += 8) {
            int w = headDim * 2 / 8;
            int lines = (w + 14) / 15;
            int groups = (lines + 3) / 4;
            RowLayout row = RowLayout.of(headDim, dtype.bytes());
            assertEquals(128 * lines + 16 * groups, row.rowBytes(), "head_dim " + headDim);
            assertTrue(row.lineGroups() <= Ll128.MAX_GROUPS);
        }
    }

    @Test
    void rowLimitIs15360Bytes() {
        assertEquals(15360, Ll128.MAX_ROW_DATA_BYTES);
        assertEquals(32, RowLayout.of(7680, DType.BF16.bytes()).lineGroups());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> RowLayout.of(7688, DType.BF16.bytes()));
        assertTrue(e.getMessage().contains("15376") && e.getMessage().contains("15360"), e.getMessage());
    }

    @ParameterizedTest(name = "max_tokens={0} local_heads={1} cp={2} head_dim={3}")
    @CsvSource({"0,2,4,128,max_tokens", "8,0,4,128,local_heads", "8,2,65,128,cp_size", "8,2,0,128,cp_size",
        "8,2,4,0,head_dim", "8,2,4,7,head_dim", "-1,2,4,128,max_tokens"})
    void workspaceSizeRejectsBadGeometry(int maxTokens, int heads, int cp, int headDim, String named) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> DcpLseReduce.workspaceSize(maxTokens, heads, cp, headDim, DType.BF16));
        assertTrue(e.getMessage().contains(named), e.getMessage());
        assertTrue(!(e instanceof DTypeException), "a geometry error is not a dtype error");
    }

    @Test
    void workspaceSizeRejectsFp32AsADtypeError() {
        DTypeException e = assertThrows(DTypeException.class,
                () -> DcpLseReduce.workspaceSize(8, 2, 4, 128, DType.FP32));
        assertTrue(e.getMessage().contains("FP32"), e.getMessage());
    }

    @Test
    void flagsAreNeverZeroAcrossTheWrap() {
        int[] epochs = {0, 1, 2, -3, -2, -1, Integer.MAX_VALUE, Integer.MIN_VALUE};
        for (int epoch : epochs) {
            assertNotEquals(0L, Ll128.dataFlag(epoch));
            assertNotEquals(0, Ll128.lseFlag(epoch));
            assertEquals(Ll128.FLAG_TAG, Ll128.dataFlag(epoch) & 0xFFFFFFFF_00000000L);
        }
        assertEquals(0x4C4C3132_00000000L, Ll128.dataFlag(-1), "epoch 2^32-1: low word wraps to 0, tag remains");
        assertEquals(1, Ll128.lseFlag(-1), "epoch 2^32-1: LSE flag remapped from 0 to 1");
        assertEquals(0x4C4C3132_00000001L, Ll128.dataFlag(0));
        assertEquals(1, Ll128.slot(-1));
        assertEquals(0, Ll128.slot(0));
    }

    @Test
    void linesTileThePayloadWithoutOverlapAndStay128ByteAligned() {
        WorkspaceSpec spec = new WorkspaceSpec(3, 2, 3, 200, DType.BF16); // 50 words: 4 lines, 1 group
        WorkspaceLayout layout = spec.layout();
        long bytes = spec.bytes();
        boolean[] used = new boolean[(int) bytes];
        for (int slot = 0; slot < 2; slot++) {
            for (int src = 0; src < 3; src++) {
                for (int row = 0; row < layout.maxRows(); row++) {
                    for (int line = 0; line < layout.row().dataLines(); line++) {
                        long off = layout.dataLineOffset(slot, src, row, line);
                        assertEquals(0, off % Ll128.LINE_BYTES, "data lines are 128-byte aligned");
                        mark(used, off, Ll128.LINE_BYTES);
                    }
                    for (int g = 0; g < layout.row().lineGroups(); g++) {
                        long off = layout.lseLineOffset(slot, src, row, g);
                        assertEquals(0, off % Ll128.LSE_LINE_BYTES);
                        mark(used, off, Ll128.LSE_LINE_BYTES);
                    }
                }
            }
        }
        for (int i = 0; i < bytes; i++) {
            assertEquals(i >= Ll128.PAYLOAD_OFFSET, used[i], "byte " + i + " covered exactly by the payload");
        }
    }

    private static void mark(boolean[] used, long off, int len) {
        for (int i = 0; i < len; i++) {
            assertTrue(!used[(int) off + i], "byte " + (off + i) + " used twice");
            used[(int) off + i] = true;
        }
    }

    @Test
    void aWorkspaceOfAnotherGeometryIsRefused() {
        long bytes = DcpLseReduce.workspaceSize(8, 2, 4, 128, DType.BF16);
        assertEquals(16, WorkspaceLayout.forWorkspace(bytes, 4, RowLayout.of(128, DType.BF16.bytes())).maxRows());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> WorkspaceLayout.forWorkspace(bytes, 4, RowLayout.of(512, DType.BF16.bytes())));
        assertTrue(e.getMessage().contains("51328"), e.getMessage());
    }
}
