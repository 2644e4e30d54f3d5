package io.github.dcp4j.op;

/**
 * An argument has a dtype the op does not take. Kept apart from other argument errors, as upstream raises
 * {@code TypeError} for a dtype and {@code ValueError} for everything else.
 */
public final class DTypeException extends IllegalArgumentException {
    public DTypeException(String message) {
        super(message);
    }
}
