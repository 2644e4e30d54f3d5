package io.github.dcp4j.op;

import java.util.Arrays;

/**
 * The geometry both tensor kinds share: shape, strides and offset in elements, checked once here, and the views
 * that only rearrange them ({@code permute}, {@code unflatten}) computed once here.
 */
final class Strides {
    private Strides() {
    }

    /** Shape and strides of a view: one size and one stride per dimension. */
    record Geometry(long[] shape, long[] strides) {
    }

    /**
     * Checks a view's geometry: one stride per dimension, no negative size, stride or offset, at most 2^63 - 1
     * elements, and its last element's byte within 2^63 - 1.
     */
    static void check(long[] shape, long[] strides, long offset) {
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
        numel(shape);  // a view's element count is a long, as torch's is
        try {
            long last = offset;
            for (int i = 0; i < shape.length; i++) {
                if (shape[i] == 0) {
                    return;
                }
                last = Math.addExact(last, Math.multiplyExact(shape[i] - 1, strides[i]));
            }
            Math.multiplyExact(Math.addExact(last, 1), Long.BYTES);
        } catch (ArithmeticException e) {
            throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " strides "
                    + Arrays.toString(strides) + " offset " + offset + " reach past 2^63 bytes");
        }
    }

    static long[] contiguous(long... shape) {
        long[] strides = new long[shape.length];
        long s = 1;
        for (int i = shape.length - 1; i >= 0; i--) {
            strides[i] = s;
            s *= shape[i];
        }
        return strides;
    }

    /**
     * The product of the sizes (0 where any is 0, whatever the others).
     *
     * @throws IllegalArgumentException naming the shape where the product exceeds 2^63 - 1
     */
    static long numel(long... shape) {
        for (long d : shape) {
            if (d == 0) {
                return 0;
            }
        }
        long n = 1;
        try {
            for (long d : shape) {
                n = Math.multiplyExact(n, d);
            }
        } catch (ArithmeticException e) {
            throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " has more than " + Long.MAX_VALUE
                    + " elements");
        }
        return n;
    }

    /** The element index of the view's largest element (strides being non-negative); needs numel > 0. */
    static long lastElement(long[] shape, long[] strides, long offset) {
        long last = offset;
        for (int i = 0; i < shape.length; i++) {
            last += (shape[i] - 1) * strides[i];
        }
        return last;
    }

    /** Row-major with no gaps (sizes of 1 may have any stride). */
    static boolean isContiguous(long[] shape, long[] strides) {
        long expected = 1;
        for (int i = shape.length - 1; i >= 0; i--) {
            if (shape[i] != 1 && strides[i] != expected) {
                return false;
            }
            expected *= shape[i];
        }
        return true;
    }

    /** Dimension i of the result is dimension {@code order[i]} of the input. */
    static Geometry permute(long[] shape, long[] strides, int... order) {
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
        return new Geometry(newShape, newStrides);
    }

    /** Dimension {@code dim} split into {@code sizes} (their product must equal its size), as torch's unflatten. */
    static Geometry unflatten(long[] shape, long[] strides, int dim, long... sizes) {
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
        return new Geometry(newShape, newStrides);
    }
}
