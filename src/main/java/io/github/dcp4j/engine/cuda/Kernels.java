package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.KernelModule;
import io.github.dcp4j.layout.KernelAbi;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import jcuda.driver.CUfunction;

import java.util.HashMap;
import java.util.Map;

/**
 * The op's kernels (a tiled and a row kernel per dtype, LSE base and launch capacity, KernelAbi.RANK_CAPACITIES) and
 * the empty launch-floor kernels (one per capacity), loaded on one GPU.
 */
final class Kernels implements AutoCloseable {
    /** The launch floor's kernel: empty, launched exactly as the op's (with a capacity suffix). */
    static final String EMPTY_KERNEL = "dcp4j_empty";

    private final CudaDevice device;
    private final KernelModule module;
    private final Map<String, CUfunction> kernels = new HashMap<>();
    private final int coResidentBlocks;

    Kernels(CudaDevice device) {
        this.device = device;
        this.module = KernelModule.load(device);
        int fewest = Integer.MAX_VALUE;
        for (int capacity : KernelAbi.RANK_CAPACITIES) {
            for (DType dtype : new DType[] {DType.FP16, DType.BF16}) {
                for (LseMode mode : LseMode.values()) {
                    for (boolean rowKernel : new boolean[] {false, true}) {
                        String name = kernelName(dtype, mode, capacity, rowKernel);
                        CUfunction f = module.function(name);
                        kernels.put(name, f);
                        fewest = Math.min(fewest, module.coResidentBlocks(f, Ll128.BLOCK_THREADS));
                    }
                }
            }
            String empty = EMPTY_KERNEL + suffix(capacity);
            kernels.put(empty, module.function(empty));
        }
        this.coResidentBlocks = fewest;
    }

    static String kernelName(DType dtype, LseMode mode, int capacity, boolean rowKernel) {
        return (rowKernel ? "dcp4j_ll128row_" : "dcp4j_ll128_") + dtype.name().toLowerCase() + "_" + mode.spelling()
                + suffix(capacity);
    }

    private static String suffix(int capacity) {
        return "_r" + capacity;
    }

    CudaDevice device() {
        return device;
    }

    /**
     * The op's kernel for launches of up to {@code capacity} ranks: the row kernel (each block takes its rows one at a
     * time, every source of a row staged in shared memory, docs/CUDA.md) or the tiled one.
     */
    CUfunction kernel(DType dtype, LseMode mode, int capacity, boolean rowKernel) {
        return kernels.get(kernelName(dtype, mode, capacity, rowKernel));
    }

    /** The empty kernel with the same parameter as {@link #kernel}'s of that capacity. */
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

    /** Where the kernels came from (cubin for this GPU or PTX). */
    String source() {
        return module.source();
    }

    @Override
    public void close() {
        module.close();
    }
}
