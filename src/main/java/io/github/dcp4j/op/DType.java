package io.github.dcp4j.op;

/** Element types the op handles: fp16 and bf16 for {@code partial_o} and the output, fp32 for {@code partial_lse}. */
public enum DType {
    FP16(2, "F16"),
    BF16(2, "BF16"),
    FP32(4, "F32");

    private final int bytes;
    private final String safetensorsName;

    DType(int bytes, String safetensorsName) {
        this.bytes = bytes;
        this.safetensorsName = safetensorsName;
    }

    /** Size of one element in bytes. */
    public int bytes() {
        return bytes;
    }

    /** The dtype's name in a safetensors header ({@code F16}, {@code BF16}, {@code F32}). */
    public String safetensorsName() {
        return safetensorsName;
    }

    /** True for the 16-bit types that {@code partial_o} and the output may have. */
    public boolean isHalf() {
        return this != FP32;
    }

    /** The dtype whose safetensors name is {@code name}, or null when the op has no such dtype. */
    public static DType fromSafetensorsName(String name) {
        for (DType t : values()) {
            if (t.safetensorsName.equals(name)) {
                return t;
            }
        }
        return null;
    }

    /** Requires a 16-bit dtype for {@code argument}; the error is a {@link DTypeException}. */
    public static DType requireHalf(String argument, DType dtype) {
        if (dtype == null || !dtype.isHalf()) {
            throw new DTypeException(argument + " dtype must be fp16 or bf16; got " + dtype);
        }
        return dtype;
    }
}
