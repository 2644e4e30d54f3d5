package io.github.dcp4j.rendezvous;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;

/**
 * Who a contribution comes from, written before it in a rendezvous file and in a TCP hello: the job, the world size,
 * the rank and the process, so that a stale or foreign participant is recognised and named.
 */
record Participant(String job, int worldSize, int rank, long pid) {
    /** "dcp4jRDV": marks a rendezvous message. */
    static final long MAGIC = 0x6463703452445631L;

    static Participant self(String job, int rank, int worldSize) {
        return new Participant(job, worldSize, rank, ProcessHandle.current().pid());
    }

    void write(DataOutputStream out) throws IOException {
        out.writeLong(MAGIC);
        out.writeUTF(job);
        out.writeInt(worldSize);
        out.writeInt(rank);
        out.writeLong(pid);
    }

    static Participant read(DataInputStream in, String source) throws IOException {
        if (in.readLong() != MAGIC) {
            throw new RendezvousException(source + " is not a dcp4j rendezvous message");
        }
        return new Participant(in.readUTF(), in.readInt(), in.readInt(), in.readLong());
    }

    /** Why {@code other} cannot join this participant's group, or null if it can. */
    String refusal(Participant other) {
        if (!other.job.equals(job)) {
            return "rank " + other.rank + " (pid " + other.pid + ") belongs to job '" + other.job + "', this is job '"
                    + job + "' (a stale or foreign participant)";
        }
        if (other.worldSize != worldSize) {
            return "rank " + other.rank + " (pid " + other.pid + ") was started with world size " + other.worldSize
                    + ", rank " + rank + " with " + worldSize;
        }
        if (other.rank < 0 || other.rank >= worldSize) {
            return "pid " + other.pid + " claims rank " + other.rank + ", outside [0, " + worldSize + ")";
        }
        return null;
    }
}
