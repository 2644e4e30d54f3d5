package io.github.dcp4j.engine.tornado;

import io.github.dcp4j.layout.Ll128;
import uk.ac.manchester.tornado.api.annotations.Parallel;
import uk.ac.manchester.tornado.api.math.TornadoMath;
import uk.ac.manchester.tornado.api.types.arrays.DoubleArray;
import uk.ac.manchester.tornado.api.types.arrays.FloatArray;
import uk.ac.manchester.tornado.api.types.arrays.IntArray;
import uk.ac.manchester.tornado.api.types.arrays.LongArray;
import uk.ac.manchester.tornado.api.types.arrays.ShortArray;

/**
 * The Java tasks of the TornadoVM engine's graph: plain static methods that TornadoVM compiles to PTX and that the
 * CPU-side tests call as plain Java. They compute what {@code ExactMerge} defines, bit for bit, within what
 * TornadoVM's PTX backend compiles (docs/TORNADO.md): no {@code Math.fma} (written out as an exact product in fp64,
 * the sum's rounding error, and a correction where fp64's rounding lands on an fp32 midpoint), no bit
 * reinterpretation (fp16 and bf16 decoded and rounded with powers of two from {@link #tables()}), no
 * infinity constants (from the same table).
 *
 * <p>Every rank's workspace lies in one {@link LongArray}, rank r's starting at long {@code P_WS_BASE + r *
 * P_WS_LONGS}, with the {@code Ll128} layout (metadata word 0 holds epoch | arrivals << 32). The inputs of every rank
 * lie in one {@link ShortArray} (partial_o) and one {@link FloatArray} (partial_lse), the outputs in one
 * {@link ShortArray}; the index table says where each row's slices are, so strided inputs need no packing.
 */
public final class MergeTasks {
    private MergeTasks() {
    }

    // --- the parameter array (IntArray, transferred on every execution) ---
    /** Ranks in the group. */
    public static final int P_CP = 0;
    /** Rows of this call. */
    public static final int P_ROWS = 1;
    /** Rows the workspace holds per source and slot (the layout's maxRows). */
    public static final int P_MAX_ROWS = 2;
    /** 8-byte data words of one row slice. */
    public static final int P_DATA_WORDS = 3;
    /** Data lines of one row slice. */
    public static final int P_DATA_LINES = 4;
    /** Line groups (= LSE lines) of one row slice. */
    public static final int P_LINE_GROUPS = 5;
    /** 1 for bf16 data, 0 for fp16. */
    public static final int P_BF16 = 6;
    /** 1 for base-2 LSEs, 0 for base e. */
    public static final int P_BASE2 = 7;
    /** Longs from one rank's workspace to the next (the workspace's bytes rounded up to 128, over 8). */
    public static final int P_WS_LONGS = 8;
    /** Long index of rank 0's workspace (its first byte 128-byte aligned on the device). */
    public static final int P_WS_BASE = 9;
    /** Index, in the index table, of the slice starts: [src][row][dst], element of partial_o[row, dst, 0]. */
    public static final int P_SLICE_INDEX = 10;
    /** Index, in the index table, of the LSE positions: [src][row][dst], element of partial_lse[row, dst]. */
    public static final int P_LSE_INDEX = 11;
    /** Index, in the index table, of the output row starts: [rank][row], element of out[row, 0]. */
    public static final int P_OUT_INDEX = 12;
    /** How long the exchange task waits for one source's lines of one row, in microseconds. */
    public static final int P_TIMEOUT_MICROS = 13;
    /** Entries of the parameter array. */
    public static final int PARAMS = 14;

    // --- the status word (IntArray of one entry, set on the device, read after every execution) ---
    /** Status: a wait gave up; the ranks' metadata say which. */
    public static final int STATUS_FAILED = Ll128.STATUS_FAILED;
    /** Status: TornadoVM's workspace buffer does not put rank 0's workspace on 128 bytes; nothing was sent. */
    public static final int STATUS_MISALIGNED = 2;

    // --- the constant table (DoubleArray, transferred once) ---
    /** Bits of a bf16 or fp16 pattern. */
    private static final int HALF_BITS = 16;
    /** Fraction bits of bf16. */
    private static final int BF16_FRACTION_BITS = 7;
    /** Fraction bits of fp16. */
    private static final int FP16_FRACTION_BITS = 10;
    /** Entries of bf16's decoding scales: two for each pattern of its sign and exponent bits. */
    private static final int BF16_SCALES = 2 << (HALF_BITS - BF16_FRACTION_BITS);
    /** Entries of fp16's decoding scales. */
    private static final int FP16_SCALES = 2 << (HALF_BITS - FP16_FRACTION_BITS);
    /** -inf. */
    public static final int T_NEG_INF = 0;
    /** A NaN. */
    public static final int T_NAN = 1;
    /** The 8 Taylor coefficients of 2^f (WeightExp's, as fp32 values). */
    public static final int T_TAYLOR = 2;
    /** Degree of the Taylor polynomial (WeightExp.TAYLOR_DEGREE). */
    public static final int TAYLOR_DEGREE = 7;
    /** Largest |k| in the power-of-two table. */
    public static final int POW2_RANGE = 160;
    /** Index of 2^0; 2^k is at T_POW2 + k for k in [-POW2_RANGE, POW2_RANGE]. */
    public static final int T_POW2 = T_TAYLOR + TAYLOR_DEGREE + 1 + POW2_RANGE;
    /**
     * bf16's decoding scales (see {@link #decodeExact}): entry {@code (s_e << 1) | (m != 0)}, for the pattern's sign
     * and exponent bits {@code s_e} (its top 9) and whether its fraction {@code m} is nonzero, is the signed power of
     * two of the pattern's last significand bit, or a signed infinity or NaN where the exponent is all ones.
     */
    public static final int T_DECODE_BF16 = T_POW2 + POW2_RANGE + 1;
    /** fp16's decoding scales, as {@link #T_DECODE_BF16}'s (its top 6 bits). */
    public static final int T_DECODE_FP16 = T_DECODE_BF16 + BF16_SCALES;
    /** Entries of the constant table. */
    public static final int TABLES = T_DECODE_FP16 + FP16_SCALES;

    /**
     * Sources whose values the weights and the merge load before they use the first of them: their loops take this
     * many sources a step, written out one by one (x0 .. x3).
     */
    private static final int SOURCES_AT_ONCE = 4;
    /** log2(e), WeightExp.LOG2_E. */
    private static final float LOG2_E = 1.442695f;
    /** 1.5 x 2^23: (y + R) - R rounds an fp32 |y| < 2^22 to an integer, to nearest even. */
    private static final float ROUND_F32 = 12582912f;
    /** Halfway between Float.MAX_VALUE and 2^128: 2^128 - 2^103. */
    private static final double OVERFLOW_MIDPOINT = 0x1.ffffffp127;
    /** 2^52: (n + R) - R rounds an fp64 0 <= n < 2^52 to an integer, to nearest even. */
    private static final double ROUND_F64 = 4503599627370496.0;
    /** 128 bytes in longs: the metadata and every data line. */
    private static final int LINE_LONGS = Ll128.LINE_WORDS;
    /** Data words per line (Ll128.LINE_DATA_WORDS): data word k of a row lies in line k / 15 at word k % 15. */
    public static final int LINE_DATA_WORDS = Ll128.LINE_DATA_WORDS;

    /**
     * The constant table every task reads: -inf, NaN, WeightExp's Taylor coefficients, powers of two and the decoding
     * scales of bf16 and fp16.
     *
     * @param taylor WeightExp.taylorCoefficients(), TAYLOR_DEGREE + 1 values
     * @return the table, {@link #TABLES} entries
     */
    public static DoubleArray tables(float[] taylor) {
        if (taylor.length != TAYLOR_DEGREE + 1) {
            throw new IllegalArgumentException("taylor must hold " + (TAYLOR_DEGREE + 1) + " coefficients; got "
                    + taylor.length);
        }
        DoubleArray t = new DoubleArray(TABLES);
        t.set(T_NEG_INF, Double.NEGATIVE_INFINITY);
        t.set(T_NAN, Double.NaN);
        for (int k = 0; k <= TAYLOR_DEGREE; k++) {
            t.set(T_TAYLOR + k, taylor[k]);
        }
        for (int k = -POW2_RANGE; k <= POW2_RANGE; k++) {
            t.set(T_POW2 + k, Math.scalb(1.0, k));
        }
        decodingScales(t, T_DECODE_BF16, BF16_FRACTION_BITS);
        decodingScales(t, T_DECODE_FP16, FP16_FRACTION_BITS);
        return t;
    }

    /** {@link #decodeExact}'s scales for the 16-bit format with {@code mBits} fraction bits, from {@code at} on. */
    private static void decodingScales(DoubleArray t, int at, int mBits) {
        int eBits = HALF_BITS - 1 - mBits;
        int eMax = (1 << eBits) - 1;
        int bias = eMax >> 1;
        for (int top = 0; top < 1 << (HALF_BITS - mBits); top++) {
            int e = top & eMax;
            double sign = top > eMax ? -1.0 : 1.0;
            double finite = sign * Math.scalb(1.0, (e == 0 ? 1 : e) - bias - mBits);
            t.set(at + (top << 1), e == eMax ? sign * Double.POSITIVE_INFINITY : finite);
            t.set(at + (top << 1) + 1, e == eMax ? Double.NaN : finite);
        }
    }

    // ------------------------------------------------------------------------------------------------ the tasks

    /**
     * ExactMerge steps 1-3 for every (destination, row): the sources' LSEs, as the exchange task received them
     * ({@code received[(dst * rows + row) * cp + src]}, the own one from the input), to weights {@code w[(dst * rows
     * + row) * cp + src]}.
     *
     * @param p        the parameters
     * @param received the LSEs, per (destination, row, source)
     * @param w        the weights
     * @param t        the constant table
     */
    public static void weights(IntArray p, FloatArray received, FloatArray w, DoubleArray t) {
        int cp = p.get(P_CP);
        int rows = p.get(P_ROWS);
        boolean base2 = p.get(P_BASE2) == 1;
        float negInf = (float) t.get(T_NEG_INF);
        // SOURCES_AT_ONCE sources at a time, their loads issued before the first is used: a thread's loads are its
        // time here (one row's work is a few hundred instructions), and one round trip then serves that many.
        for (@Parallel int dr = 0; dr < cp * rows; dr++) {
            int first = dr * cp;
            float m = negInf;
            for (int s = 0; s < cp; s += SOURCES_AT_ONCE) {
                float x0 = received.get(first + s);
                float x1 = s + 1 < cp ? received.get(first + s + 1) : negInf;
                float x2 = s + 2 < cp ? received.get(first + s + 2) : negInf;
                float x3 = s + 3 < cp ? received.get(first + s + 3) : negInf;
                m = larger(larger(m, sanitized(x0, negInf)), sanitized(x1, negInf));
                m = larger(larger(m, sanitized(x2, negInf)), sanitized(x3, negInf));
            }
            if (m == negInf) {
                m = 0f;
            }
            float denom = 0f;
            for (int s = 0; s < cp; s += SOURCES_AT_ONCE) {
                float x0 = received.get(first + s);
                float x1 = s + 1 < cp ? received.get(first + s + 1) : negInf;
                float x2 = s + 2 < cp ? received.get(first + s + 2) : negInf;
                float x3 = s + 3 < cp ? received.get(first + s + 3) : negInf;
                float e0 = weightExp(base2, sanitized(x0, negInf) - m, t);
                w.set(first + s, e0);
                denom += e0;
                if (s + 1 < cp) {
                    float e1 = weightExp(base2, sanitized(x1, negInf) - m, t);
                    w.set(first + s + 1, e1);
                    denom += e1;
                }
                if (s + 2 < cp) {
                    float e2 = weightExp(base2, sanitized(x2, negInf) - m, t);
                    w.set(first + s + 2, e2);
                    denom += e2;
                }
                if (s + 3 < cp) {
                    float e3 = weightExp(base2, sanitized(x3, negInf) - m, t);
                    w.set(first + s + 3, e3);
                    denom += e3;
                }
            }
            // 1 / denom in fp64, rounded once to fp32: the correctly rounded fp32 quotient (fp64 has > 2 x 24 + 2
            // bits), where PTX's f32 division is approximate
            float inv = denom == 0f ? 0f : (float) (1.0 / (double) denom);
            for (int s = 0; s < cp; s += SOURCES_AT_ONCE) {
                float e0 = w.get(first + s);
                float e1 = s + 1 < cp ? w.get(first + s + 1) : 0f;
                float e2 = s + 2 < cp ? w.get(first + s + 2) : 0f;
                float e3 = s + 3 < cp ? w.get(first + s + 3) : 0f;
                w.set(first + s, e0 * inv);
                if (s + 1 < cp) {
                    w.set(first + s + 1, e1 * inv);
                }
                if (s + 2 < cp) {
                    w.set(first + s + 2, e2 * inv);
                }
                if (s + 3 < cp) {
                    w.set(first + s + 3, e3 * inv);
                }
            }
        }
    }

    /**
     * max(m, x) for ExactMerge step 2, except that of a +0 and a -0 it keeps m where Math.max gives +0: no weight
     * changes, since the exponential of a difference that is zero is 1 whatever its sign.
     */
    private static float larger(float m, float x) {
        return x > m ? x : m;
    }

    /** ExactMerge step 1 (ExactMerge.sanitize): NaN and +inf count as -inf. */
    private static float sanitized(float lse, float negInf) {
        return lse != lse || lse > Float.MAX_VALUE ? negInf : lse;
    }

    /**
     * ExactMerge steps 4-5 for every (destination, row, data word): the four elements of the word, accumulated over
     * the sources in order 0..cp-1 (the own slice from the input, the others from the destination's workspace),
     * rounded to the data's type into the destination's output. A row whose wait gave up ({@code failed[dst *
     * rows + row] != 0}) is NaN.
     *
     * @param p      the parameters
     * @param ws     every rank's workspace
     * @param oIn    every rank's partial_o
     * @param index  the index table
     * @param w      the weights from {@link #weights}
     * @param failed per (destination, row): nonzero where the exchange task gave up on that row
     * @param out    every rank's output
     * @param t      the constant table
     */
    public static void merge(IntArray p, LongArray ws, ShortArray oIn, IntArray index, FloatArray w, IntArray failed,
                             ShortArray out, DoubleArray t) {
        int cp = p.get(P_CP);
        int rows = p.get(P_ROWS);
        int words = p.get(P_DATA_WORDS);
        boolean bf16 = p.get(P_BF16) == 1;
        int mBits = bf16 ? BF16_FRACTION_BITS : FP16_FRACTION_BITS;
        int scales = bf16 ? T_DECODE_BF16 : T_DECODE_FP16;
        int sourceLongs = sourceLongs(p);
        for (@Parallel int i = 0; i < cp * rows * words; i++) {
            int dr = i / words;
            int k = i - dr * words;
            int dst = dr / rows;
            int row = dr - dst * rows;
            int line = k / LINE_DATA_WORDS;
            // word k of the row from source 0 (its place, were it sent), then sourceLongs on per source
            int at = dataLine(p, dst, slot(p, ws, dst), 0, row, line) + k - line * LINE_DATA_WORDS;
            int own = index.get(p.get(P_SLICE_INDEX) + dr * cp + dst) + 4 * k;
            long ownWord = (oIn.get(own) & 0xFFFFL) | (oIn.get(own + 1) & 0xFFFFL) << 16
                    | (oIn.get(own + 2) & 0xFFFFL) << 32 | (oIn.get(own + 3) & 0xFFFFL) << 48;
            int first = dr * cp;
            float a0 = 0f;
            float a1 = 0f;
            float a2 = 0f;
            float a3 = 0f;
            // SOURCES_AT_ONCE sources' words and weights loaded before the first is used, then accumulated in order
            for (int s = 0; s < cp; s += SOURCES_AT_ONCE) {
                long x0 = s == dst ? ownWord : ws.get(at);
                long x1 = s + 1 < cp ? (s + 1 == dst ? ownWord : ws.get(at + sourceLongs)) : 0L;
                long x2 = s + 2 < cp ? (s + 2 == dst ? ownWord : ws.get(at + 2 * sourceLongs)) : 0L;
                long x3 = s + 3 < cp ? (s + 3 == dst ? ownWord : ws.get(at + 3 * sourceLongs)) : 0L;
                float w0 = w.get(first + s);
                float w1 = s + 1 < cp ? w.get(first + s + 1) : 0f;
                float w2 = s + 2 < cp ? w.get(first + s + 2) : 0f;
                float w3 = s + 3 < cp ? w.get(first + s + 3) : 0f;
                a0 = addRounded((double) w0 * decodeExact((int) x0 & 0xFFFF, mBits, scales, t), a0);
                a1 = addRounded((double) w0 * decodeExact((int) x0 >>> 16, mBits, scales, t), a1);
                a2 = addRounded((double) w0 * decodeExact((int) (x0 >>> 32) & 0xFFFF, mBits, scales, t), a2);
                a3 = addRounded((double) w0 * decodeExact((int) (x0 >>> 48), mBits, scales, t), a3);
                if (s + 1 < cp) {
                    a0 = addRounded((double) w1 * decodeExact((int) x1 & 0xFFFF, mBits, scales, t), a0);
                    a1 = addRounded((double) w1 * decodeExact((int) x1 >>> 16, mBits, scales, t), a1);
                    a2 = addRounded((double) w1 * decodeExact((int) (x1 >>> 32) & 0xFFFF, mBits, scales, t), a2);
                    a3 = addRounded((double) w1 * decodeExact((int) (x1 >>> 48), mBits, scales, t), a3);
                }
                if (s + 2 < cp) {
                    a0 = addRounded((double) w2 * decodeExact((int) x2 & 0xFFFF, mBits, scales, t), a0);
                    a1 = addRounded((double) w2 * decodeExact((int) x2 >>> 16, mBits, scales, t), a1);
                    a2 = addRounded((double) w2 * decodeExact((int) (x2 >>> 32) & 0xFFFF, mBits, scales, t), a2);
                    a3 = addRounded((double) w2 * decodeExact((int) (x2 >>> 48), mBits, scales, t), a3);
                }
                if (s + 3 < cp) {
                    a0 = addRounded((double) w3 * decodeExact((int) x3 & 0xFFFF, mBits, scales, t), a0);
                    a1 = addRounded((double) w3 * decodeExact((int) x3 >>> 16, mBits, scales, t), a1);
                    a2 = addRounded((double) w3 * decodeExact((int) (x3 >>> 32) & 0xFFFF, mBits, scales, t), a2);
                    a3 = addRounded((double) w3 * decodeExact((int) (x3 >>> 48), mBits, scales, t), a3);
                }
                at += SOURCES_AT_ONCE * sourceLongs;
            }
            if (failed.get(dr) != 0) {
                float nan = (float) t.get(T_NAN);
                a0 = nan;
                a1 = nan;
                a2 = nan;
                a3 = nan;
            }
            int o = index.get(p.get(P_OUT_INDEX) + dr) + 4 * k;
            out.set(o, (short) encodeHalf(a0, bf16, t));
            out.set(o + 1, (short) encodeHalf(a1, bf16, t));
            out.set(o + 2, (short) encodeHalf(a2, bf16, t));
            out.set(o + 3, (short) encodeHalf(a3, bf16, t));
        }
    }

    // ------------------------------------------------------------------------------------------------ the layout

    /**
     * The slot of rank {@code rank}'s current call, for the tasks after the exchange: the low bit of the call's epoch,
     * which the exchange task has advanced by one.
     */
    public static int slot(IntArray p, LongArray ws, int rank) {
        return (int) ((ws.get(p.get(P_WS_BASE) + rank * p.get(P_WS_LONGS)) + 1L) & 1L);
    }

    /** Longs from a row's data line in one source's lines of a workspace slot to the same line of the next source. */
    public static int sourceLongs(IntArray p) {
        return p.get(P_MAX_ROWS) * p.get(P_DATA_LINES) * LINE_LONGS;
    }

    /** Long index of data line {@code line} of {@code row} from {@code src} in {@code dst}'s workspace. */
    public static int dataLine(IntArray p, int dst, int slot, int src, int row, int line) {
        return p.get(P_WS_BASE) + dst * p.get(P_WS_LONGS) + LINE_LONGS + (slot * p.get(P_CP) + src) * sourceLongs(p)
                + (row * p.get(P_DATA_LINES) + line) * LINE_LONGS;
    }

    // ------------------------------------------------------------------------------------------------ arithmetic

    /**
     * {@code fma(a, b, c)} in fp32, rounded once, without an fma instruction: the product of two fp32 values is exact
     * in fp64, {@link #addRounded} rounds the sum, and {@link #overflowed} where that gave an infinity.
     */
    public static float fma32(float a, float b, float c) {
        double prod = (double) a * (double) b;
        float r = addRounded(prod, c);
        return r > Float.MAX_VALUE || r < -Float.MAX_VALUE ? overflowed(prod, c, r) : r;
    }

    /**
     * {@code prod + c} rounded once to fp32, for a {@code prod} whose significand fits 48 bits (an fp32 product, or a
     * weight times a half), where the result is finite: rounding the fp64 sum {@code s} to fp32 is the correct result
     * unless {@code s} lies exactly halfway between two fp32 values; there the true sum lies on the side of the sum's
     * rounding error {@code err} (exact, by two-sum), which is computed only then. Where {@code s} rounds to an
     * infinity the result is that infinity, which is wrong only where {@code s} is the midpoint between
     * +-Float.MAX_VALUE and +-2^128 and the true sum is nearer zero: {@link #fma32} checks for it; the merge's sums,
     * of weights at most 1 and about 1 in all, times halves, stay below.
     */
    static float addRounded(double prod, float c) {
        double s = prod + c;
        float r = (float) s;
        double back = r;
        double d = s - back;
        // the other fp32 neighbour where s is the midpoint between the two; where s is an fp32 value (d == 0) r
        // itself, and otherwise strictly between them, no fp32 value (NaN where r is infinite or s is NaN)
        double mirror = back + 2.0 * d;
        if ((double) (float) mirror != mirror || d == 0.0) {
            return r;  // s is no midpoint: within an fp64 ulp of the true sum, whose rounding it shares
        }
        double err = sumError(prod, c, s);
        if (err == 0.0) {
            return r;  // the true sum is the midpoint: to even, as (float) s rounds it
        }
        return (err > 0.0) == (d > 0.0) ? (float) mirror : r;
    }

    /**
     * {@code prod + c} rounded once to fp32 where its fp64 sum {@code s} rounded to the infinity {@code r}: that is
     * right unless {@code s} is the midpoint between the largest fp32 magnitude and 2^128 (the tie goes to the
     * infinity, the even one) while the true sum, by the rounding error of {@code s}, lies nearer zero.
     */
    private static float overflowed(double prod, float c, float r) {
        double s = prod + c;
        double magnitude = s < 0.0 ? -s : s;
        if (magnitude != OVERFLOW_MIDPOINT) {
            return r;
        }
        double err = sumError(prod, c, s);
        boolean nearerZero = err != 0.0 && (err < 0.0) == (s > 0.0);
        return nearerZero ? (s > 0.0 ? Float.MAX_VALUE : -Float.MAX_VALUE) : r;
    }

    /** {@code prod + c - s} exactly, for {@code s} the fp64 sum {@code prod + c} (two-sum). */
    private static double sumError(double prod, float c, double s) {
        double bb = s - prod;
        return (prod - (s - bb)) + (c - bb);
    }

    /** WeightExp.exp: {@code 2^x} (base 2) or {@code e^x}, x <= 0, by the same fp32 steps. */
    public static float weightExp(boolean base2, float x, DoubleArray t) {
        float y = base2 ? x : x * LOG2_E;
        if (!(y >= -126f)) {
            return 0f;
        }
        float n = (y + ROUND_F32) - ROUND_F32;  // Math.rint(y) for |y| < 2^22
        float f = y - n;
        float poly = (float) t.get(T_TAYLOR + TAYLOR_DEGREE);
        for (int k = TAYLOR_DEGREE - 1; k >= 0; k--) {
            poly = fma32(poly, f, (float) t.get(T_TAYLOR + k));
        }
        return poly * (float) t.get(T_POW2 + (int) n);
    }

    /** The fp32 value of a bf16 ({@code bf16}) or fp16 bit pattern (the low 16 bits of {@code bits}). */
    public static float decodeHalf(int bits, boolean bf16, DoubleArray t) {
        return bf16 ? (float) decodeExact(bits & 0xFFFF, BF16_FRACTION_BITS, T_DECODE_BF16, t)
                : (float) decodeExact(bits & 0xFFFF, FP16_FRACTION_BITS, T_DECODE_FP16, t);
    }

    /**
     * The exact value of the 16-bit pattern {@code bits} with {@code mBits} fraction bits, without a branch: the
     * significand (the fraction, with its leading one where the exponent is nonzero) times one load of the format's
     * scales at {@code scales} (which hold the sign, and infinity or NaN where the exponent is all ones).
     */
    static double decodeExact(int bits, int mBits, int scales, DoubleArray t) {
        int eBits = HALF_BITS - 1 - mBits;
        int eMax = (1 << eBits) - 1;
        int mMask = (1 << mBits) - 1;
        int top = bits >>> mBits;
        int m = bits & mMask;
        int significand = m | ((top & eMax) + eMax) >>> eBits << mBits;  // (e + eMax) >> eBits: 1 unless e == 0
        return significand * t.get(scales + (top << 1 | (m + mMask) >>> mBits));  // (m + mMask) >> mBits: m != 0
    }

    /**
     * {@code value} rounded to nearest even to bf16 ({@code bf16}) or fp16, as a 16-bit pattern (in an int); NaN
     * gives the quiet NaN 0x7FC0 / 0x7E00. The exponent is estimated from log2 and corrected against the
     * power-of-two table, the value scaled exactly in fp64 to units of the result's last place and rounded there.
     */
    public static int encodeHalf(float value, boolean bf16, DoubleArray t) {
        int mBits = bf16 ? BF16_FRACTION_BITS : FP16_FRACTION_BITS;
        int minExp = bf16 ? -126 : -14;
        int maxExp = bf16 ? 127 : 15;
        int inf = bf16 ? 0x7F80 : 0x7C00;
        if (value != value) {
            return bf16 ? 0x7FC0 : 0x7E00;
        }
        if (value == 0f) {
            // only a division tells -0 (1 / -0 is -inf; an fp32 one, where fp64's is a long PTX sequence), so only
            // a zero pays for one
            return 1f / value < 0f ? 0x8000 : 0;
        }
        int sign = value < 0f ? 0x8000 : 0;
        double a = value < 0f ? -(double) value : (double) value;
        if (a > Float.MAX_VALUE) {
            return sign | inf;
        }
        // floor(log2(a)) is within one of the exponent from 2^minExp up even where log2 is approximate (PTX's
        // lg2.approx); below, the estimate is not used. TornadoMath.log2 divides TornadoMath.log by ln 2 (a second
        // fp32 division after the one in log), where a multiplication by log2(e) does
        int k = exponentAtMost(a, (int) TornadoMath.floor(TornadoMath.log((float) a) * LOG2_E), minExp, maxExp, t);
        double units = a * t.get(T_POW2 + mBits - k);
        double rounded = (units + ROUND_F64) - ROUND_F64;
        double magnitude = (k - minExp) * (double) (1 << mBits) + rounded;
        return sign | (magnitude >= inf ? inf : (int) magnitude);
    }

    /**
     * The largest k in [minExp, maxExp] with 2^k &lt;= a, else minExp (a below 2^minExp: subnormal or zero), from
     * {@code estimate}, an integer within one of floor(log2(a)) where a is at least 2^minExp (any integer below:
     * the GPU's log2 of 0 converts to the integer 0): clamped to the range, then corrected by one either way against
     * the power-of-two table.
     */
    static int exponentAtMost(double a, int estimate, int minExp, int maxExp, DoubleArray t) {
        if (a < t.get(T_POW2 + minExp)) {
            return minExp;
        }
        int k = estimate < minExp ? minExp : (estimate > maxExp ? maxExp : estimate);
        if (k > minExp && a < t.get(T_POW2 + k)) {
            k--;
        }
        if (k < maxExp && a >= t.get(T_POW2 + k + 1)) {
            k++;
        }
        return k;
    }
}
