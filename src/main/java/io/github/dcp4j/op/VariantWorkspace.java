package io.github.dcp4j.op;

import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.layout.WorkspaceLayout;

import java.util.ArrayList;
import java.util.Arrays;
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
        /** Checked: a layout some variant uses, a 128-byte aligned offset from 0, at least one line. */
        public Region {
            Objects.requireNonNull(layout, "layout");
            if (Arrays.stream(Variant.values()).filter(v -> v != Variant.AUTO)
                    .noneMatch(v -> v.layoutName().equals(layout))) {
                throw new IllegalArgumentException("a region's layout must be ll128, ll or fenced; got '" + layout
                        + "'");
            }
            if (offset < 0 || offset % REGION_ALIGNMENT != 0) {
                throw new IllegalArgumentException("the " + layout + " region's offset must be a multiple of "
                        + REGION_ALIGNMENT + " from 0; got " + offset);
            }
            if (bytes < REGION_ALIGNMENT) {
                throw new IllegalArgumentException("the " + layout + " region must have at least " + REGION_ALIGNMENT
                        + " bytes; got " + bytes);
            }
        }

        /** {@return the byte after the region} */
        long end() {
            return offset + bytes;
        }
    }

    /**
     * Checked: the regions come one after the other from offset 0 without overlapping, one per layout; a variant other
     * than auto has its own layout's region alone; auto has a region for every variant its crossovers may pick.
     */
    public VariantWorkspace {
        Objects.requireNonNull(variant, "variant");
        Objects.requireNonNull(crossovers, "crossovers");
        regions = List.copyOf(regions);
        if (regions.isEmpty()) {
            throw new IllegalArgumentException("a variant workspace has at least one region; got none");
        }
        if (regions.getFirst().offset() != 0) {
            throw new IllegalArgumentException("the first region must start at offset 0; got " + regions.getFirst());
        }
        for (int i = 1; i < regions.size(); i++) {
            Region before = regions.get(i - 1);
            Region r = regions.get(i);
            if (r.offset() < before.end()) {
                throw new IllegalArgumentException("regions must follow one another without overlapping; " + r
                        + " starts before the end of " + before);
            }
            if (regions.subList(0, i).stream().anyMatch(o -> o.layout().equals(r.layout()))) {
                throw new IllegalArgumentException("one region per layout; got two of " + r.layout() + ": "
                        + regions);
            }
        }
        List<Variant> needed = variant == Variant.AUTO
                ? crossovers.steps().stream().map(Crossovers.Step::variant).toList() : List.of(variant);
        for (Variant v : needed) {
            if (regions.stream().noneMatch(r -> r.layout().equals(v.layoutName()))) {
                throw new IllegalArgumentException("a workspace of " + variant + " needs a region of the "
                        + v.layoutName() + " layout, for " + v + "; got " + regions);
            }
        }
        if (variant != Variant.AUTO && regions.size() != 1) {
            throw new IllegalArgumentException("a workspace of " + variant + " has its one region; got " + regions);
        }
    }

    /**
     * The regions a group of {@code variant} needs for {@code spec}.
     *
     * @param variant    the variant the group is opened for
     * @param crossovers what auto picks by (for the other variants, {@link Crossovers#fallback()} is kept instead, so
     *                   that ranks on GPUs of different architectures open the same workspace)
     * @param spec       the largest call the group will make
     * @return the regions and their total size
     */
    public static VariantWorkspace of(Variant variant, Crossovers crossovers, WorkspaceSpec spec) {
        Objects.requireNonNull(spec, "spec");
        Objects.requireNonNull(variant, "variant");
        if (variant != Variant.AUTO) {
            return new VariantWorkspace(variant, Crossovers.fallback(),
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
     * The variant a call runs: the group's own; for auto, the one its crossovers pick by the call's bytes per rank, or,
     * where that variant's region cannot hold the call's rows ({@link Variant#rowsHeld}: an ll region holds fewer
     * rows of a call whose head_dim is not the spec's), the first of the crossovers' other variants whose region can.
     * A call no region holds is refused by the kernel call, naming the region.
     *
     * @param bytesPerRank   the call's rows x cp x head_dim x element size ({@link Crossovers#bytesPerRank})
     * @param rows           the call's rows
     * @param contractLayout the contract's layout for the call's row
     * @return a variant other than auto
     */
    public Variant choose(long bytesPerRank, int rows, WorkspaceLayout contractLayout) {
        if (variant != Variant.AUTO) {
            return variant;
        }
        Variant picked = crossovers.choose(bytesPerRank);
        if (holds(picked, rows, contractLayout)) {
            return picked;
        }
        return crossovers.steps().stream().map(Crossovers.Step::variant)
                .filter(v -> holds(v, rows, contractLayout)).findFirst().orElse(picked);
    }

    private boolean holds(Variant concrete, int rows, WorkspaceLayout contractLayout) {
        return concrete.rowsHeld(contractLayout, region(concrete).bytes()) >= rows;
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
