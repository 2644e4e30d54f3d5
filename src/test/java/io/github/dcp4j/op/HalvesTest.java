package io.github.dcp4j.op;

import org.junit.jupiter.api.Test;

import java.math.BigDecimal;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** fp16 / bf16 conversions against an independent round-to-nearest-even written with exact decimal arithmetic. */
class HalvesTest {

    /** Every finite value of a 16-bit format, from its bits, exactly (independent of the JDK conversions). */
    private static BigDecimal exactValue(short bits, int exponentBits, int mantissaBits) {
        int b = bits & 0xFFFF;
        int sign = b >>> 15;
        int exp = (b >>> mantissaBits) & ((1 << exponentBits) - 1);
        int man = b & ((1 << mantissaBits) - 1);
        int bias = (1 << (exponentBits - 1)) - 1;
        BigDecimal two = BigDecimal.valueOf(2);
        BigDecimal v = exp == 0
                ? BigDecimal.valueOf(man).multiply(pow2(1 - bias - mantissaBits))
                : BigDecimal.valueOf((1L << mantissaBits) + man).multiply(pow2(exp - bias - mantissaBits));
        return sign == 1 ? v.negate() : v;
    }

    private static BigDecimal pow2(int e) {
        return e >= 0 ? BigDecimal.valueOf(2).pow(e) : BigDecimal.ONE.divide(BigDecimal.valueOf(2).pow(-e));
    }

    /** Reference RNE narrowing of a finite fp32 by searching the two neighbours exactly. */
    private static short referenceRound(float x, int exponentBits, int mantissaBits) {
        BigDecimal v = new BigDecimal(x);
        int maxExp = (1 << exponentBits) - 1;
        int signBit = x < 0 || (x == 0 && 1 / x < 0) ? 0x8000 : 0;
        BigDecimal mag = v.abs();
        // largest magnitude pattern <= mag, walking the positive patterns in order (they are monotonic)
        int lo = 0;
        int hi = (maxExp << mantissaBits) - 1; // largest finite
        if (mag.compareTo(exactValue((short) hi, exponentBits, mantissaBits)) >= 0) {
            BigDecimal max = exactValue((short) hi, exponentBits, mantissaBits);
            BigDecimal halfUlp = max.subtract(exactValue((short) (hi - 1), exponentBits, mantissaBits))
                    .divide(BigDecimal.valueOf(2));
            return (short) (signBit | (mag.compareTo(max.add(halfUlp)) >= 0 ? maxExp << mantissaBits : hi));
        }
        while (lo < hi) {
            int mid = (lo + hi + 1) >>> 1;
            if (exactValue((short) mid, exponentBits, mantissaBits).compareTo(mag) <= 0) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        BigDecimal below = exactValue((short) lo, exponentBits, mantissaBits);
        BigDecimal above = exactValue((short) (lo + 1), exponentBits, mantissaBits);
        int c = mag.subtract(below).compareTo(above.subtract(mag));
        int pick = c < 0 ? lo : c > 0 ? lo + 1 : ((lo & 1) == 0 ? lo : lo + 1);
        return (short) (signBit | pick);
    }

    @Test
    void everyBf16PatternRoundTripsExactly() {
        for (int b = 0; b < 0x10000; b++) {
            short bits = (short) b;
            float f = Halves.bf16ToFloat(bits);
            if (Float.isNaN(f)) {
                assertTrue(Float.isNaN(Halves.bf16ToFloat(Halves.floatToBf16(f))), "NaN stays NaN: " + b);
                continue;
            }
            if (!Float.isInfinite(f)) {
                assertEquals(0, exactValue(bits, 8, 7).compareTo(new BigDecimal(f)), "value of bf16 " + b);
            }
            assertEquals(bits, Halves.floatToBf16(f), "bf16 round trip of " + Integer.toHexString(b));
        }
    }

    @Test
    void everyFp16PatternRoundTripsExactly() {
        for (int b = 0; b < 0x10000; b++) {
            short bits = (short) b;
            float f = Halves.fp16ToFloat(bits);
            if (Float.isNaN(f)) {
                assertTrue(Float.isNaN(Halves.fp16ToFloat(Halves.floatToFp16(f))), "NaN stays NaN: " + b);
                continue;
            }
            if (!Float.isInfinite(f)) {
                assertEquals(0, exactValue(bits, 5, 10).compareTo(new BigDecimal(f)), "value of fp16 " + b);
            }
            assertEquals(bits, Halves.floatToFp16(f), "fp16 round trip of " + Integer.toHexString(b));
        }
    }

    @Test
    void randomFloatsRoundToNearestEven() {
        SplittableRandom random = new SplittableRandom(7);
        for (int i = 0; i < 20_000; i++) {
            float x = Float.intBitsToFloat(random.nextInt());
            if (Float.isNaN(x) || Float.isInfinite(x)) {
                continue;
            }
            assertEquals(referenceRound(x, 8, 7), Halves.floatToBf16(x), "bf16 of " + x);
            // fp16 covers a narrow range: scale into it so that rounding, subnormals and overflow all occur
            float y = Math.scalb(x, -Math.getExponent(x) + random.nextInt(-26, 18));
            assertEquals(referenceRound(y, 5, 10), Halves.floatToFp16(y), "fp16 of " + y);
        }
    }

    @Test
    void tiesGoToEven() {
        // 1 + 2^-8 lies halfway between bf16 1.0 (even mantissa) and 1 + 2^-7 (odd): rounds down to 1.0
        assertEquals((short) 0x3F80, Halves.floatToBf16(1f + 0x1p-8f));
        // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up
        assertEquals((short) 0x3F82, Halves.floatToBf16(1f + 3 * 0x1p-8f));
        // fp16: 1 + 2^-11 is a tie between 1.0 and 1 + 2^-10: to even (1.0)
        assertEquals((short) 0x3C00, Halves.floatToFp16(1f + 0x1p-11f));
        assertEquals((short) 0x3C02, Halves.floatToFp16(1f + 3 * 0x1p-11f));
    }

    @Test
    void signedZerosInfinitiesAndNaN() {
        assertEquals((short) 0x0000, Halves.floatToBf16(0f));
        assertEquals((short) 0x8000, Halves.floatToBf16(-0f));
        assertEquals((short) 0x7F80, Halves.floatToBf16(Float.POSITIVE_INFINITY));
        assertEquals((short) 0xFF80, Halves.floatToBf16(Float.NEGATIVE_INFINITY));
        assertTrue(Float.isNaN(Halves.bf16ToFloat(Halves.floatToBf16(Float.NaN))));
        // a NaN whose payload sits only in the low 16 bits must not truncate to infinity
        assertTrue(Float.isNaN(Halves.bf16ToFloat(Halves.floatToBf16(Float.intBitsToFloat(0x7F800001)))));
        assertEquals((short) 0x8000, Halves.floatToFp16(-0f));
        assertEquals((short) 0x7C00, Halves.floatToFp16(65520f)); // fp16 overflow threshold rounds to inf
        assertEquals((short) 0x7BFF, Halves.floatToFp16(65519f));
        assertTrue(Float.isNaN(Halves.fp16ToFloat(Halves.floatToFp16(Float.NaN))));
    }

    @Test
    void subnormals() {
        assertEquals(0x1p-24f, Halves.fp16ToFloat((short) 0x0001)); // smallest fp16 subnormal
        assertEquals((short) 0x0001, Halves.floatToFp16(0x1p-24f));
        assertEquals((short) 0x0000, Halves.floatToFp16(0x1p-25f)); // tie with zero: to even (zero)
        assertEquals((short) 0x0001, Halves.floatToFp16(0x1.000002p-25f));
        assertEquals(0x1p-133f, Halves.bf16ToFloat((short) 0x0001)); // smallest bf16 subnormal
        assertEquals((short) 0x0001, Halves.floatToBf16(0x1p-133f));
        assertEquals((short) 0x0000, Halves.floatToBf16(0x1p-134f)); // tie with zero: to even
    }
}
