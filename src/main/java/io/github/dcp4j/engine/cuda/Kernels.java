package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.KernelModule;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import jcuda.driver.CUfunction;

import java.util.EnumMap;
import java.util.Map;

/** The op's kernels (one per dtype and LSE base) and the empty launch-floor kernel, loaded on one GPU. */
final class Kernels implements AutoCloseable {
    /** The launch floor's kernel: empty, launched exactly as the op's. */
    static final String EMPTY_KERNEL = "dcp4j_empty";

    private final CudaDevice device;
    private final KernelModule module;
    private final Map<DType, Map<LseMode, CUfunction>> kernels = new EnumMap<>(DType.class);
    private final CUfunction empty;
    private final int coResidentBlocks;

    Kernels(CudaDevice device) {
        this.device = device;
        this.module = KernelModule.load(device);
        for (DType dtype : new DType[] {DType.FP16, DType.BF16}) {
            Map<LseMode, CUfunction> byMode = new EnumMap<>(LseMode.class);
            for (LseMode mode : LseMode.values()) {
                byMode.put(mode, module.function(kernelName(dtype, mode)));
            }
            kernels.put(dtype, byMode);
        }
        this.empty = module.function(EMPTY_KERNEL);
        int fewest = Integer.MAX_VALUE;
        for (Map<LseMode, CUfunction> byMode : kernels.values()) {
            for (CUfunction kernel : byMode.values()) {
                fewest = Math.min(fewest, module.coResidentBlocks(kernel, Ll128.BLOCK_THREADS));
            }
        }
        this.coResidentBlocks = fewest;
    }

    static String kernelName(DType dtype, LseMode mode) {
        return "dcp4j_ll128_" + dtype.name().toLowerCase() + "_" + mode.spelling();
    }

    CudaDevice device() {
        return device;
    }

    CUfunction kernel(DType dtype, LseMode mode) {
        return kernels.get(dtype).get(mode);
    }

    CUfunction empty() {
        return empty;
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
