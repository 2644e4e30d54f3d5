package io.github.dcp4j.reference;

import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;

import java.util.List;

/**
 * The merge in fp64, written independently of {@link ExactMerge}: the ground truth that tests and the main job
 * measure every engine's error against.
 */
public final class Fp64Oracle {
    /**
     * Largest relative error (L2 norm, against this oracle) a bf16 or fp16 output may have: the output's rounding,
     * with room to spare. The main job, the benchmark and {@code check} hold every engine to it.
     */
    public static final double TOLERANCE = 1e-2;

    private Fp64Oracle() {
    }

    /**
     * Rank {@code dest}'s output as fp64, row-major {@code [rows, D]}.
     *
     * @param partialO   rank r's partial outputs at index r
     * @param partialLse rank r's log-sum-exps at index r
     * @param dest       the rank whose output this is
     * @param mode       the LSEs' base
     * @return the output, unrounded
     */
    public static double[] reduce(List<TensorView> partialO, List<TensorView> partialLse, int dest, LseMode mode) {
        int cp = partialO.size();
        TensorView o0 = partialO.get(0);
        long[] outShape = ReduceCall.outputShape(o0);
        int rows = (int) outShape[0];
        int d = (int) outShape[1];
        double[] result = new double[rows * d];
        double[] lse = new double[cp];
        double[] e = new double[cp];
        for (int row = 0; row < rows; row++) {
            double m = Double.NEGATIVE_INFINITY;
            for (int r = 0; r < cp; r++) {
                double l = partialLse.get(r).getFloat(lseIndex(partialLse.get(r), row, dest));
                lse[r] = Double.isNaN(l) || l == Double.POSITIVE_INFINITY ? Double.NEGATIVE_INFINITY : l;
                m = Math.max(m, lse[r]);
            }
            if (m == Double.NEGATIVE_INFINITY) {
                m = 0;
            }
            double denom = 0;
            for (int r = 0; r < cp; r++) {
                e[r] = mode == LseMode.BASE2 ? Math.pow(2, lse[r] - m) : Math.exp(lse[r] - m);
                denom += e[r];
            }
            for (int r = 0; r < cp; r++) {
                double w = denom == 0 ? 0 : e[r] / denom;
                TensorView o = partialO.get(r);
                long base = o.elementOffset(sliceIndex(o, row, dest));
                long step = o.stride(o.rank() - 1);
                for (int i = 0; i < d; i++) {
                    result[row * d + i] += w * o.loadFloat(base + i * step);
                }
            }
        }
        return result;
    }

    /** The coordinates of {@code partial_o[row, peer, 0]} in a view whose leading dims flatten to rows. */
    private static long[] sliceIndex(TensorView o, int row, int peer) {
        long[] idx = new long[o.rank()];
        unflattenRow(o.shape(), o.rank() - 2, row, idx);
        idx[o.rank() - 2] = peer;
        return idx;
    }

    private static long[] lseIndex(TensorView lse, int row, int peer) {
        long[] idx = new long[lse.rank()];
        unflattenRow(lse.shape(), lse.rank() - 1, row, idx);
        idx[lse.rank() - 1] = peer;
        return idx;
    }

    private static void unflattenRow(long[] shape, int leadingDims, long row, long[] idx) {
        for (int k = leadingDims - 1; k >= 0; k--) {
            idx[k] = row % shape[k];
            row /= shape[k];
        }
    }

    /**
     * The relative error of an output against the oracle.
     *
     * @param out an engine's output
     * @param ref the oracle's, row-major
     * @return ||out - ref||_2 / ||ref||_2 (0 when both are 0); NaN anywhere in out gives NaN
     */
    public static double relativeError(TensorView out, double[] ref) {
        double num = 0;
        double den = 0;
        long n = out.numel();
        for (long i = 0; i < n; i++) {
            double diff = out.loadFloat(out.offset() + i) - ref[(int) i];
            num += diff * diff;
            den += ref[(int) i] * ref[(int) i];
        }
        if (den == 0) {
            return num == 0 ? 0 : Double.POSITIVE_INFINITY;
        }
        return Math.sqrt(num / den);
    }
}
