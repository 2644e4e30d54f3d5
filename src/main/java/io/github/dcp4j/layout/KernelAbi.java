package io.github.dcp4j.layout;

import java.util.List;

/**
 * The kernel's only parameter, defined once: {@code engine.cuda.CudaHeader} generates its C++ declaration (with
 * {@code static_assert}s on every offset) from these lists, and the CUDA engine writes its bytes with these offsets.
 * Every field is 8 bytes (a pointer or an int64), so nothing is padded. The whole parameter is passed by value
 * ({@code __grid_constant__}): a block reads its rank's arguments and every destination's workspace address from
 * the launch's constant bank, with no dependent load from global memory before its first store.
 *
 * <pre>
 *   LaunchArgs&lt;kRanks&gt;, kRanks in {@link #RANK_CAPACITIES}
 *   0                                    LAUNCH_FIELDS.size() x 8
 *   +------------------------------------+-------------------------------+-------------------------------------+
 *   | launch fields (geometry, layout,   | workspaces[MAX_RANKS]         | ranks[kRanks]                       |
 *   | timeout, grid plan, status word)   | rank d's workspace address,   | RankArgs of each rank in the launch |
 *   |                                    | as mapped in this process     | (RANK_ARGS, 8 bytes each field)     |
 *   +------------------------------------+-------------------------------+-------------------------------------+
 * </pre>
 *
 * One table of workspace addresses serves every rank of a launch: the ranks of one launch run in one process, where
 * every rank sees a peer's workspace at the same address.
 */
public final class KernelAbi {
    private KernelAbi() {
    }

    /**
     * One 8-byte field: its C++ type and name.
     *
     * @param cType the field's type in the kernel's struct
     * @param name  its name there
     */
    public record Field(String cType, String name) {
    }

    /** Per-rank arguments: the rank's tensors (element strides) and its index in the group. */
    public static final List<Field> RANK_ARGS = List.of(
            new Field("const void*", "partial_o"),
            new Field("const float*", "partial_lse"),
            new Field("void*", "out"),
            new Field("long long", "o_stride_token"),
            new Field("long long", "o_stride_head"),
            new Field("long long", "o_stride_peer"),
            new Field("long long", "lse_stride_token"),
            new Field("long long", "lse_stride_head"),
            new Field("long long", "lse_stride_peer"),
            new Field("long long", "rank"));

    /**
     * Launch-wide arguments: the engine's status word, geometry, layout sizes, the timeout, the grid plan (blocks per
     * rank, receive tile rows, the send window in tiles, whether receivers load every line again once they have seen
     * all its batch's flags, as NCCL's LL128 receiver does, whether the senders' input copies are marked first to
     * leave L2, for inputs larger than L2), whether the next launch may start early (programmatic
     * dependent launch), whether every row start is 16-byte aligned (16-byte input copies and output stores) and
     * the slot mask (a call's slot is its epoch AND the mask: 1, the slots alternate; 0, every call takes slot 0), and
     * the group's flag key ({@link Ll128#keyedDataFlag}).
     * A {@code *_magic} field lets the kernel divide by heads, line groups and cp - 1 with a multiply-high: the
     * multiplier in the low 32 bits, the shift in the high ones ({@link #divisorMagic}).
     */
    public static final List<Field> LAUNCH_FIELDS = List.of(
            new Field("unsigned int*", "status"),
            new Field("long long", "ranks_in_launch"),
            new Field("long long", "blocks_per_rank"),
            new Field("long long", "cp"),
            new Field("long long", "rows"),
            new Field("long long", "heads"),
            new Field("long long", "heads_magic"),
            new Field("long long", "max_rows"),
            new Field("long long", "data_words"),
            new Field("long long", "data_lines"),
            new Field("long long", "line_groups"),
            new Field("long long", "groups_magic"),
            new Field("long long", "peers_magic"),
            new Field("long long", "data_slot_bytes"),
            new Field("long long", "lse_region_offset"),
            new Field("long long", "lse_slot_bytes"),
            new Field("long long", "timeout_ns"),
            new Field("long long", "early_dependents"),
            new Field("long long", "tile_rows"),
            new Field("long long", "send_window"),
            new Field("long long", "reload_lines"),
            new Field("long long", "stream_inputs"),
            new Field("long long", "vector16"),
            new Field("long long", "slot_mask"),
            new Field("long long", "flag_key"));

    /** The kernels are built for launches of at most this many ranks; a launch picks the smallest that fits. */
    public static final List<Integer> RANK_CAPACITIES = List.of(8, Ll128.MAX_RANKS);

    /** Every field is 8 bytes: the struct has no padding to reason about. */
    public static final int FIELD_BYTES = 8;

    /**
     * Byte offset of {@code name} in {@code fields}.
     *
     * @param fields a struct's fields, in order
     * @param name   one of them
     * @return its byte offset
     */
    public static int offset(List<Field> fields, String name) {
        for (int i = 0; i < fields.size(); i++) {
            if (fields.get(i).name().equals(name)) {
                return i * FIELD_BYTES;
            }
        }
        throw new IllegalArgumentException("no kernel argument named " + name);
    }

    /**
     * The size of a struct of {@code fields}.
     *
     * @param fields the struct's fields
     * @return its bytes
     */
    public static int size(List<Field> fields) {
        return fields.size() * FIELD_BYTES;
    }

    /** {@return the byte offset of {@code workspaces[0]} in the launch parameter} */
    public static int workspacesOffset() {
        return size(LAUNCH_FIELDS);
    }

    /** {@return the byte offset of {@code ranks[0]} in the launch parameter} */
    public static int ranksOffset() {
        return workspacesOffset() + Ll128.MAX_RANKS * FIELD_BYTES;
    }

    /**
     * Bytes of the launch parameter built for {@code capacity} ranks.
     *
     * @param capacity one of {@link #RANK_CAPACITIES}
     * @return its size
     */
    public static int launchArgsBytes(int capacity) {
        return ranksOffset() + capacity * size(RANK_ARGS);
    }

    /**
     * The multiplier (low 32 bits) and shift (high 32 bits) with which {@code n / d == umulhi(n, multiplier) >> shift}
     * for every {@code 0 <= n < 2^31} (0 for {@code d == 1}, which the kernel does not divide by).
     *
     * @param d the divisor, at least 1
     * @return the multiplier and shift, packed
     */
    public static long divisorMagic(int d) {
        if (d < 1) {
            throw new IllegalArgumentException("divisor must be >= 1; got " + d);
        }
        if (d == 1) {
            return 0;
        }
        int log2 = 32 - Integer.numberOfLeadingZeros(d - 1);
        int p = 31 + log2;
        long multiplier = ((1L << p) + d - 1) / d;
        return multiplier | (long) (p - 32) << 32;
    }

    /**
     * n / d as the kernel computes it from {@link #divisorMagic}.
     *
     * @param n     the dividend, {@code 0 <= n < 2^31}
     * @param d     the divisor
     * @param magic {@code divisorMagic(d)}
     * @return the quotient
     */
    public static int divide(int n, int d, long magic) {
        if (d == 1) {
            return n;
        }
        long high = (Integer.toUnsignedLong(n) * (magic & 0xFFFF_FFFFL)) >>> 32;
        return (int) (high >>> (magic >>> 32));
    }

    /**
     * The smallest capacity that holds {@code ranks} ranks in one launch.
     *
     * @param ranks ranks in one launch
     * @return one of {@link #RANK_CAPACITIES}
     */
    public static int capacityFor(int ranks) {
        for (int c : RANK_CAPACITIES) {
            if (ranks <= c) {
                return c;
            }
        }
        throw new IllegalArgumentException("a launch holds at most " + Ll128.MAX_RANKS + " ranks; got " + ranks);
    }
}
