package io.github.dcp4j.cuda;

import jcuda.NativePointerObject;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUresult;
import jcuda.driver.CUstream;
import jcuda.driver.JCudaDriver;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.reflect.Field;

/**
 * Entry to the CUDA driver through JCuda. Every driver call in dcp4j goes through {@link #check}, which names the
 * failing call; JCuda's JVM-global exception switch is never touched (an embedding application owns it).
 */
public final class Cuda {
    private Cuda() {
    }

    /**
     * Whether the driver can be used here, and if not, why.
     *
     * @param available   whether JCuda's natives load, the driver initialises and a GPU is present
     * @param deviceCount the GPUs visible (0 where not available)
     * @param reason      why not, or what was found
     */
    public record Availability(boolean available, int deviceCount, String reason) {
    }

    private static volatile Availability availability;

    /**
     * Loads JCuda's natives, initialises the driver and counts devices, once. Never throws: a machine without
     * libcuda, without a driver or without a GPU gets {@code available() == false} and the reason.
     *
     * @return what was found
     */
    public static Availability availability() {
        Availability a = availability;
        if (a == null) {
            synchronized (Cuda.class) {
                a = availability;
                if (a == null) {
                    a = probe();
                    availability = a;
                }
            }
        }
        return a;
    }

    private static Availability probe() {
        try {
            int init = JCudaDriver.cuInit(0);
            if (init != CUresult.CUDA_SUCCESS) {
                return new Availability(false, 0, "cuInit failed: " + CUresult.stringFor(init));
            }
            int[] count = new int[1];
            int r = JCudaDriver.cuDeviceGetCount(count);
            if (r != CUresult.CUDA_SUCCESS) {
                return new Availability(false, 0, "cuDeviceGetCount failed: " + CUresult.stringFor(r));
            }
            if (count[0] == 0) {
                return new Availability(false, 0, "the CUDA driver reports no GPU");
            }
            return new Availability(true, count[0], "");
        } catch (UnsatisfiedLinkError | NoClassDefFoundError | ExceptionInInitializerError e) {
            String detail = String.valueOf(e.getMessage()).lines().findFirst().orElse("");
            return new Availability(false, 0, "JCuda's natives do not load (no NVIDIA driver / libcuda here): "
                    + detail);
        }
    }

    /**
     * Throws a {@link CudaException} naming {@code call} unless {@code result} is CUDA_SUCCESS.
     *
     * @param result the driver call's {@code CUresult}
     * @param call   the call, for the message
     */
    public static void check(int result, String call) {
        if (result != CUresult.CUDA_SUCCESS) {
            throw new CudaException(call, result);
        }
    }

    private static final Field NATIVE_POINTER;

    static {
        try {
            NATIVE_POINTER = NativePointerObject.class.getDeclaredField("nativePointer");
            NATIVE_POINTER.setAccessible(true);
        } catch (NoSuchFieldException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /**
     * The raw address a JCuda pointer object holds (a device address for a {@link CUdeviceptr}).
     *
     * @param p a JCuda pointer object
     * @return its address
     */
    public static long address(NativePointerObject p) {
        try {
            return NATIVE_POINTER.getLong(p);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * A downcall handle to the driver function {@code name} of the libcuda JCuda uses (for what JCuda does not
     * bind); {@code missing} says what its absence means. Look it up on first use, so that loading a class needs no
     * driver.
     */
    static MethodHandle driverFunction(String name, FunctionDescriptor descriptor, String missing) {
        return Linker.nativeLinker().downcallHandle(SymbolLookup.libraryLookup("libcuda.so.1", Arena.global())
                .find(name).orElseThrow(() -> new IllegalStateException("libcuda has no " + name + " (" + missing
                        + ")")), descriptor);
    }

    /**
     * A JCuda stream for a raw {@code CUstream} handle (0 is the legacy default stream).
     *
     * @param handle the raw handle
     * @return a JCuda stream object holding it
     */
    public static CUstream stream(long handle) {
        CUstream s = new CUstream();
        try {
            NATIVE_POINTER.setLong(s, handle);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
        return s;
    }

    /**
     * A JCuda device pointer for a raw device address.
     *
     * @param deviceAddress the address
     * @return a JCuda pointer holding it
     */
    public static CUdeviceptr pointer(long deviceAddress) {
        return new CUdeviceptr().withByteOffset(deviceAddress);
    }
}
