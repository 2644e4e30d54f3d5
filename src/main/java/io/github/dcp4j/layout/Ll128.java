package io.github.dcp4j.layout;

/**
 * The LL128 workspace protocol, described once. Every size, offset and flag value that the engines and the kernel use
 * comes from here (the CUDA side gets them from a header generated from this class).
 *
 * <pre>
 * Workspace: one per rank, the same size on every rank, 128-byte aligned, zeroed once at creation.
 *
 *   0         4              8        12       16     20     24       28                               128
 *   +---------+--------------+--------+--------+------+------+--------+----------- ... -----------+
 *   | epoch   | arrivals     | kind   | source | row  | line | epoch  | zero                      |  metadata
 *   +---------+--------------+--------+--------+------+------+--------+----------- ... -----------+
 *   |&lt;- the call's ticket: ->|&lt;----------- timeout record ----------->|
 *   |   one u64, LE          |
 *   arrivals: blocks of the current call that took their ticket (bits 0..15, ARRIVALS_MASK), the era (bits 16..30,
 *   ERA_MASK at ERA_SHIFT: how often the epoch wrapped, was forced or was reset, modulo 2^15), and POISONED_BIT
 *   (bit 31): a wait of this rank gave up, so its slots may hold lines of a call that never completed; set until the
 *   host re-zeroes the workspace. The last block of a call to arrive advances the epoch (and the era where the epoch
 *   wraps) and resets the count in one atomic add.
 *   timeout record: 0, or what the first GPU wait that gave up was waiting for (TIMEOUT_DATA_LINE /
 *   TIMEOUT_LSE_LINE), with the source rank, row, line (data line index, or group of an LSE line) and the epoch of
 *   that call.
 *   128 = PAYLOAD_OFFSET
 *   +-------------------------------------------------------------------------------------+
 *   | data lines  [slot 0..1][src 0..cp-1][row 0..maxRows-1][line 0..dataLines-1]  128 B   |
 *   +-------------------------------------------------------------------------------------+
 *   | LSE lines   [slot 0..1][src 0..cp-1][row 0..maxRows-1][group 0..lineGroups-1] 16 B   |
 *   +-------------------------------------------------------------------------------------+
 *
 * Data line: 16 little-endian u64 words. Word k &lt; 15 of line l carries the row's data word 15*l + k (bytes
 * 8*(15*l + k) .. +7 of the slice row[dst, :]); words past the row's end are zero. Word 15 is the flag.
 *
 *   0        8        16                                        112      120      128
 *   +--------+--------+------------------- ... ------------------+--------+--------+
 *   | word 0 | word 1 |                                          | word14 | flag   |
 *   +--------+--------+------------------- ... ------------------+--------+--------+
 *   flag = 0x4C4C3132_00000000 | u32(epoch + 1)        ("LL12" in the high word: never zero), where readers zero
 *          the flags they consume (CPU, TornadoVM);
 *   flag = key XOR (era &lt;&lt; 32 | epoch)             (bit 63 of the group's key set: never zero), where readers
 *          drop consumed lines from L2 instead (the CUDA engine; keyedDataFlag)
 *
 * LSE line: one per group of 4 data lines (a warp's 32 x 16-byte store covers one group), 4 little-endian u32.
 *
 *   0          4          8          12         16
 *   +----------+----------+----------+----------+
 *   | lse bits | flag     | 0        | flag     |
 *   +----------+----------+----------+----------+
 *   flag = u32(epoch + 1), or 1 where that is 0    (never zero)
 * </pre>
 *
 * slot = epoch &amp; 1. The epoch is the rank's own call counter (metadata word 0); every block of a call takes a ticket
 * at entry (an atomic add on the arrivals word, which returns the epoch beside it), and the last to arrive advances
 * the epoch, so CUDA-graph replays advance it. Nothing is sent to a rank's own workspace: a rank merges its own slice
 * from its input. Readers zero every LSE flag they consume. The CPU and TornadoVM engines zero every data flag they
 * consume too, so between calls a slot holds only zero flags, and a zero flag never matches; the CUDA engine's
 * receivers discard consumed data lines from L2 instead (so that they are never written back to DRAM), which leaves
 * their memory indeterminate, and its data flags are keyed so that no value left there can match (docs/PROTOCOL.md,
 * "Why a stale line can never look ready").
 */
public final class Ll128 {
    private Ll128() {
    }

    /**
     * Names this layout and protocol; ranks in several processes compare it before any launch, so that builds with
     * different layouts never share workspaces. Change it whenever a constant below or the kernel's use of them does.
     */
    public static final String PROTOCOL_ID = "dcp4j-ll128/3";
    /** Largest cp_size (source ranks per row). */
    public static final int MAX_RANKS = 64;
    /** Slots alternate by call: a peer can run at most one call ahead. */
    public static final int NUM_SLOTS = 2;

    /** Bytes of metadata before the payload; also the payload's alignment. */
    public static final int PAYLOAD_OFFSET = 128;
    /** Byte offset of the u32 call counter (epoch) in the metadata. */
    public static final int EPOCH_OFFSET = 0;
    /** Byte offset of the u32 count of blocks (CPU: receivers) that took their ticket in the current call. */
    public static final int ARRIVALS_OFFSET = 4;
    /** Bit of the arrivals word that marks the workspace poisoned (a wait gave up; only a re-zeroing clears it). */
    public static final long POISONED_BIT = 0x8000_0000L;
    /** Bits of the arrivals word that count a call's arrivals; a rank's launch has fewer blocks than this. */
    public static final long ARRIVALS_MASK = 0xFFFFL;
    /** Where the era starts in the arrivals word. */
    public static final int ERA_SHIFT = 16;
    /** The era's bits (after the shift): 15 of them, below the poisoned bit. */
    public static final long ERA_MASK = 0x7FFFL;
    /** Byte offset of the u32 timeout record: 0, {@link #TIMEOUT_DATA_LINE} or {@link #TIMEOUT_LSE_LINE}. */
    public static final int TIMEOUT_OFFSET = 8;
    /** Byte offset of the u32 source rank a timed-out wait was waiting for. */
    public static final int TIMEOUT_SOURCE_OFFSET = 12;
    /** Byte offset of the u32 row a timed-out wait was waiting for. */
    public static final int TIMEOUT_ROW_OFFSET = 16;
    /** Byte offset of the u32 line (data line index, or LSE group) a timed-out wait was waiting for. */
    public static final int TIMEOUT_LINE_OFFSET = 20;
    /** Byte offset of the u32 epoch of the call whose wait gave up. */
    public static final int TIMEOUT_EPOCH_OFFSET = 24;
    /** Bytes of metadata the host reads back: the ticket and the timeout record. */
    public static final int METADATA_RECORD_BYTES = TIMEOUT_EPOCH_OFFSET + 4;
    /** Timeout record: a wait for a data line gave up. */
    public static final int TIMEOUT_DATA_LINE = 1;
    /** Timeout record: a wait for an LSE line gave up. */
    public static final int TIMEOUT_LSE_LINE = 2;

    /** Bytes in one data line; also the alignment every line keeps. */
    public static final int LINE_BYTES = 128;
    /** Bytes in one data or flag word. */
    public static final int WORD_BYTES = 8;
    /** u64 words in one line. */
    public static final int LINE_WORDS = LINE_BYTES / WORD_BYTES;
    /** Data words in one line; the last word is the flag. */
    public static final int LINE_DATA_WORDS = LINE_WORDS - 1;
    /** Data bytes in one line. */
    public static final int LINE_DATA_BYTES = LINE_DATA_WORDS * WORD_BYTES;
    /** Byte offset of the flag word inside a line. */
    public static final int LINE_FLAG_OFFSET = LINE_DATA_WORDS * WORD_BYTES;
    /** Lines in one group: a warp of 32 lanes x 16 bytes stores 4 whole lines. */
    public static final int LINES_PER_GROUP = 4;
    /** Most line groups in one row: one LSE line per lane of a warp (the kernel's lanes store and poll them so). */
    public static final int MAX_GROUPS = 32;
    /** Most bytes of data in one row slice (head_dim x element size): 32 groups x 4 lines x 15 words x 8 bytes. */
    public static final int MAX_ROW_DATA_BYTES = MAX_GROUPS * LINES_PER_GROUP * LINE_DATA_BYTES;
    /** A row slice's bytes must be a multiple of this (the kernel moves 16-byte parts). */
    public static final int ROW_DATA_GRANULE = 16;
    /** A row slice must start at a multiple of this many bytes (the kernel loads 8-byte words). */
    public static final int ROW_ALIGNMENT = 8;

    /** Bytes in one LSE line. */
    public static final int LSE_LINE_BYTES = 16;
    /** Byte offset of the LSE value (fp32 bits) in an LSE line. */
    public static final int LSE_VALUE_OFFSET = 0;
    /** Byte offset of the first flag copy in an LSE line. */
    public static final int LSE_FLAG1_OFFSET = 4;
    /** Byte offset of the zero word in an LSE line. */
    public static final int LSE_ZERO_OFFSET = 8;
    /** Byte offset of the second flag copy in an LSE line. */
    public static final int LSE_FLAG2_OFFSET = 12;

    /** High word of every data-line flag where readers zero the flags they consume: "LL12". */
    public static final long FLAG_TAG = 0x4C4C3132_00000000L;
    /** Set in every group's flag key, so that a keyed data flag is never zero. */
    public static final long FLAG_KEY_BIT = 0x8000_0000_0000_0000L;

    /**
     * The engine's status word (one u32 per engine, in host memory the kernel writes) once a call timed out or found
     * its rank's workspace poisoned; it stays so until the host clears it at the reset. The ranks' metadata say what.
     */
    public static final int STATUS_FAILED = 1;

    /**
     * Receivers poll and merge sources in batches of this many (cp up to 64 in 8 batches): the tiled kernel's receive
     * warps, and the variant kernels' merge items, which load a batch's words at once.
     */
    public static final int SOURCE_BATCH = 8;
    /** Threads in a block of either kernel: 8 warps (in the tiled one the first SEND_WARPS send, the rest receive). */
    public static final int BLOCK_THREADS = 256;
    /** Sending warps in one block (the rest of the block's warps receive). */
    public static final int SEND_WARPS = 4;
    /** Input chunks (up to 4 line groups, 1920 bytes, of one row slice) a sending warp stages in shared memory. */
    public static final int SEND_STAGES = 3;
    /**
     * Shared memory the row kernel stages a step's lines of every source in (docs/CUDA.md): it runs only where
     * cp x data lines x 128 fits, and takes several rows at once where that many times fits.
     */
    public static final int ROW_STAGE_BYTES = 32768;
    /**
     * Dynamic shared memory of one team of the row kernel (BLOCK_THREADS threads; a block holds one team or several):
     * its stage, the step's LSE values and weights, and a few words (the kernel asserts that they fit).
     */
    public static final int ROW_SHARED_BYTES = ROW_STAGE_BYTES + 4096;
    /**
     * Most rows in one receive tile of the tiled kernel (a block's receivers finish a tile together; the send window
     * counts tiles), and in one step of the row kernel.
     */
    public static final int MAX_TILE_ROWS = 4;

    /**
     * The slot a call with this epoch uses where calls alternate the two slots: on the CPU engine, and on the GPU
     * where a group's ranks are in several launches (a launch that holds the whole group takes slot 0 for every call,
     * {@code engine.cuda.GridPlan.slotMask}; docs/PROTOCOL.md, "Why one slot suffices in one launch").
     *
     * @param epoch the call's counter
     * @return 0 or 1
     */
    public static int slot(int epoch) {
        return epoch & 1;
    }

    /**
     * The flag word of every data line of the call with this epoch: the tag | u32(epoch + 1); never zero.
     *
     * @param epoch the call's counter
     * @return the flag word
     */
    public static long dataFlag(int epoch) {
        return FLAG_TAG | Integer.toUnsignedLong(epoch + 1);
    }

    /**
     * A group's key for its keyed data flags, from 64 random bits (the same on every rank of the group).
     *
     * @param randomBits random bits (a fresh {@code SecureRandom} long, or the XOR of every rank's)
     * @return the key: those bits with {@link #FLAG_KEY_BIT} set
     */
    public static long flagKey(long randomBits) {
        return randomBits | FLAG_KEY_BIT;
    }

    /**
     * The flag word of every data line of the call with this era and epoch where readers discard consumed lines
     * rather than zero their flags (the CUDA engine): key XOR (era &lt;&lt; 32 | u32(epoch)). Never zero (the key's
     * bit 63), and distinct for every (era, epoch) of one key, so no line an earlier call of the group left behind
     * matches; a value left by anything else (memory of an earlier allocation) matches only by chance, one in 2^63.
     *
     * @param key   the group's key ({@link #flagKey})
     * @param era   the call's era (the ticket's arrivals word &gt;&gt; ERA_SHIFT &amp; ERA_MASK)
     * @param epoch the call's counter
     * @return the flag word
     */
    public static long keyedDataFlag(long key, int era, int epoch) {
        return key ^ ((era & ERA_MASK) << 32 | Integer.toUnsignedLong(epoch));
    }

    /**
     * The flag of every LSE line of the call with this epoch: epoch + 1, or 1 where that wraps to 0.
     *
     * @param epoch the call's counter
     * @return the flag
     */
    public static int lseFlag(int epoch) {
        int flag = epoch + 1;
        return flag == 0 ? 1 : flag;
    }
}
