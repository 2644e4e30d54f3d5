package io.github.dcp4j.rendezvous;

/** An exchange between ranks failed: a rank did not arrive in time, left, or was refused as foreign. */
public final class RendezvousException extends IllegalStateException {
    public RendezvousException(String message) {
        super(message);
    }

    public RendezvousException(String message, Throwable cause) {
        super(message, cause);
    }
}
