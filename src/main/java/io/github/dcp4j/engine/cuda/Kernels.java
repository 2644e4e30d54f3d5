package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.KernelModule;
import io.github.dcp4j.layout.KernelAbi;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.Variant;
import jcuda.driver.CUfunction;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The op's kernels (a tiled and a row kernel per dtype, LSE base and launch capacity, KernelAbi.RANK_CAPACITIES), the
 * kernels of the other variants (op.Variant: ll, simple, and unfused's copy and merge kernels, built for the largest
 * capacity alone, which every launch fits: their size in the jar counts against the GPU bundle's limit) and the empty
 * launch-floor kernels (one per capacity), loaded on one GPU.
 */
final class Kernels implements AutoCloseable {
    /** The launch floor's kernel: empty, launched exactly as the op's (with a capacity suffix). */
    static final String EMPTY_KERNEL = "dcp4j_empty";

    private final CudaDevice device;
    private final KernelModule module;
    private final Map<String, CUfunction> kernels = new HashMap<>();
    private final int coResidentBlocks;
    private final int maxRowTeams;

    Kernels(CudaDevice device) {
        this.device = device;
        this.module = KernelModule.load(device);
        int fewestPerSm = Integer.MAX_VALUE;
        int fewestTeams = Integer.MAX_VALUE;
        for (int capacity : KernelAbi.RANK_CAPACITIES) {
            for (DType dtype : new DType[] {DType.FP16, DType.BF16}) {
                for (LseMode mode : LseMode.values()) {
                    List<String> names = new ArrayList<>();
                    names.add(kernelName(dtype, mode, capacity, false));
                    for (Variant v : List.of(Variant.LL, Variant.SIMPLE, Variant.UNFUSED)) {
                        if (capacity == KernelAbi.RANK_CAPACITIES.getLast()) {
                            names.addAll(kernelNames(v, dtype, mode, capacity, false));
                        }
                    }
                    for (String name : names) {
                        CUfunction f = kernels.computeIfAbsent(name, module::function);
                        fewestPerSm = Math.min(fewestPerSm, module.blocksPerSm(f, Ll128.BLOCK_THREADS, 0));
                    }
                    CUfunction row = allowTeams(kernelName(dtype, mode, capacity, true));
                    int perSm = module.blocksPerSm(row, Ll128.BLOCK_THREADS, Ll128.ROW_SHARED_BYTES);
                    fewestPerSm = Math.min(fewestPerSm, perSm);
                    int teams = Math.min(perSm, module.maxBlockThreads(row) / Ll128.BLOCK_THREADS);
                    while (teams > 1 && module.blocksPerSm(row, teams * Ll128.BLOCK_THREADS,
                            teams * Ll128.ROW_SHARED_BYTES) < 1) {
                        teams--;
                    }
                    fewestTeams = Math.min(fewestTeams, Math.max(1, teams));
                }
            }
            allowTeams(EMPTY_KERNEL + suffix(capacity));
        }
        this.coResidentBlocks = fewestPerSm * device.multiprocessors();
        this.maxRowTeams = fewestTeams;
    }

    /**
     * Loads {@code name}, a kernel launched with the row kernel's blocks of several teams (the row kernel, or the
     * empty one launched as it is), and lets it take as many teams' shared memory as its launch bounds allow teams.
     */
    private CUfunction allowTeams(String name) {
        CUfunction f = kernels.computeIfAbsent(name, module::function);
        module.allowDynamicShared(f, module.maxBlockThreads(f) / Ll128.BLOCK_THREADS * Ll128.ROW_SHARED_BYTES);
        return f;
    }

    static String kernelName(DType dtype, LseMode mode, int capacity, boolean rowKernel) {
        return (rowKernel ? "dcp4j_ll128row_" : "dcp4j_ll128_") + dtype.name().toLowerCase() + "_" + mode.spelling()
                + suffix(capacity);
    }

    /**
     * The launch capacity of {@code variant}'s kernels for a launch of {@code ranks} ranks: the smallest that fits for
     * ll128, the largest for the others (built for it alone).
     *
     * @param variant a variant other than auto
     * @param ranks   ranks in the launch
     * @return one of KernelAbi.RANK_CAPACITIES
     */
    static int capacity(Variant variant, int ranks) {
        return variant == Variant.LL128 ? KernelAbi.capacityFor(ranks) : KernelAbi.RANK_CAPACITIES.getLast();
    }

    /**
     * The kernels one call of {@code variant} launches, in order: one, or unfused's copy kernel and merge kernel.
     *
     * @param variant   a variant other than auto
     * @param dtype     the element type
     * @param mode      the LSEs' base
     * @param capacity  the launch's rank capacity
     * @param rowKernel for ll128: the row kernel, else the tiled one
     * @return the kernels' names
     */
    static List<String> kernelNames(Variant variant, DType dtype, LseMode mode, int capacity, boolean rowKernel) {
        String typed = "_" + dtype.name().toLowerCase() + "_" + mode.spelling() + suffix(capacity);
        return switch (variant) {
            case LL128 -> List.of(kernelName(dtype, mode, capacity, rowKernel));
            case LL -> List.of("dcp4j_ll" + typed);
            case SIMPLE -> List.of("dcp4j_simple" + typed);
            case UNFUSED -> List.of("dcp4j_unfusedcopy_" + dtype.name().toLowerCase() + suffix(capacity),
                    "dcp4j_unfusedmerge" + typed);
            case AUTO -> throw new IllegalArgumentException("auto launches the variant it picks; got auto");
        };
    }

    private static String suffix(int capacity) {
        return "_r" + capacity;
    }

    CudaDevice device() {
        return device;
    }

    /**
     * The kernels one call of {@code variant} launches, in order ({@link #kernelNames}).
     */
    List<CUfunction> kernels(Variant variant, DType dtype, LseMode mode, int capacity, boolean rowKernel) {
        return kernelNames(variant, dtype, mode, capacity, rowKernel).stream().map(kernels::get).toList();
    }

    /** The empty kernel with the same parameter as the op's kernels ({@link #kernels}) of that capacity. */
    CUfunction empty(int capacity) {
        return kernels.get(EMPTY_KERNEL + suffix(capacity));
    }

    /**
     * Most blocks resident at once on this GPU, for whichever of the op's kernels a call launches (the fewest over
     * them): every grid is sized within it, and nothing else checks it, since the launch is not cooperative.
     */
    int coResidentBlocks() {
        return coResidentBlocks;
    }

    /**
     * Most teams (Ll128.BLOCK_THREADS threads each, GridPlan.teams) one block of the row kernel can hold on this GPU:
     * as many as fit on one SM, within the kernel's launch bounds.
     */
    int maxRowTeams() {
        return maxRowTeams;
    }

    /** Where the kernels came from (cubin for this GPU or PTX). */
    String source() {
        return module.source();
    }

    @Override
    public void close() {
        module.close();
    }
}
