package io.github.dcp4j.op;

import java.util.Arrays;
import java.util.Objects;

/**
 * A strided view of elements in GPU memory: element i of the memory lies at {@code address + i x dtype.bytes()}, and
 * the view's element at index (i0, i1, ...) is element {@code offset + i0 x strides[0] + i1 x strides[1] + ...}. The
 * view never copies and never owns the memory; the caller keeps it allocated while a call that uses it may run
 * (prepared calls and graphs hold the address).
 *
 * <p>Only the geometry is checked here. A CUDA engine checks the memory itself with the driver before anything is
 * launched: device memory of GPU {@code device}, which must be the GPU the rank runs on, and every element of the
 * view inside one allocation.
 *
 * @param address the device address of the memory (element 0), as {@code cuMemAlloc} or torch's
 *                {@code data_ptr() - storage_offset() x element_size()} gives it
 * @param device  the ordinal of the GPU that holds the memory
 * @param dtype   the element type
 * @param shape   the size of each dimension (defensively copied)
 * @param strides the distance in elements between neighbours along each dimension (defensively copied)
 * @param offset  the element index of the view's first element
 */
public record DeviceTensor(long address, int device, DType dtype, long[] shape, long[] strides, long offset)
        implements Tensor {

    /**
     * A device view, its geometry checked (the memory is checked by the engine, with the driver).
     *
     * @throws IllegalArgumentException for a null address, a negative ordinal or an invalid geometry
     */
    public DeviceTensor {
        Objects.requireNonNull(dtype, "dtype");
        shape = shape.clone();
        strides = strides.clone();
        if (address == 0) {
            throw new IllegalArgumentException("device address must not be 0 (null)");
        }
        if (device < 0) {
            throw new IllegalArgumentException("device ordinal must be >= 0; got " + device);
        }
        Strides.check(shape, strides, offset);
    }

    /**
     * A contiguous (row-major) view from the memory's first element.
     *
     * @param address the device address of element 0
     * @param device  the ordinal of the GPU that holds the memory
     * @param dtype   the element type
     * @param shape   the sizes, outermost first
     * @return the view
     */
    public static DeviceTensor contiguous(long address, int device, DType dtype, long... shape) {
        return new DeviceTensor(address, device, dtype, shape, Strides.contiguous(shape), 0);
    }

    /**
     * The device address of the view's first element.
     *
     * @return address + offset x element bytes
     */
    public long firstByte() {
        return address + offset * dtype.bytes();
    }

    /**
     * Bytes from the view's first element to the end of its last: the span that must lie inside one allocation.
     *
     * @return that span, 0 for an empty view
     */
    public long spanBytes() {
        return numel() == 0 ? 0 : (lastElement() + 1 - offset) * dtype.bytes();
    }

    /**
     * The same memory with dimensions reordered: dimension i of the result is dimension {@code order[i]} here.
     *
     * @param order a permutation of {@code 0 .. rank() - 1}
     * @return the reordered view
     */
    public DeviceTensor permute(int... order) {
        Strides.Geometry g = Strides.permute(shape, strides, order);
        return new DeviceTensor(address, device, dtype, g.shape(), g.strides(), offset);
    }

    /**
     * Splits dimension {@code dim} into {@code sizes} (their product must equal its size), as torch's unflatten.
     *
     * @param dim   the dimension to split
     * @param sizes the sizes it becomes, outermost first
     * @return the view with {@code sizes.length - 1} more dimensions
     */
    public DeviceTensor unflatten(int dim, long... sizes) {
        Strides.Geometry g = Strides.unflatten(shape, strides, dim, sizes);
        return new DeviceTensor(address, device, dtype, g.shape(), g.strides(), offset);
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    @Override
    public long[] strides() {
        return strides.clone();
    }

    @Override
    public boolean equals(Object o) {
        return this == o || o instanceof DeviceTensor t && address == t.address && device == t.device
                && dtype == t.dtype && Arrays.equals(shape, t.shape) && Arrays.equals(strides, t.strides)
                && offset == t.offset;
    }

    @Override
    public int hashCode() {
        return Objects.hash(address, device, dtype, Arrays.hashCode(shape), Arrays.hashCode(strides), offset);
    }

    @Override
    public String toString() {
        return "DeviceTensor[" + dtype + " shape=" + Arrays.toString(shape) + " strides=" + Arrays.toString(strides)
                + " offset=" + offset + " at 0x" + Long.toHexString(address) + " on GPU " + device + "]";
    }
}
