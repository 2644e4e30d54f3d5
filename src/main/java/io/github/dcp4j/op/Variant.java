package io.github.dcp4j.op;

import io.github.dcp4j.layout.FencedLayout;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.layout.LlLayout;
import io.github.dcp4j.layout.WorkspaceLayout;

import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * Which protocol moves the slices (docs/PROTOCOL.md draws each one's wire format). Every variant runs behind the same
 * call, the same validation and the same merge: its outputs equal {@code reference.ExactMerge}'s, and so each
 * other's, bit for bit. Chosen when a group is opened; {@link #AUTO} picks one of the others per call from the call's
 * bytes per rank ({@link Crossovers}).
 */
public enum Variant {
    /** One fused kernel; 128-byte lines of 15 data words and a flag word. The default. */
    LL128("ll128"),
    /** One fused kernel; 8-byte lines of 4 data bytes and a 4-byte flag (NCCL's LL): for the smallest calls. */
    LL("ll"),
    /** One fused kernel; slices copied raw with 16-byte stores, then one release flag per (source, chunk). */
    SIMPLE("simple"),
    /** Two kernels: a copy kernel moves every slice to its owner (a flag per chunk), then a merge kernel. */
    UNFUSED("unfused"),
    /** One of the others per call, by the call's bytes per rank ({@link Crossovers}). */
    AUTO("auto");

    private final String spelling;

    Variant(String spelling) {
        this.spelling = spelling;
    }

    /** {@return the name on the command line and in the reports} */
    public String spelling() {
        return spelling;
    }

    /**
     * The variant named {@code name}.
     *
     * @param name ll128, ll, simple, unfused or auto
     * @return that variant
     * @throws IllegalArgumentException for any other name, quoting it
     */
    public static Variant parse(String name) {
        for (Variant v : values()) {
            if (v.spelling.equals(name == null ? null : name.toLowerCase(Locale.ROOT))) {
                return v;
            }
        }
        throw new IllegalArgumentException("variant must be one of " + Arrays.stream(values())
                .map(Variant::spelling).collect(Collectors.joining(", ")) + "; got '" + name + "'");
    }

    /**
     * Bytes of one rank's workspace for this variant: the contract's ({@link WorkspaceSpec#bytes()}) for ll128,
     * simple and unfused, {@link LlLayout#bytes()} for ll. For auto, {@link VariantWorkspace} adds up the variants it
     * may pick.
     *
     * @param spec the largest call the group will make
     * @return the workspace's size in bytes, the same on every rank
     * @throws IllegalArgumentException for {@link #AUTO}, whose size depends on the variants it may pick
     */
    public long workspaceBytes(WorkspaceSpec spec) {
        return switch (this) {
            case LL128, SIMPLE, UNFUSED -> spec.bytes();
            case LL -> new LlLayout(spec.cpSize(), spec.maxRows(), spec.rowLayout()).bytes();
            case AUTO -> throw new IllegalArgumentException("auto's workspace size depends on the variants its"
                    + " crossovers may pick: use VariantWorkspace.of(Variant.AUTO, crossovers, spec).bytes()");
        };
    }

    /**
     * The rows per source and slot that a region of {@code regionBytes} holds in this variant's layout, for a call whose
     * contract layout is {@code contractLayout} (the contract's workspace at the call's head_dim): at most that
     * layout's max rows, fewer where the region is smaller (an ll region sized for one head_dim holds fewer rows of
     * a call with another, its rows carrying a flag per 4 bytes). It is the kernels' {@code max_rows}; a call of
     * more rows does not fit the region.
     *
     * @param contractLayout the contract's layout for the call's row
     * @param regionBytes    the region's size
     * @return the rows, 0 where not one fits
     * @throws IllegalArgumentException for {@link #AUTO}, which has no layout of its own
     */
    public int rowsHeld(WorkspaceLayout contractLayout, long regionBytes) {
        long rowBytes = switch (this) {
            case LL128 -> contractLayout.row().rowBytes();
            case LL -> LlLayout.rowBytes(contractLayout.row());
            case SIMPLE, UNFUSED -> FencedLayout.rowBytes(contractLayout.row());
            case AUTO -> throw new IllegalArgumentException("auto has no layout of its own: each variant it picks"
                    + " uses its own");
        };
        long perRow = (long) Ll128.NUM_SLOTS * contractLayout.cpSize() * rowBytes;
        return (int) Math.min(contractLayout.maxRows(), Math.max(0, regionBytes - Ll128.PAYLOAD_OFFSET) / perRow);
    }

    /**
     * The workspace layout this variant's kernels use: variants with the same layout may share a workspace from call
     * to call, others may not (a flag word of one can lie where another leaves data).
     *
     * @return ll128, ll or fenced (simple and unfused)
     * @throws IllegalArgumentException for {@link #AUTO}, which has no layout of its own
     */
    public String layoutName() {
        return switch (this) {
            case LL128 -> "ll128";
            case LL -> "ll";
            case SIMPLE, UNFUSED -> "fenced";
            case AUTO -> throw new IllegalArgumentException("auto has no layout of its own: each variant it picks"
                    + " uses its own");
        };
    }

    @Override
    public String toString() {
        return spelling;
    }
}
