package io.github.dcp4j.rendezvous;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;

/**
 * A rank's contribution on the rendezvous wire (TCP and rendezvous files alike): a 4-byte length, then that many bytes.
 * The length is checked against {@link #MAX_PART_BYTES} before anything is allocated, and the bytes are read whole: a
 * message cut short is an error, not a shorter part.
 */
final class Wire {
    /**
     * The largest part one rank contributes to one rendezvous (its workspace handle and addresses take a few hundred
     * bytes).
     */
    static final int MAX_PART_BYTES = 1 << 20;
    /** The largest rendezvous file: a participant header (its job name at most 64 KiB) and one part. */
    static final int MAX_MESSAGE_BYTES = MAX_PART_BYTES + (1 << 17);

    private Wire() {
    }

    static void writePart(DataOutputStream out, byte[] part) throws IOException {
        requireSize(part.length, "a part to send");
        out.writeInt(part.length);
        out.write(part);
    }

    /** Reads one part from {@code in}; {@code source} names where it comes from in the error. */
    static byte[] readPart(DataInputStream in, String source) throws IOException {
        int n = in.readInt();
        requireSize(n, source);
        byte[] part = new byte[n];
        in.readFully(part);
        return part;
    }

    private static void requireSize(int n, String source) {
        if (n < 0 || n > MAX_PART_BYTES) {
            throw new RendezvousException(source + ": a part of " + n + " bytes; a part has 0 to " + MAX_PART_BYTES);
        }
    }
}
