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
 *
 * @param memory  the memory the view reads and writes
 * @param dtype   the element type
 * @param shape   the size of each dimension (defensively copied)
 * @param strides the distance in elements between neighbours along each dimension (defensively copied)
 * @param offset  the element index of the view's first element in {@code memory}
 */
public record TensorView(MemorySegment memory, DType dtype, long[] shape, long[] strides, long offset) {

    static final ValueLayout.OfShort HALF = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** Alignment of memory that {@link #allocate} hands out: a whole LL128 line, as the kernels like it. */
    public static final long ALLOCATION_ALIGNMENT = 128;

    public TensorView {
        Objects.requireNonNull(memory, "memory");
        Objects.requireNonNull(dtype, "dtype");
        shape = shape.clone();
        strides = strides.clone();
        if (shape.length != strides.length) {
            throw new IllegalArgumentException("strides " + Arrays.toString(strides) + " must have one entry per"
                    + " dimension of shape " + Arrays.toString(shape));
        }
        for (int i = 0; i < shape.length; i++) {
            if (shape[i] < 0) {
                throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " has a negative size");
            }
            if (strides[i] < 0) {
                throw new IllegalArgumentException("strides " + Arrays.toString(strides)
                        + " has a negative stride; only non-negative strides are supported");
            }
        }
        if (offset < 0) {
            throw new IllegalArgumentException("offset must be >= 0; got " + offset);
        }
        if (numel(shape) > 0) {
            long endByte = (lastElement(shape, strides, offset) + 1) * dtype.bytes();
            if (endByte > memory.byteSize()) {
                throw new IllegalArgumentException("view shape " + Arrays.toString(shape) + " strides "
                        + Arrays.toString(strides) + " offset " + offset + " of " + dtype + " needs " + endByte
                        + " bytes; memory has " + memory.byteSize());
            }
        }
    }

    /** A contiguous (row-major) view of {@code memory} from its first byte. */
    public static TensorView contiguous(MemorySegment memory, DType dtype, long... shape) {
        return new TensorView(memory, dtype, shape, contiguousStrides(shape), 0);
    }

    /** A contiguous tensor in fresh, zeroed native memory of {@code arena}, 128-byte aligned. */
    public static TensorView allocate(Arena arena, DType dtype, long... shape) {
        long bytes = Math.max(1, numel(shape) * dtype.bytes());
        return contiguous(arena.allocate(bytes, ALLOCATION_ALIGNMENT), dtype, shape);
    }

    /** A contiguous copy of this view in fresh native memory of {@code arena}, element by element. */
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

    /** The element index of the view's last element (its largest, strides being non-negative); needs numel > 0. */
    public long lastElement() {
        return lastElement(shape, strides, offset);
    }

    private static long lastElement(long[] shape, long[] strides, long offset) {
        long last = offset;
        for (int i = 0; i < shape.length; i++) {
            last += (shape[i] - 1) * strides[i];
        }
        return last;
    }

    public static long[] contiguousStrides(long... shape) {
        long[] strides = new long[shape.length];
        long s = 1;
        for (int i = shape.length - 1; i >= 0; i--) {
            strides[i] = s;
            s *= shape[i];
        }
        return strides;
    }

    public static long numel(long... shape) {
        long n = 1;
        for (long d : shape) {
            n = Math.multiplyExact(n, d);
        }
        return n;
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    @Override
    public long[] strides() {
        return strides.clone();
    }

    public int rank() {
        return shape.length;
    }

    public long size(int dim) {
        return shape[dim];
    }

    public long stride(int dim) {
        return strides[dim];
    }

    public long numel() {
        return numel(shape);
    }

    /** True when the view is row-major with no gaps (sizes of 1 may have any stride). */
    public boolean isContiguous() {
        long expected = 1;
        for (int i = shape.length - 1; i >= 0; i--) {
            if (shape[i] != 1 && strides[i] != expected) {
                return false;
            }
            expected *= shape[i];
        }
        return true;
    }

    /** The same memory with dimensions reordered: dimension i of the result is dimension {@code order[i]} here. */
    public TensorView permute(int... order) {
        if (order.length != shape.length) {
            throw new IllegalArgumentException("permute order " + Arrays.toString(order) + " must name each of "
                    + shape.length + " dimensions once");
        }
        long[] newShape = new long[order.length];
        long[] newStrides = new long[order.length];
        boolean[] seen = new boolean[order.length];
        for (int i = 0; i < order.length; i++) {
            int d = order[i];
            if (d < 0 || d >= order.length || seen[d]) {
                throw new IllegalArgumentException("permute order " + Arrays.toString(order)
                        + " must name each of " + shape.length + " dimensions once");
            }
            seen[d] = true;
            newShape[i] = shape[d];
            newStrides[i] = strides[d];
        }
        return new TensorView(memory, dtype, newShape, newStrides, offset);
    }

    /** Splits dimension {@code dim} into {@code sizes} (their product must equal its size), as torch's unflatten. */
    public TensorView unflatten(int dim, long... sizes) {
        if (dim < 0 || dim >= shape.length) {
            throw new IllegalArgumentException("unflatten dim must be in [0, " + shape.length + "); got " + dim);
        }
        if (numel(sizes) != shape[dim]) {
            throw new IllegalArgumentException("unflatten sizes " + Arrays.toString(sizes) + " must multiply to "
                    + shape[dim] + ", the size of dimension " + dim);
        }
        long[] newShape = new long[shape.length + sizes.length - 1];
        long[] newStrides = new long[newShape.length];
        System.arraycopy(shape, 0, newShape, 0, dim);
        System.arraycopy(strides, 0, newStrides, 0, dim);
        long inner = strides[dim];
        for (int i = sizes.length - 1; i >= 0; i--) {
            newShape[dim + i] = sizes[i];
            newStrides[dim + i] = inner;
            inner *= sizes[i];
        }
        System.arraycopy(shape, dim + 1, newShape, dim + sizes.length, shape.length - dim - 1);
        System.arraycopy(strides, dim + 1, newStrides, dim + sizes.length, shape.length - dim - 1);
        return new TensorView(memory, dtype, newShape, newStrides, offset);
    }

    /** The element index in {@link #memory()} of the element at {@code index}. */
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

    /** The element at {@code index} as an fp32 value (exact for all three dtypes). */
    public float getFloat(long... index) {
        return loadFloat(elementOffset(index));
    }

    /** Stores {@code value} at {@code index}, rounded to nearest even for fp16 and bf16. */
    public void setFloat(float value, long... index) {
        storeFloat(elementOffset(index), value);
    }

    /** The element at element index {@code element} of {@link #memory()}, as fp32. */
    public float loadFloat(long element) {
        long byteOffset = element * dtype.bytes();
        return dtype == DType.FP32 ? memory.get(FLOAT, byteOffset)
                : Halves.toFloat(dtype, memory.get(HALF, byteOffset));
    }

    /** Stores {@code value} at element index {@code element} of {@link #memory()}. */
    public void storeFloat(long element, float value) {
        long byteOffset = element * dtype.bytes();
        if (dtype == DType.FP32) {
            memory.set(FLOAT, byteOffset, value);
        } else {
            memory.set(HALF, byteOffset, Halves.fromFloat(dtype, value));
        }
    }

    /** The raw 16-bit pattern at element index {@code element} (fp16 and bf16 views). */
    public short loadBits(long element) {
        return memory.get(HALF, element * 2);
    }

    /** Stores a raw 16-bit pattern at element index {@code element} (fp16 and bf16 views). */
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
