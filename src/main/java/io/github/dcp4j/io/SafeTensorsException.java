package io.github.dcp4j.io;

/** A safetensors file is malformed or does not hold what the command needs; the message says what and where. */
public final class SafeTensorsException extends IllegalArgumentException {
    /**
     * A refusal of a file.
     *
     * @param message names the file, what is wrong and where
     */
    public SafeTensorsException(String message) {
        super(message);
    }
}
