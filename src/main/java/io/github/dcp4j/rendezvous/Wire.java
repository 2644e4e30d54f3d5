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
    /**
     * The largest message without a part, such as a TCP hello: a participant header (its job name at most 64 KiB, as
     * {@link DataOutputStream#writeUTF} writes it), its key and its tag.
     */
    static final int MAX_HEADER_BYTES = 1 << 17;
    /** The largest rendezvous file: a participant header and one part. */
    static final int MAX_MESSAGE_BYTES = MAX_PART_BYTES + MAX_HEADER_BYTES;

    private Wire() {
    }

    static void writePart(DataOutputStream out, byte[] part) throws IOException {
        write(out, part, MAX_PART_BYTES, "a part");
    }

    /** Reads one part from {@code in}; {@code source} names where it comes from in the error. */
    static byte[] readPart(DataInputStream in, String source) throws IOException {
        return read(in, MAX_PART_BYTES, "a part", source);
    }

    /** A sealed message ({@link Participant}) as one length-prefixed piece, at most {@link #MAX_MESSAGE_BYTES}. */
    static void writeMessage(DataOutputStream out, byte[] message) throws IOException {
        write(out, message, MAX_MESSAGE_BYTES, "a message");
    }

    static byte[] readMessage(DataInputStream in, String source) throws IOException {
        return read(in, MAX_MESSAGE_BYTES, "a message", source);
    }

    /** Reads a message without a part (a TCP hello), at most {@link #MAX_HEADER_BYTES}. */
    static byte[] readHeaderMessage(DataInputStream in, String source) throws IOException {
        return read(in, MAX_HEADER_BYTES, "a hello", source);
    }

    private static void write(DataOutputStream out, byte[] bytes, int most, String what) throws IOException {
        requireSize(bytes.length, most, what, what + " to send");
        out.writeInt(bytes.length);
        out.write(bytes);
    }

    private static byte[] read(DataInputStream in, int most, String what, String source) throws IOException {
        int n = in.readInt();
        requireSize(n, most, what, source);
        byte[] bytes = new byte[n];
        in.readFully(bytes);
        return bytes;
    }

    private static void requireSize(int n, int most, String what, String source) {
        if (n < 0 || n > most) {
            throw new RendezvousException(source + ": " + what + " of " + n + " bytes; " + what + " has 0 to " + most);
        }
    }
}
