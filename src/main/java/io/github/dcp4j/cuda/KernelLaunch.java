package io.github.dcp4j.cuda;

import jcuda.driver.CUfunction;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemoryLayout.PathElement;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * One kernel launch, prepared once and queued any number of times through {@code cuLaunchKernelEx}, which JCuda does
 * not bind (called here through the FFM API, in the libcuda JCuda uses). The launch allows programmatic dependent
 * launch: the grid may be scheduled while the previous kernel of its stream still runs, once every block of that
 * kernel has executed {@code griddepcontrol.launch_dependents} (or exited), so the kernel must execute
 * {@code griddepcontrol.wait} before it touches memory that earlier work of the stream writes. It is not cooperative:
 * under MPS a cooperative launch forgoes the early start (docs/PERFORMANCE.md), and the caller keeps its grid within
 * the co-resident capacity itself (docs/CUDA.md). The native structs are built once; {@link #queue()} is one
 * downcall. Can be captured into a CUDA graph like any launch.
 */
public final class KernelLaunch implements AutoCloseable {
    /** {@code CUlaunchAttribute} (cuda.h 13.0): an id, then a 64-byte union; the attribute used here is an int. */
    private static final StructLayout ATTRIBUTE = MemoryLayout.structLayout(
            JAVA_INT.withName("id"),
            MemoryLayout.paddingLayout(4),
            JAVA_INT.withName("value"),
            MemoryLayout.paddingLayout(60));
    /** {@code CUlaunchConfig} (cuda.h 13.0). */
    private static final StructLayout CONFIG = MemoryLayout.structLayout(
            JAVA_INT.withName("gridDimX"),
            JAVA_INT.withName("gridDimY"),
            JAVA_INT.withName("gridDimZ"),
            JAVA_INT.withName("blockDimX"),
            JAVA_INT.withName("blockDimY"),
            JAVA_INT.withName("blockDimZ"),
            JAVA_INT.withName("sharedMemBytes"),
            MemoryLayout.paddingLayout(4),
            ADDRESS.withName("hStream"),
            ADDRESS.withName("attrs"),
            JAVA_INT.withName("numAttrs"),
            MemoryLayout.paddingLayout(4));
    /** {@code CUlaunchAttributeID} value (cuda.h 13.0). */
    private static final int ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;

    /**
     * A launch's shape.
     *
     * @param grid          blocks in the grid
     * @param blockThreads  threads per block
     * @param dynamicShared dynamic shared memory per block, bytes (above 48 KiB the function must allow it)
     */
    public record Shape(int grid, int blockThreads, int dynamicShared) {
    }

    /** Looked up on first use only, so that loading this class needs no driver. */
    private static final class Driver {
        static final MethodHandle LAUNCH_KERNEL_EX = Cuda.driverFunction("cuLaunchKernelEx",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, ADDRESS), "CUDA >= 11.8");
    }

    private final Arena arena = Arena.ofShared();
    private final Structs structs;

    /** The native arguments of one {@code cuLaunchKernelEx}. */
    private record Structs(MemorySegment config, MemorySegment function, MemorySegment params) {
        static Structs allocate(Arena arena, CUfunction function, Shape shape, byte[] args, CudaStream stream) {
            MemorySegment attribute = arena.allocate(ATTRIBUTE);
            attribute.set(JAVA_INT, offset(ATTRIBUTE, "id"), ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
            attribute.set(JAVA_INT, offset(ATTRIBUTE, "value"), 1);
            MemorySegment config = arena.allocate(CONFIG);
            config.set(JAVA_INT, offset(CONFIG, "gridDimX"), shape.grid());
            config.set(JAVA_INT, offset(CONFIG, "gridDimY"), 1);
            config.set(JAVA_INT, offset(CONFIG, "gridDimZ"), 1);
            config.set(JAVA_INT, offset(CONFIG, "blockDimX"), shape.blockThreads());
            config.set(JAVA_INT, offset(CONFIG, "blockDimY"), 1);
            config.set(JAVA_INT, offset(CONFIG, "blockDimZ"), 1);
            config.set(JAVA_INT, offset(CONFIG, "sharedMemBytes"), shape.dynamicShared());
            config.set(ADDRESS, offset(CONFIG, "hStream"), MemorySegment.ofAddress(stream.address()));
            config.set(ADDRESS, offset(CONFIG, "attrs"), attribute);
            config.set(JAVA_INT, offset(CONFIG, "numAttrs"), 1);
            MemorySegment image = arena.allocate(args.length, 16);
            image.copyFrom(MemorySegment.ofArray(args));
            MemorySegment params = arena.allocate(ADDRESS);
            params.set(ADDRESS, 0, image);
            return new Structs(config, MemorySegment.ofAddress(Cuda.address(function)), params);
        }

        void queue() {
            int result;
            try {
                result = (int) Driver.LAUNCH_KERNEL_EX.invokeExact(config, function, params, MemorySegment.NULL);
            } catch (RuntimeException | Error e) {
                throw e;
            } catch (Throwable t) {
                throw new IllegalStateException("cuLaunchKernelEx", t);
            }
            Cuda.check(result, "cuLaunchKernelEx");
        }
    }

    /**
     * A launch, its structures built once in this object's arena, to be queued as often as wanted.
     *
     * @param function the kernel
     * @param shape    its grid, blocks and shared memory
     * @param args     the kernel's only parameter, as its bytes (copied)
     * @param stream   where the launch is queued
     */
    public KernelLaunch(CUfunction function, Shape shape, byte[] args, CudaStream stream) {
        this.structs = Structs.allocate(arena, function, shape, args, stream);
    }

    /**
     * Queues one launch with structures that live for this call only, in memory confined to the calling thread
     * (which must be the device's): no shared arena to set up and close, for launches made once.
     *
     * @param function the kernel
     * @param shape    its grid, blocks and shared memory
     * @param args     the kernel's only parameter, as its bytes (copied)
     * @param stream   where the launch is queued
     */
    public static void queueOnce(CUfunction function, Shape shape, byte[] args, CudaStream stream) {
        try (Arena once = Arena.ofConfined()) {
            Structs.allocate(once, function, shape, args, stream).queue();
        }
    }

    private static long offset(StructLayout layout, String field) {
        return layout.byteOffset(PathElement.groupElement(field));
    }

    /** Queues the launch on its stream; call on the device's thread (the driver's current context). */
    public void queue() {
        structs.queue();
    }

    /** Frees the native structs (the launches already queued keep their own copy of the parameter). */
    @Override
    public void close() {
        arena.close();
    }
}
