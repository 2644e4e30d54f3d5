package io.github.dcp4j.rendezvous;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;

/**
 * Who a rendezvous message comes from: the job, the run (a hash of the job's secret, {@link JobSecret#run()}), the
 * world size, the rank and the process, so that a stale or foreign participant is recognised and named. A message
 * is sealed: this participant, the key it was written for (the exchange, so that it cannot be moved to another),
 * then the rank's part where it has one, then the tag of everything before it under the run's secret.
 *
 * <pre>
 * participant  magic u64 | job UTF | run UTF | world size i32 | rank i32 | pid i64
 * message      participant | key UTF | [part: length i32, bytes] | tag: length i32, bytes (32)
 * </pre>
 */
record Participant(String job, String run, int worldSize, int rank, long pid) {
    /** "dcp4jRDV": marks a rendezvous message. */
    static final long MAGIC = 0x6463703452445631L;

    /** A message read back: who sent it, for which key, its part (null where it has none), whether its tag verified. */
    record Opened(Participant from, String key, byte[] part, boolean authentic) {
    }

    static Participant self(String job, JobSecret secret, int rank, int worldSize) {
        return new Participant(job, secret.run(), worldSize, rank, ProcessHandle.current().pid());
    }

    private void write(DataOutputStream out) throws IOException {
        out.writeLong(MAGIC);
        out.writeUTF(job);
        out.writeUTF(run);
        out.writeInt(worldSize);
        out.writeInt(rank);
        out.writeLong(pid);
    }

    /**
     * This participant's message for {@code key} with {@code part} (null: none, as in a TCP hello), tagged under
     * {@code secret}.
     */
    byte[] seal(JobSecret secret, String key, byte[] part) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(bytes);
        write(out);
        out.writeUTF(key);
        if (part != null) {
            Wire.writePart(out, part);
        }
        out.flush();
        byte[] body = bytes.toByteArray();
        Wire.writePart(out, secret.tag(body, body.length));
        out.flush();
        return bytes.toByteArray();
    }

    /**
     * Reads a message that {@link #seal} wrote; {@code withPart}: whether it carries a part. {@code source} names
     * where it comes from in the errors.
     *
     * @throws RendezvousException where it is no rendezvous message, or has bytes after its end
     * @throws IOException where it is cut short
     */
    static Opened open(byte[] raw, boolean withPart, JobSecret secret, String source) throws IOException {
        ByteArrayInputStream bytes = new ByteArrayInputStream(raw);
        DataInputStream in = new DataInputStream(bytes);
        if (in.readLong() != MAGIC) {
            throw new RendezvousException(source + " is not a dcp4j rendezvous message");
        }
        Participant p = new Participant(in.readUTF(), in.readUTF(), in.readInt(), in.readInt(), in.readLong());
        String key = in.readUTF();
        byte[] part = withPart ? Wire.readPart(in, source) : null;
        int body = raw.length - bytes.available();
        byte[] tag = Wire.readPart(in, source);
        if (bytes.available() != 0) {
            throw new RendezvousException(source + ": " + bytes.available() + " bytes after the end of the message");
        }
        return new Opened(p, key, part, secret.verifies(raw, body, tag));
    }

    /**
     * Why the sender of {@code message}, read as {@code key}, cannot join this participant's group, or null if it
     * can: another job, another run of this job, a tag that does not verify, another key (a message moved or
     * replayed), another world size, a rank outside it.
     */
    String refusal(Opened message, String key) {
        Participant other = message.from();
        String who = "rank " + other.rank + " (pid " + other.pid + ")";
        if (!other.job.equals(job)) {
            return who + " belongs to job '" + other.job + "', this is job '" + job + "' (a stale or foreign"
                    + " participant)";
        }
        if (!other.run.equals(run)) {
            return who + " belongs to " + (other.run.isEmpty() ? "no run (it was sent without a secret)"
                    : "run " + other.run) + " of this job, this is run " + run + " (a leftover of an earlier run, or a"
                    + " participant without this run's " + Rendezvous.DCP4J_JOB_SECRET + ")";
        }
        if (!message.authentic()) {
            return who + " sent a message whose tag does not verify under this run's " + Rendezvous.DCP4J_JOB_SECRET
                    + " (forged or altered)";
        }
        if (!message.key().equals(key)) {
            return who + " wrote this message for '" + message.key() + "', not for '" + key + "' (moved or replayed)";
        }
        if (other.worldSize != worldSize) {
            return who + " was started with world size " + other.worldSize + ", rank " + rank + " with " + worldSize;
        }
        if (other.rank < 0 || other.rank >= worldSize) {
            return "pid " + other.pid + " claims rank " + other.rank + ", outside [0, " + worldSize + ")";
        }
        return null;
    }

    /** As {@link #refusal(Opened, String)}, for a message read as rank {@code rank}'s part: it must name that rank. */
    String refusal(Opened message, String key, int rank) {
        String why = refusal(message, key);
        return why == null && message.from().rank != rank ? "it names rank " + message.from().rank : why;
    }
}
