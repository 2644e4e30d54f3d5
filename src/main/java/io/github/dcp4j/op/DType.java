package io.github.dcp4j.op;

/** Element types the op handles: fp16 and bf16 for {@code partial_o} and the output, fp32 for {@code partial_lse}. */
public enum DType {
    /** IEEE binary16: partial_o and the output. */
    FP16(2, "F16"),
    /** bfloat16 (the upper half of an fp32): partial_o and the output. */
    BF16(2, "BF16"),
    /** IEEE binary32: partial_lse. */
    FP32(4, "F32");

    private final int bytes;
    private final String safetensorsName;

    DType(int bytes, String safetensorsName) {
        this.bytes = bytes;
        this.safetensorsName = safetensorsName;
    }

    /**
     * Size of one element in bytes.
     *
     * @return 2 or 4
     */
    public int bytes() {
        return bytes;
    }

    /**
     * The dtype's name in a safetensors header.
     *
     * @return {@code F16}, {@code BF16} or {@code F32}
     */
    public String safetensorsName() {
        return safetensorsName;
    }

    /**
     * Whether this is one of the 16-bit types that {@code partial_o} and the output may have.
     *
     * @return true for fp16 and bf16
     */
    public boolean isHalf() {
        return this != FP32;
    }

    /**
     * The dtype of a safetensors header's name.
     *
     * @param name the header's dtype string
     * @return the dtype, or null when the op has no such dtype
     */
    public static DType fromSafetensorsName(String name) {
        for (DType t : values()) {
            if (t.safetensorsName.equals(name)) {
                return t;
            }
        }
        return null;
    }

    /**
     * Requires a 16-bit dtype for {@code argument}.
     *
     * @param argument the argument's name, for the message
     * @param dtype    its dtype
     * @return {@code dtype}
     * @throws DTypeException where it is not fp16 or bf16, naming the argument and the dtype
     */
    public static DType requireHalf(String argument, DType dtype) {
        if (dtype == null || !dtype.isHalf()) {
            throw new DTypeException(argument + " dtype must be fp16 or bf16; got " + dtype);
        }
        return dtype;
    }
}
