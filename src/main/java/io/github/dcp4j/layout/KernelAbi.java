package io.github.dcp4j.layout;

import java.util.List;

/**
 * The kernel's argument structs, defined once: {@link CudaHeader} generates their C++ declarations (with
 * {@code static_assert}s on every offset) from these lists, and the CUDA engine writes them with these offsets.
 * Every field is 8 bytes (a pointer or an int64), so the structs have no padding.
 *
 * <pre>
 * RankArgs: one per rank in a launch, in device memory (an array the launch args point to)
 * LaunchArgs: the kernel's only parameter, passed by value
 * </pre>
 */
public final class KernelAbi {
    private KernelAbi() {
    }

    /** One 8-byte field: its C++ type and name. */
    public record Field(String cType, String name) {
    }

    /**
     * Per-rank arguments: tensors, element strides and workspaces of one rank. {@code workspace} is this rank's own
     * workspace; rank d's workspace is at {@code peers[d] + peer_offset} (the peer array holds the base addresses of
     * the peers' buffers as mapped in this rank's process, as the reference's buffer pointers and offset).
     */
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
            new Field("unsigned char*", "workspace"),
            new Field("unsigned char* const*", "peers"),
            new Field("long long", "peer_offset"),
            new Field("long long", "rank"));

    /**
     * Launch-wide arguments: geometry, layout sizes, the timeout, and whether the blocks let the stream's next launch
     * start early (programmatic dependent launch).
     */
    public static final List<Field> LAUNCH_ARGS = List.of(
            new Field("const RankArgs*", "ranks"),
            new Field("long long", "ranks_in_launch"),
            new Field("long long", "blocks_per_rank"),
            new Field("long long", "cp"),
            new Field("long long", "rows"),
            new Field("long long", "heads"),
            new Field("long long", "max_rows"),
            new Field("long long", "head_dim"),
            new Field("long long", "data_words"),
            new Field("long long", "data_lines"),
            new Field("long long", "line_groups"),
            new Field("long long", "data_slot_bytes"),
            new Field("long long", "lse_region_offset"),
            new Field("long long", "lse_slot_bytes"),
            new Field("long long", "timeout_ns"),
            new Field("long long", "early_dependents"));

    public static final int FIELD_BYTES = 8;

    /** Byte offset of {@code name} in {@code fields}. */
    public static int offset(List<Field> fields, String name) {
        for (int i = 0; i < fields.size(); i++) {
            if (fields.get(i).name().equals(name)) {
                return i * FIELD_BYTES;
            }
        }
        throw new IllegalArgumentException("no kernel argument named " + name);
    }

    public static int size(List<Field> fields) {
        return fields.size() * FIELD_BYTES;
    }
}
