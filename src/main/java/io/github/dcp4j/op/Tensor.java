package io.github.dcp4j.op;

/**
 * An argument of the op: elements of one dtype laid out by shape, strides and offset (all in elements), in host
 * memory ({@link TensorView}, the convenience path: a CUDA engine copies it to the device and back) or in device
 * memory ({@link DeviceTensor}: a CUDA engine reads and writes it in place, with no copy).
 */
public sealed interface Tensor permits TensorView, DeviceTensor {

    DType dtype();

    /** The size of each dimension (a copy). */
    long[] shape();

    /** The distance in elements between neighbours along each dimension (a copy). */
    long[] strides();

    /** The element index of the view's first element in its memory. */
    long offset();

    default int rank() {
        return shape().length;
    }

    default long size(int dim) {
        return shape()[dim];
    }

    default long stride(int dim) {
        return strides()[dim];
    }

    default long numel() {
        return Strides.numel(shape());
    }

    /** True when the view is row-major with no gaps (sizes of 1 may have any stride). */
    default boolean isContiguous() {
        return Strides.isContiguous(shape(), strides());
    }

    /** The element index of the view's last element (its largest, strides being non-negative); needs numel > 0. */
    default long lastElement() {
        return Strides.lastElement(shape(), strides(), offset());
    }
}
