package io.github.dcp4j.op;

/**
 * An argument has a dtype the op does not take. Kept apart from other argument errors, as upstream raises
 * {@code TypeError} for a dtype and {@code ValueError} for everything else.
 */
public final class DTypeException extends IllegalArgumentException {
    /**
     * A dtype refusal.
     *
     * @param message names the argument, the dtype it has and the ones allowed
     */
    public DTypeException(String message) {
        super(message);
    }
}
