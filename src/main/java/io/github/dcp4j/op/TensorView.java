package io.github.dcp4j.op;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Objects;

/**
 * A strided view of little-endian elements in host memory: shape, strides and offset, all in elements, as a torch
 * tensor view. The view never copies; {@link #permute} and {@link #unflatten} give new views of the same memory.
 * A CUDA engine copies host views to the device and back (the convenience path); {@link DeviceTensor} is the view
 * of memory already on the GPU.
 *
 * @param memory  the memory the view reads and writes
 * @param dtype   the element type
 * @param shape   the size of each dimension (defensively copied)
 * @param strides the distance in elements between neighbours along each dimension (defensively copied)
 * @param offset  the element index of the view's first element in {@code memory}
 */
public record TensorView(MemorySegment memory, DType dtype, long[] shape, long[] strides, long offset)
        implements Tensor {

    static final ValueLayout.OfShort HALF = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** Alignment of memory that {@link #allocate} hands out: a whole LL128 line, as the kernels like it. */
    public static final long ALLOCATION_ALIGNMENT = 128;

    /**
     * A view of {@code memory}, checked: the shape, strides and offset must be valid and the last element inside the
     * memory.
     *
     * @throws IllegalArgumentException naming the geometry and the memory's size where they do not fit
     */
    public TensorView {
        Objects.requireNonNull(memory, "memory");
        Objects.requireNonNull(dtype, "dtype");
        shape = shape.clone();
        strides = strides.clone();
        Strides.check(shape, strides, offset);
        if (numel(shape) > 0) {
            long endByte = (Strides.lastElement(shape, strides, offset) + 1) * dtype.bytes();
            if (endByte > memory.byteSize()) {
                throw new IllegalArgumentException("view shape " + Arrays.toString(shape) + " strides "
                        + Arrays.toString(strides) + " offset " + offset + " of " + dtype + " needs " + endByte
                        + " bytes; memory has " + memory.byteSize());
            }
        }
    }

    /**
     * {@code tensor} as a host view, for engines that read and write host memory.
     *
     * @param tensor   an argument of the op
     * @param argument its name, for the message
     * @param engine   the engine's name, for the message
     * @return {@code tensor} itself, where it is a host view
     * @throws IllegalArgumentException where it is a {@link DeviceTensor}, naming {@code argument} and {@code engine}
     */
    public static TensorView host(Tensor tensor, String argument, String engine) {
        return switch (tensor) {
            case TensorView v -> v;
            case DeviceTensor d -> throw new IllegalArgumentException(argument + " must be in host memory (a"
                    + " TensorView) for the " + engine + " engine; got " + d);
        };
    }

    /**
     * Refuses a view whose memory was freed (its arena closed): an engine that copies or reads it later would fail
     * there, half-way through a call.
     *
     * @param argument the view's name, for the message
     * @throws IllegalStateException where the memory was freed, naming {@code argument}
     */
    public void requireAlive(String argument) {
        if (!memory.scope().isAlive()) {
            throw new IllegalStateException(argument + " is in memory that was freed (its arena is closed)");
        }
    }

    /**
     * A contiguous (row-major) view of {@code memory} from its first byte.
     *
     * @param memory host memory large enough for the shape
     * @param dtype  the element type
     * @param shape  the sizes, outermost first
     * @return the view
     */
    public static TensorView contiguous(MemorySegment memory, DType dtype, long... shape) {
        return new TensorView(memory, dtype, shape, contiguousStrides(shape), 0);
    }

    /**
     * A contiguous tensor in fresh, zeroed native memory of {@code arena}, 128-byte aligned.
     *
     * @param arena where the memory comes from (and when it is freed)
     * @param dtype the element type
     * @param shape the sizes, outermost first
     * @return the view of the new memory
     */
    public static TensorView allocate(Arena arena, DType dtype, long... shape) {
        long bytes = Math.max(1, numel(shape) * dtype.bytes());
        return contiguous(arena.allocate(bytes, ALLOCATION_ALIGNMENT), dtype, shape);
    }

    /**
     * A contiguous copy of this view in fresh native memory of {@code arena}, element by element.
     *
     * @param arena where the copy's memory comes from
     * @return the copy, with this view's dtype and shape
     */
    public TensorView contiguousCopy(Arena arena) {
        TensorView copy = allocate(arena, dtype, shape);
        long[] index = new long[shape.length];
        for (long i = 0, n = numel(); i < n; i++) {
            copy.storeFloat(i, loadFloat(elementOffset(index)));
            for (int k = shape.length - 1; k >= 0 && ++index[k] == shape[k]; k--) {
                index[k] = 0;
            }
        }
        return copy;
    }

    /**
     * The row-major strides of a shape.
     *
     * @param shape the sizes, outermost first
     * @return the strides, in elements, of a contiguous view of that shape
     */
    public static long[] contiguousStrides(long... shape) {
        return Strides.contiguous(shape);
    }

    /**
     * The number of elements of a shape.
     *
     * @param shape the sizes
     * @return their product (1 for no dimension)
     * @throws IllegalArgumentException naming the shape where the product exceeds 2^63 - 1
     */
    public static long numel(long... shape) {
        return Strides.numel(shape);
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    @Override
    public long[] strides() {
        return strides.clone();
    }

    /**
     * The same memory with dimensions reordered: dimension i of the result is dimension {@code order[i]} here.
     *
     * @param order a permutation of {@code 0 .. rank() - 1}
     * @return the reordered view
     */
    public TensorView permute(int... order) {
        Strides.Geometry g = Strides.permute(shape, strides, order);
        return new TensorView(memory, dtype, g.shape(), g.strides(), offset);
    }

    /**
     * Splits dimension {@code dim} into {@code sizes} (their product must equal its size), as torch's unflatten.
     *
     * @param dim   the dimension to split
     * @param sizes the sizes it becomes, outermost first
     * @return the view with {@code sizes.length - 1} more dimensions
     */
    public TensorView unflatten(int dim, long... sizes) {
        Strides.Geometry g = Strides.unflatten(shape, strides, dim, sizes);
        return new TensorView(memory, dtype, g.shape(), g.strides(), offset);
    }

    /**
     * The element index in {@link #memory()} of the element at {@code index}.
     *
     * @param index one coordinate per dimension, each within its size
     * @return offset + the sum of index x stride
     */
    public long elementOffset(long... index) {
        if (index.length != shape.length) {
            throw new IllegalArgumentException("index " + Arrays.toString(index) + " must have " + shape.length
                    + " coordinates");
        }
        long e = offset;
        for (int i = 0; i < index.length; i++) {
            if (index[i] < 0 || index[i] >= shape[i]) {
                throw new IndexOutOfBoundsException("index " + Arrays.toString(index) + " outside shape "
                        + Arrays.toString(shape));
            }
            e += index[i] * strides[i];
        }
        return e;
    }

    /**
     * The element at {@code index} as an fp32 value (exact for all three dtypes).
     *
     * @param index one coordinate per dimension
     * @return the element's value
     */
    public float getFloat(long... index) {
        return loadFloat(elementOffset(index));
    }

    /**
     * Stores {@code value} at {@code index}, rounded to nearest even for fp16 and bf16.
     *
     * @param value the value
     * @param index one coordinate per dimension
     */
    public void setFloat(float value, long... index) {
        storeFloat(elementOffset(index), value);
    }

    /**
     * The element at element index {@code element} of {@link #memory()}, as fp32.
     *
     * @param element an element index of the memory (not of the view's coordinates)
     * @return its value
     */
    public float loadFloat(long element) {
        long byteOffset = element * dtype.bytes();
        return dtype == DType.FP32 ? memory.get(FLOAT, byteOffset)
                : Halves.toFloat(dtype, memory.get(HALF, byteOffset));
    }

    /**
     * Stores {@code value} at element index {@code element} of {@link #memory()}, rounded to nearest even for fp16
     * and bf16.
     *
     * @param element an element index of the memory
     * @param value   the value
     */
    public void storeFloat(long element, float value) {
        long byteOffset = element * dtype.bytes();
        if (dtype == DType.FP32) {
            memory.set(FLOAT, byteOffset, value);
        } else {
            memory.set(HALF, byteOffset, Halves.fromFloat(dtype, value));
        }
    }

    /**
     * The raw 16-bit pattern at element index {@code element} (fp16 and bf16 views).
     *
     * @param element an element index of the memory
     * @return its bits
     */
    public short loadBits(long element) {
        return memory.get(HALF, element * 2);
    }

    /**
     * Stores a raw 16-bit pattern at element index {@code element} (fp16 and bf16 views).
     *
     * @param element an element index of the memory
     * @param bits    the bits
     */
    public void storeBits(long element, short bits) {
        memory.set(HALF, element * 2, bits);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TensorView v && memory.equals(v.memory) && dtype == v.dtype
                && Arrays.equals(shape, v.shape) && Arrays.equals(strides, v.strides) && offset == v.offset;
    }

    @Override
    public int hashCode() {
        return Objects.hash(memory, dtype, Arrays.hashCode(shape), Arrays.hashCode(strides), offset);
    }

    @Override
    public String toString() {
        return "TensorView[" + dtype + " shape=" + Arrays.toString(shape) + " strides=" + Arrays.toString(strides)
                + " offset=" + offset + "]";
    }
}
