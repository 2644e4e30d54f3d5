package io.github.dcp4j.op;

/** Base of the log-sum-exp values in {@code partial_lse}. */
public enum LseMode {
    /** Base 2, FlashInfer MLA's convention and the op's default: weights are {@code exp2(lse - max)}. */
    BASE2("base2"),
    /** Base e, FlashAttention's and FlashMLA's convention: weights are {@code exp(lse - max)}. */
    BASEE("basee");

    private final String spelling;

    LseMode(String spelling) {
        this.spelling = spelling;
    }

    /**
     * The upstream spelling.
     *
     * @return {@code base2} or {@code basee}
     */
    public String spelling() {
        return spelling;
    }

    /**
     * Parses an LSE mode.
     *
     * @param value {@code base2} or {@code basee}
     * @return that mode
     * @throws IllegalArgumentException for anything else, quoting the value it got
     */
    public static LseMode parse(String value) {
        for (LseMode mode : values()) {
            if (mode.spelling.equals(value)) {
                return mode;
            }
        }
        throw new IllegalArgumentException("lse_mode must be 'base2' or 'basee'; got '" + value + "'");
    }

    @Override
    public String toString() {
        return spelling;
    }
}
