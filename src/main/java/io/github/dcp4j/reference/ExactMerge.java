package io.github.dcp4j.reference;

import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WeightExp;

import java.util.List;

/**
 * The op's merge, defined exactly (docs/PROTOCOL.md, "The merge"): every engine's output equals this bit for bit.
 *
 * <ol>
 *   <li>NaN and +inf LSEs count as -inf ("some backends emit NaN or +inf for empty shards").</li>
 *   <li>m = max over sources; -inf becomes 0.</li>
 *   <li>e_r = 2^(lse_r - m) (base 2) or e^(lse_r - m) (base e), the difference in fp32 and the power as
 *       {@link WeightExp} defines it (IEEE operations only, so every engine gets the same fp32); denom = sum of e_r
 *       in source order, in fp32; inv = denom == 0 ? 0 : 1 / denom; w_r = e_r x inv.</li>
 *   <li>acc = fma(w_r, o_r[d], acc) for r = 0 .. cp-1 in that order, from acc = 0, in fp32.</li>
 *   <li>One round to nearest even to fp16 / bf16. All-empty rows (every LSE -inf) give exactly 0.</li>
 * </ol>
 */
public final class ExactMerge {
    private ExactMerge() {
    }

    /**
     * Step 1: the LSE a source contributes with.
     *
     * @param lse a source's LSE
     * @return it, or -inf for NaN and +inf (no weight)
     */
    public static float sanitize(float lse) {
        return Float.isNaN(lse) || lse == Float.POSITIVE_INFINITY ? Float.NEGATIVE_INFINITY : lse;
    }

    /**
     * Steps 1-3: the weight of each source, written to {@code weights[0 .. lse.length)}.
     *
     * @param lse     the sources' LSEs, source order
     * @param count   how many sources
     * @param mode    the LSEs' base
     * @param weights where the weights go
     */
    public static void weights(float[] lse, int count, LseMode mode, float[] weights) {
        float m = Float.NEGATIVE_INFINITY;
        for (int r = 0; r < count; r++) {
            m = Math.max(m, sanitize(lse[r]));
        }
        if (m == Float.NEGATIVE_INFINITY) {
            m = 0f;
        }
        float denom = 0f;
        for (int r = 0; r < count; r++) {
            float x = sanitize(lse[r]) - m;
            float e = WeightExp.exp(mode, x);
            weights[r] = e;
            denom += e;
        }
        float inv = denom == 0f ? 0f : 1f / denom;
        for (int r = 0; r < count; r++) {
            weights[r] *= inv;
        }
    }

    /**
     * Step 4, one term: the accumulator after adding source value {@code x} with weight {@code w}.
     *
     * @param acc the accumulator so far
     * @param w   the source's weight
     * @param x   the source's value
     * @return {@code fma(w, x, acc)}
     */
    public static float accumulate(float acc, float w, float x) {
        return Math.fma(w, x, acc);
    }

    /**
     * The exact output of rank {@code dest} for a group whose ranks hold {@code partialO.get(r)} and
     * {@code partialLse.get(r)}, written to {@code out}. Each input is validated as that rank's call would be.
     *
     * @param partialO   rank r's partial outputs at index r
     * @param partialLse rank r's log-sum-exps at index r
     * @param dest       the rank whose output this is
     * @param mode       the LSEs' base
     * @param out        where it goes
     */
    public static void reduce(List<TensorView> partialO, List<TensorView> partialLse, int dest, LseMode mode,
                              TensorView out) {
        int cp = partialO.size();
        ReduceCall[] calls = new ReduceCall[cp];
        for (int r = 0; r < cp; r++) {
            calls[r] = ReduceCall.validate(partialO.get(r), partialLse.get(r), out, r, cp, mode);
        }
        ReduceCall first = calls[0];
        int d = first.headDim();
        float[] lse = new float[cp];
        float[] w = new float[cp];
        float[] acc = new float[d];
        for (int row = 0; row < first.rows(); row++) {
            for (int r = 0; r < cp; r++) {
                lse[r] = partialLse.get(r).loadFloat(calls[r].lseElement(row, dest));
            }
            weights(lse, cp, mode, w);
            java.util.Arrays.fill(acc, 0f);
            for (int r = 0; r < cp; r++) {
                TensorView o = partialO.get(r);
                long base = calls[r].sliceElement(row, dest);
                for (int i = 0; i < d; i++) {
                    acc[i] = accumulate(acc[i], w[r], o.loadFloat(base + i));
                }
            }
            long outBase = first.outElement(row);
            for (int i = 0; i < d; i++) {
                out.storeFloat(outBase + i, acc[i]);
            }
        }
    }
}
