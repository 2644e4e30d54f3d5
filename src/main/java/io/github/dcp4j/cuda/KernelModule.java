package io.github.dcp4j.cuda;

import jcuda.driver.CUfunction;
import jcuda.driver.CUfunction_attribute;
import jcuda.driver.CUmodule;
import jcuda.driver.JCudaDriver;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;

/**
 * The op's kernels, loaded from the jar: SASS for the device's architecture where the build made it (sm_90, sm_100),
 * otherwise the compute_90 PTX, which the driver compiles for the device.
 */
public final class KernelModule implements AutoCloseable {
    static final String RESOURCE_DIR = "/io/github/dcp4j/cuda/kernels/";
    static final String BASENAME = "dcp_lse_reduce";

    private final CudaDevice device;
    private final CUmodule module = new CUmodule();
    private final String source;
    private boolean closed;

    private KernelModule(CudaDevice device) {
        this.device = device;
        String sass = RESOURCE_DIR + BASENAME + ".sm_" + device.computeCapability() + ".cubin";
        String ptx = RESOURCE_DIR + BASENAME + ".compute_90.ptx";
        byte[] image = resource(sass);
        String from = sass;
        if (image == null) {
            byte[] text = resource(ptx);
            if (text == null) {
                throw new IllegalStateException("the jar holds no CUDA kernels (" + sass + " / " + ptx + "): it was"
                        + " built with -Dkernels.skip or without nvcc; rebuild it with nvcc to use the GPU engine");
            }
            image = new byte[text.length + 1];
            System.arraycopy(text, 0, image, 0, text.length);
            from = ptx + " (JIT)";
        }
        byte[] loaded = image;
        device.run(() -> Cuda.check(JCudaDriver.cuModuleLoadData(module, loaded), "cuModuleLoadData(" + sass + ")"));
        this.source = from;
    }

    /**
     * The kernels built into the jar for this GPU's architecture, loaded into its context.
     *
     * @param device the GPU
     * @return the module; close it to unload
     */
    public static KernelModule load(CudaDevice device) {
        return new KernelModule(device);
    }

    private static byte[] resource(String name) {
        try (InputStream in = KernelModule.class.getResourceAsStream(name)) {
            return in == null ? null : in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** {@return which image was loaded (for reports)} */
    public String source() {
        return source;
    }

    /**
     * The kernel named {@code name}.
     *
     * @param name the kernel's {@code extern "C"} name
     * @return its function handle
     */
    public CUfunction function(String name) {
        return device.call(() -> {
            CUfunction f = new CUfunction();
            Cuda.check(JCudaDriver.cuModuleGetFunction(f, module, name), "cuModuleGetFunction(" + name + ")");
            return f;
        });
    }

    /**
     * Blocks of {@code function} resident at once on one SM.
     *
     * @param function      the kernel
     * @param blockThreads  threads per block
     * @param dynamicShared dynamic shared memory per block, bytes
     * @return blocks per SM (0 where such a block cannot run at all)
     */
    public int blocksPerSm(CUfunction function, int blockThreads, int dynamicShared) {
        return device.call(() -> {
            int[] perSm = new int[1];
            Cuda.check(JCudaDriver.cuOccupancyMaxActiveBlocksPerMultiprocessor(perSm, function, blockThreads,
                    dynamicShared), "cuOccupancyMaxActiveBlocksPerMultiprocessor");
            return perSm[0];
        });
    }

    /**
     * Most threads a block of {@code function} may have (its launch bounds).
     *
     * @param function the kernel
     * @return threads
     */
    public int maxBlockThreads(CUfunction function) {
        return device.call(() -> {
            int[] threads = new int[1];
            Cuda.check(JCudaDriver.cuFuncGetAttribute(threads,
                    CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function), "cuFuncGetAttribute");
            return threads[0];
        });
    }

    /**
     * Lets launches of {@code function} ask for up to {@code bytes} of dynamic shared memory per block (above 48 KiB
     * the driver refuses a launch unless the function allows it).
     *
     * @param function the kernel
     * @param bytes    dynamic shared memory per block, bytes
     */
    public void allowDynamicShared(CUfunction function, int bytes) {
        device.run(() -> Cuda.check(JCudaDriver.cuFuncSetAttribute(function,
                CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes), "cuFuncSetAttribute"));
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            device.run(() -> Cuda.check(JCudaDriver.cuModuleUnload(module), "cuModuleUnload"));
        }
    }
}
