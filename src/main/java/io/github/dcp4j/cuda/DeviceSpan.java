package io.github.dcp4j.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * What the driver knows of a device address: the kind of memory, its GPU, its context and the allocation that holds it,
 * from one
 * {@code cuPointerGetAttributes} call (FFM, in the libcuda JCuda uses; JCuda binds only the one-attribute form, and
 * not for every attribute). Used to refuse a caller's pointer before anything is launched with it.
 *
 * @param memoryType    {@code CUmemorytype}: {@link #DEVICE} for device memory, {@link #HOST} for pinned host memory
 * @param deviceOrdinal the GPU whose memory it is
 * @param context       the raw {@code CUcontext} the memory was allocated in; 0 for memory that belongs to no context
 *                      (virtual memory management mappings, as caching allocators' expandable segments make)
 * @param rangeStart    the first byte of the allocation that holds the address
 * @param rangeBytes    the allocation's size in bytes
 */
public record DeviceSpan(int memoryType, int deviceOrdinal, long context, long rangeStart, long rangeBytes) {
    /** {@code CUmemorytype} values (cuda.h 13.0). */
    public static final int HOST = 1;
    public static final int DEVICE = 2;

    /** {@code CUpointer_attribute} values (cuda.h 13.0), in the order the attributes are asked for. */
    private static final int[] ATTRIBUTES = {
        2,   // CU_POINTER_ATTRIBUTE_MEMORY_TYPE: u32
        1,   // CU_POINTER_ATTRIBUTE_CONTEXT: CUcontext
        9,   // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: i32
        11,  // CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: u64
        12,  // CU_POINTER_ATTRIBUTE_RANGE_SIZE: u64
    };
    /** The memory type the driver reports for an address it knows no allocation at (its attributes' default). */
    private static final int UNKNOWN = 0;
    /**
     * {@code CUDA_ERROR_INVALID_VALUE}: what the one-attribute form answers where the driver knows no allocation;
     * taken the same way should this form answer it.
     */
    private static final int INVALID_VALUE = 1;

    /** Looked up on first use only, so that loading this class needs no driver. */
    private static final class Driver {
        static final MethodHandle GET_ATTRIBUTES = Cuda.driverFunction("cuPointerGetAttributes",
                FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG), "the pointer checks need it");
    }

    /**
     * The driver's view of {@code address}, or null where it knows no allocation there (host memory that CUDA did
     * not allocate or register, a freed allocation, another process's address). Call on a device thread.
     *
     * @param address any device address
     * @return the allocation that holds it, or null
     */
    public static DeviceSpan query(long address) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment attributes = arena.allocateFrom(JAVA_INT, ATTRIBUTES);
            MemorySegment values = arena.allocate(JAVA_LONG, ATTRIBUTES.length);  // one 8-byte slot each
            MemorySegment data = arena.allocate(ADDRESS, ATTRIBUTES.length);
            for (int i = 0; i < ATTRIBUTES.length; i++) {
                data.setAtIndex(ADDRESS, i, values.asSlice(i * JAVA_LONG.byteSize()));
            }
            int result;
            try {
                result = (int) Driver.GET_ATTRIBUTES.invokeExact(ATTRIBUTES.length, attributes, data, address);
            } catch (RuntimeException | Error e) {
                throw e;
            } catch (Throwable t) {
                throw new IllegalStateException("cuPointerGetAttributes", t);
            }
            if (result == INVALID_VALUE) {
                return null;
            }
            Cuda.check(result, "cuPointerGetAttributes(0x" + Long.toHexString(address) + ")");
            int type = values.getAtIndex(JAVA_INT, 0);
            if (type == UNKNOWN) {
                return null;
            }
            int ordinal = values.getAtIndex(JAVA_INT, 4);
            return new DeviceSpan(type, ordinal, values.getAtIndex(JAVA_LONG, 1), values.getAtIndex(JAVA_LONG, 3),
                    values.getAtIndex(JAVA_LONG, 4));
        }
    }

    /**
     * Whether {@code bytes} from {@code first} lie inside this allocation.
     *
     * @param first the span's first byte
     * @param bytes its length
     * @return true where the whole span is inside
     */
    public boolean contains(long first, long bytes) {
        return first >= rangeStart && bytes >= 0 && first - rangeStart <= rangeBytes - bytes;
    }
}
