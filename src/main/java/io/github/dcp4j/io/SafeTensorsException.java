package io.github.dcp4j.io;

/** A safetensors file is malformed or does not hold what the command needs; the message says what and where. */
public final class SafeTensorsException extends IllegalArgumentException {
    public SafeTensorsException(String message) {
        super(message);
    }
}
