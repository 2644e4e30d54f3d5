package io.github.dcp4j.op;

/**
 * The exponential of the merge weights, {@code 2^x} or {@code e^x} for {@code x = lse - max <= 0}, defined by IEEE
 * fp32 operations alone (multiply, fused multiply-add, round to integer, exact subtraction, one multiply by a power
 * of two), so that every engine computes the same weight bit for bit: the CPU engine here, the CUDA kernel with the
 * same steps and the same constants (generated into its header from this class).
 *
 * <ol>
 *   <li>{@code y = x} (base 2) or {@code y = x * LOG2_E} (base e), in fp32; below {@link #ZERO_BELOW} (and for
 *       -inf) the result is 0: such a weight is below 2^-126 of the largest, which is 1.</li>
 *   <li>{@code n = rint(y)}, {@code f = y - n} (exact), {@code f} in [-1/2, 1/2].</li>
 *   <li>{@code 2^f = p(f)}, p the Taylor polynomial of {@code e^(f ln 2)} of degree {@link #TAYLOR_DEGREE}, evaluated
 *       by Horner steps with fused multiply-adds (a few ulps of fp32).</li>
 *   <li>{@code 2^y = p(f) x 2^n}, one fp32 multiply by the power of two.</li>
 * </ol>
 * A handful of dependent fp32 instructions: cheap on the GPU's critical path, where a row's weights are computed
 * once the last LSE has arrived.
 */
public final class WeightExp {
    private WeightExp() {
    }

    /** log2(e), the fp32 nearest. */
    public static final float LOG2_E = 1.442695f;
    /** Exponents (after the base-e scaling) below this give weight 0. */
    public static final float ZERO_BELOW = -126f;
    /** Degree of the Taylor polynomial of 2^f. */
    public static final int TAYLOR_DEGREE = 7;

    private static final float[] TAYLOR = taylor();

    /** (ln 2)^k / k! for k = 0..TAYLOR_DEGREE, each rounded to fp32 from its fp64 value. */
    private static float[] taylor() {
        float[] c = new float[TAYLOR_DEGREE + 1];
        double term = 1.0;
        for (int k = 0; k <= TAYLOR_DEGREE; k++) {
            c[k] = (float) term;
            term *= Math.log(2.0) / (k + 1);
        }
        return c;
    }

    /**
     * The Taylor coefficients of 2^f.
     *
     * @return a copy of the coefficients, k = 0..{@link #TAYLOR_DEGREE}
     */
    public static float[] taylorCoefficients() {
        return TAYLOR.clone();
    }

    /**
     * The weight exponential of {@code x} in {@code mode}'s base, as every engine computes it.
     *
     * @param mode the LSEs' base
     * @param x    an LSE minus the row's largest (at most 0)
     * @return base^x, 0 below the underflow bound
     */
    public static float exp(LseMode mode, float x) {
        float y = mode == LseMode.BASE2 ? x : x * LOG2_E;
        if (!(y >= ZERO_BELOW)) {
            return 0f;
        }
        float n = (float) Math.rint(y);
        float f = y - n;
        float p = TAYLOR[TAYLOR_DEGREE];
        for (int k = TAYLOR_DEGREE - 1; k >= 0; k--) {
            p = Math.fma(p, f, TAYLOR[k]);
        }
        return p * Float.intBitsToFloat(((int) n + 127) << 23);
    }
}
