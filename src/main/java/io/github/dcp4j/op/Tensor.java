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

    int rank();

    long size(int dim);

    long stride(int dim);

    long numel();

    /** True when the view is row-major with no gaps (sizes of 1 may have any stride). */
    boolean isContiguous();

    /** The element index of the view's last element (its largest, strides being non-negative); needs numel > 0. */
    long lastElement();
}
