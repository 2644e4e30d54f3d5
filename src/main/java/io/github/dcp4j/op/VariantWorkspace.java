package io.github.dcp4j.op;

import io.github.dcp4j.layout.Ll128;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Where each variant's workspace lies in one rank's buffer. A group opened for one variant has one region, the
 * variant's own workspace at offset 0 ({@link Variant#workspaceBytes}: the contract's size except for ll). A group
 * opened for {@link Variant#AUTO} has one region per layout its crossovers may pick ({@link Variant#layoutName()}),
 * one after the other, each 128-byte aligned with its own metadata (call counter, timeout record): calls of
 * different layouts never share bytes, since a flag word of one layout can lie where another leaves data, and the
 * "every flag is zero between calls" argument (docs/PROTOCOL.md) holds within one layout only.
 *
 * @param variant    the variant the group was opened for
 * @param crossovers what auto picks by ({@link Crossovers#fallback()} where the variant is not auto; unused then)
 * @param regions    one per layout, in order
 */
public record VariantWorkspace(Variant variant, Crossovers crossovers, List<Region> regions) {
    /** Where a region may start: on a line boundary, as a workspace does, so that its lines are whole lines. */
    static final int REGION_ALIGNMENT = Ll128.LINE_BYTES;


    /**
     * One layout's workspace inside the buffer.
     *
     * @param layout its {@link Variant#layoutName()}
     * @param offset its start in the buffer, 128-byte aligned
     * @param bytes  its size
     */
    public record Region(String layout, long offset, long bytes) {
    }

    /** Checked: at least one region. */
    public VariantWorkspace {
        Objects.requireNonNull(variant, "variant");
        Objects.requireNonNull(crossovers, "crossovers");
        regions = List.copyOf(regions);
        if (regions.isEmpty()) {
            throw new IllegalArgumentException("a variant workspace has at least one region; got none");
        }
    }

    /**
     * The regions a group of {@code variant} needs for {@code spec}.
     *
     * @param variant    the variant the group is opened for
     * @param crossovers what auto picks by (ignored for the other variants)
     * @param spec       the largest call the group will make
     * @return the regions and their total size
     */
    public static VariantWorkspace of(Variant variant, Crossovers crossovers, WorkspaceSpec spec) {
        Objects.requireNonNull(spec, "spec");
        if (variant != Variant.AUTO) {
            return new VariantWorkspace(variant, crossovers,
                    List.of(new Region(variant.layoutName(), 0, variant.workspaceBytes(spec))));
        }
        List<Region> regions = new ArrayList<>();
        long offset = 0;
        for (Crossovers.Step s : crossovers.steps()) {
            String layout = s.variant().layoutName();
            if (regions.stream().noneMatch(r -> r.layout().equals(layout))) {
                long bytes = s.variant().workspaceBytes(spec);
                regions.add(new Region(layout, offset, bytes));
                offset = Math.addExact(offset, Math.ceilDiv(bytes, REGION_ALIGNMENT) * REGION_ALIGNMENT);
            }
        }
        return new VariantWorkspace(variant, crossovers, regions);
    }

    /** {@return the bytes of one rank's buffer: the end of the last region} */
    public long bytes() {
        Region last = regions.getLast();
        return last.offset() + last.bytes();
    }

    /**
     * The variant a call runs: the group's own, or for auto the one its crossovers pick.
     *
     * @param bytesPerRank the call's rows x cp x head_dim x element size
     * @return a variant other than auto
     */
    public Variant choose(long bytesPerRank) {
        return variant == Variant.AUTO ? crossovers.choose(bytesPerRank) : variant;
    }

    /**
     * The region a variant's calls use.
     *
     * @param concrete a variant this workspace was made for (not auto)
     * @return its region
     * @throws IllegalArgumentException where this workspace has no region for it
     */
    public Region region(Variant concrete) {
        String layout = concrete.layoutName();
        return regions.stream().filter(r -> r.layout().equals(layout)).findFirst().orElseThrow(
                () -> new IllegalArgumentException("this workspace, made for " + variant + ", has no region for "
                        + concrete));
    }
}
