package io.github.dcp4j.op;

/**
 * Exact conversions between fp32 and the two 16-bit formats, round-to-nearest-even in the narrowing direction.
 * fp16 uses the JDK's IEEE 754 binary16 conversions; bf16 is the upper half of an fp32, rounded here.
 */
public final class Halves {
    private Halves() {
    }

    /**
     * An fp16 value as fp32 (exact).
     *
     * @param bits the fp16 bit pattern
     * @return its value
     */
    public static float fp16ToFloat(short bits) {
        return Float.float16ToFloat(bits);
    }

    /**
     * An fp32 value rounded to fp16, to nearest even.
     *
     * @param value the value
     * @return the fp16 bit pattern
     */
    public static short floatToFp16(float value) {
        return Float.floatToFloat16(value);
    }

    /**
     * A bf16 value as fp32 (exact).
     *
     * @param bits the bf16 bit pattern
     * @return its value
     */
    public static float bf16ToFloat(short bits) {
        return Float.intBitsToFloat((bits & 0xFFFF) << 16);
    }

    /**
     * An fp32 value rounded to bf16, to nearest even; NaN stays NaN (quiet, sign kept), infinities and signed zeros
     * are kept.
     *
     * @param value the value
     * @return the bf16 bit pattern
     */
    public static short floatToBf16(float value) {
        int bits = Float.floatToRawIntBits(value);
        if (Float.isNaN(value)) {
            return (short) ((bits >>> 16) | 0x0040);
        }
        int lsb = (bits >>> 16) & 1;
        return (short) ((bits + 0x7FFF + lsb) >>> 16);
    }

    /**
     * A 16-bit value of {@code dtype} as fp32 (exact).
     *
     * @param dtype fp16 or bf16
     * @param bits  the bit pattern
     * @return its value
     */
    public static float toFloat(DType dtype, short bits) {
        return dtype == DType.BF16 ? bf16ToFloat(bits) : fp16ToFloat(bits);
    }

    /**
     * An fp32 value rounded to {@code dtype}, to nearest even.
     *
     * @param dtype fp16 or bf16
     * @param value the value
     * @return the bit pattern
     */
    public static short fromFloat(DType dtype, float value) {
        return dtype == DType.BF16 ? floatToBf16(value) : floatToFp16(value);
    }
}
