package io.github.dcp4j.rendezvous;

/**
 * An environment variable that a rank needs is missing or unusable: not set, malformed, out of its range or at odds
 * with another. The message names the variable and its value and says what it may be (for a missing one, why it is
 * needed and how to set it); the command line exits with its usage-error code for it, since nothing ran.
 */
public final class EnvironmentException extends IllegalArgumentException {
    /** The name of the variable that is missing or unusable. */
    private final String variable;

    /**
     * A missing or unusable variable.
     *
     * @param variable the variable's name
     * @param message  names the variable, says what is wrong with it and how to set it
     */
    public EnvironmentException(String variable, String message) {
        super(message);
        this.variable = variable;
    }

    /** {@return the name of the variable that is missing or unusable} */
    public String variable() {
        return variable;
    }
}
