package io.github.dcp4j.op;

/**
 * Exact conversions between fp32 and the two 16-bit formats, round-to-nearest-even in the narrowing direction.
 * fp16 uses the JDK's IEEE 754 binary16 conversions; bf16 is the upper half of an fp32, rounded here.
 */
public final class Halves {
    private Halves() {
    }

    public static float fp16ToFloat(short bits) {
        return Float.float16ToFloat(bits);
    }

    public static short floatToFp16(float value) {
        return Float.floatToFloat16(value);
    }

    public static float bf16ToFloat(short bits) {
        return Float.intBitsToFloat((bits & 0xFFFF) << 16);
    }

    /** Rounds to nearest even; NaN stays NaN (quiet, sign kept), infinities and signed zeros are kept. */
    public static short floatToBf16(float value) {
        int bits = Float.floatToRawIntBits(value);
        if (Float.isNaN(value)) {
            return (short) ((bits >>> 16) | 0x0040);
        }
        int lsb = (bits >>> 16) & 1;
        return (short) ((bits + 0x7FFF + lsb) >>> 16);
    }

    public static float toFloat(DType dtype, short bits) {
        return dtype == DType.BF16 ? bf16ToFloat(bits) : fp16ToFloat(bits);
    }

    public static short fromFloat(DType dtype, float value) {
        return dtype == DType.BF16 ? floatToBf16(value) : floatToFp16(value);
    }
}
