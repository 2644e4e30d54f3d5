package io.github.dcp4j.layout;

import io.github.dcp4j.op.DType;
import org.junit.jupiter.api.Test;

import java.util.HashSet;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class VariantLayoutTest {

    @Test
    void llWorkspaceOfTheUpstreamTestCase() {
        // (8 tokens, 2 heads, cp 4, head_dim 128, bf16): 256 data bytes = 64 LL lines of 8 bytes, plus one LSE line
        LlLayout ll = new LlLayout(4, 16, RowLayout.of(128, DType.BF16.bytes()));
        assertEquals(64, ll.linesPerRow());
        assertEquals(128 + 2 * 4 * 16 * (64 * 8 + 8), ll.bytes());
    }

    @Test
    void llLayerShapeRowIsTwiceItsDataPlusOneLine() {
        LlLayout ll = new LlLayout(8, 16, RowLayout.of(512, DType.BF16.bytes()));
        assertEquals(2 * 1024 + 8, ll.rowBytes());
    }

    /** Every LL line and LSE line of every slot, source and row lies in its own 8 bytes, inside the workspace. */
    @Test
    void llLinesTileTheWorkspaceWithoutOverlap() {
        LlLayout ll = new LlLayout(3, 5, RowLayout.of(16, DType.FP16.bytes()));
        Set<Long> seen = new HashSet<>();
        for (int slot = 0; slot < Ll128.NUM_SLOTS; slot++) {
            for (int src = 0; src < 3; src++) {
                for (int row = 0; row < 5; row++) {
                    for (int k = 0; k < ll.linesPerRow(); k++) {
                        assertTrue(seen.add(ll.dataLineOffset(slot, src, row, k)));
                    }
                    assertTrue(seen.add(ll.lseLineOffset(slot, src, row)));
                }
            }
        }
        assertEquals((ll.bytes() - Ll128.PAYLOAD_OFFSET) / LlLayout.LINE_BYTES, seen.size());
        for (long offset : seen) {
            assertTrue(offset >= Ll128.PAYLOAD_OFFSET && offset + LlLayout.LINE_BYTES <= ll.bytes());
            assertEquals(0, offset % LlLayout.LINE_BYTES);
        }
    }

    /** The fence-and-flag layout fits the contract's workspace at every head_dim the row limit allows. */
    @Test
    void fencedLayoutFitsTheContractWorkspace() {
        for (int headDim = 8; headDim * 2 <= Ll128.MAX_ROW_DATA_BYTES; headDim += 8) {
            for (int cp : new int[] {1, 2, 8, 64}) {
                RowLayout row = RowLayout.of(headDim, DType.BF16.bytes());
                FencedLayout f = new FencedLayout(cp, 7, row);
                long contract = new WorkspaceLayout(cp, 7, row).bytes();
                assertTrue(f.bytesUsed() <= contract, "head_dim " + headDim + " cp " + cp);
                assertEquals(f.flagRegionOffset() + Ll128.NUM_SLOTS * f.lseSlotBytes(), f.bytesUsed());
                assertEquals(0, f.lseRegionOffset() % 16, "16-byte stores end where the LSE values start");
            }
        }
    }

    @Test
    void fencedOffsetsFollowTheDiagram() {
        RowLayout row = RowLayout.of(64, DType.BF16.bytes());
        FencedLayout f = new FencedLayout(4, 3, row);
        assertEquals(128 + (1L * 4 * 3 + 2 * 3 + 1) * 128, f.dataOffset(1, 2, 1));
        long lse = 128 + 2L * 4 * 3 * 128;
        assertEquals(lse + (4 * 3 + 3 + 2) * 4, f.lseOffset(1, 1, 2));
        assertEquals(lse + 2 * 4 * 3 * 4 + (4 * 3 + 3 * 3) * 4, f.flagOffset(1, 3, 0));
    }

    @Test
    void variantLayoutsRefuseWhatTheContractRefuses() {
        RowLayout row = RowLayout.of(64, DType.BF16.bytes());
        assertThrows(IllegalArgumentException.class, () -> new LlLayout(65, 1, row));
        assertThrows(IllegalArgumentException.class, () -> new FencedLayout(2, 0, row));
    }
}
