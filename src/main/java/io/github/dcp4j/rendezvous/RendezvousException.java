package io.github.dcp4j.rendezvous;

/** An exchange between ranks failed: a rank did not arrive in time, left, or was refused as foreign. */
public final class RendezvousException extends IllegalStateException {
    /**
     * A failed exchange.
     *
     * @param message names the rank, the key and what happened
     */
    public RendezvousException(String message) {
        super(message);
    }

    /**
     * A failed exchange, with its cause.
     *
     * @param message names the rank, the key and what happened
     * @param cause   the I/O failure behind it
     */
    public RendezvousException(String message, Throwable cause) {
        super(message, cause);
    }
}
