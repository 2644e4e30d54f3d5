package io.github.dcp4j.op;

/**
 * An argument of the op: elements of one dtype laid out by shape, strides and offset (all in elements), in host
 * memory ({@link TensorView}, the convenience path: a CUDA engine copies it to the device and back) or in device
 * memory ({@link DeviceTensor}: a CUDA engine reads and writes it in place, with no copy).
 */
public sealed interface Tensor permits TensorView, DeviceTensor {

    /**
     * The element type.
     *
     * @return the dtype of every element
     */
    DType dtype();

    /**
     * The size of each dimension.
     *
     * @return a copy of the sizes, outermost first
     */
    long[] shape();

    /**
     * The distance in elements between neighbours along each dimension.
     *
     * @return a copy of the strides, in elements, outermost first
     */
    long[] strides();

    /**
     * Where the view starts.
     *
     * @return the element index of the view's first element in its memory
     */
    long offset();

    /**
     * The number of dimensions.
     *
     * @return the shape's length
     */
    default int rank() {
        return shape().length;
    }

    /**
     * The size of one dimension.
     *
     * @param dim the dimension, {@code 0 <= dim < rank()}
     * @return its size
     */
    default long size(int dim) {
        return shape()[dim];
    }

    /**
     * The stride of one dimension.
     *
     * @param dim the dimension, {@code 0 <= dim < rank()}
     * @return its stride, in elements
     */
    default long stride(int dim) {
        return strides()[dim];
    }

    /**
     * The number of elements.
     *
     * @return the product of the sizes (1 for rank 0)
     */
    default long numel() {
        return Strides.numel(shape());
    }

    /**
     * Whether the view is row-major with no gaps (sizes of 1 may have any stride).
     *
     * @return true where the elements lie in order, one after another
     */
    default boolean isContiguous() {
        return Strides.isContiguous(shape(), strides());
    }

    /**
     * The element index of the view's last element (its largest, strides being non-negative); needs numel > 0.
     *
     * @return that index in the view's memory
     */
    default long lastElement() {
        return Strides.lastElement(shape(), strides(), offset());
    }
}
