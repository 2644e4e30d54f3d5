package io.github.dcp4j.rendezvous;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.locks.LockSupport;

/**
 * A rendezvous in a shared directory, for child JVMs and batch schedulers: each rank's contribution to a key is one
 * file {@code <key>.<rank>}, written to a temporary name and then hard-linked into place, which is atomic and fails
 * if the name exists (so a second process claiming a rank, or a stale file of an earlier job, is noticed). Readers
 * poll for the files of the other ranks. A rank deletes its file of exchange k once exchange k + 1 has completed (every
 * rank has then read it, since no rank publishes k + 1 before it has read all of k), so a rank keeps at most two files
 * and leaves one, its last, which stays until the directory is removed: give each job a fresh directory.
 */
public final class DirectoryRendezvous implements Rendezvous {
    private static final long MAX_POLL_NANOS = 20_000_000L;

    private final Path dir;
    private final Participant self;
    private final Duration timeout;
    private long exchanges;
    /** This rank's file of the last completed exchange, deleted when the next one completes. */
    private Path lastOwnFile;

    public DirectoryRendezvous(Path dir, String job, int rank, int worldSize, Duration timeout) {
        Objects.requireNonNull(dir, "dir");
        Objects.requireNonNull(job, "job");
        Rendezvous.requireRank(rank, worldSize);
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive; got " + timeout);
        }
        if (!Files.isDirectory(dir)) {
            throw new IllegalArgumentException("rendezvous directory " + dir + " does not exist");
        }
        this.dir = dir;
        this.self = Participant.self(job, rank, worldSize);
        this.timeout = timeout;
    }

    @Override
    public int rank() {
        return self.rank();
    }

    @Override
    public int worldSize() {
        return self.worldSize();
    }

    @Override
    public Duration timeout() {
        return timeout;
    }

    @Override
    public String describe() {
        return "directory " + dir;
    }

    @Override
    public synchronized List<byte[]> allGather(String name, byte[] mine) {
        Rendezvous.requireKey(name);
        String key = ++exchanges + "-" + name;
        publish(key, mine);
        byte[][] parts = new byte[worldSize()][];
        parts[rank()] = mine.clone();
        long deadline = System.nanoTime() + timeout.toNanos();
        long pause = 10_000L;
        while (true) {
            boolean missing = false;
            for (int r = 0; r < parts.length; r++) {
                if (parts[r] == null) {
                    parts[r] = read(key, r);
                    missing |= parts[r] == null;
                }
            }
            if (!missing) {
                forgetPrevious(file(key, rank()));
                return Arrays.asList(parts);
            }
            if (System.nanoTime() - deadline > 0) {
                List<Integer> absent = new ArrayList<>();
                for (int r = 0; r < parts.length; r++) {
                    if (parts[r] == null) {
                        absent.add(r);
                    }
                }
                throw new RendezvousException("rendezvous '" + key + "' in " + dir + " timed out after " + timeout
                        + " on rank " + rank() + ": rank(s) " + absent + " never arrived");
            }
            LockSupport.parkNanos(pause);
            pause = Math.min(MAX_POLL_NANOS, pause * 2);
        }
    }

    /** Deletes this rank's file of the exchange before the one just completed: every rank has read it. */
    private void forgetPrevious(Path completed) {
        if (lastOwnFile != null) {
            try {
                Files.deleteIfExists(lastOwnFile);
            } catch (IOException e) {
                throw new UncheckedIOException("rendezvous: cannot delete " + lastOwnFile, e);
            }
        }
        lastOwnFile = completed;
    }

    private Path file(String key, int rank) {
        return dir.resolve(key + "." + rank);
    }

    private void publish(String key, byte[] mine) {
        Path target = file(key, rank());
        Path temp = dir.resolve("." + key + "." + rank() + "." + self.pid() + ".tmp");
        try {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            try (DataOutputStream out = new DataOutputStream(bytes)) {
                self.write(out);
                Wire.writePart(out, mine);
            }
            Files.write(temp, bytes.toByteArray());
            try {
                Files.createLink(target, temp);
            } catch (FileAlreadyExistsException e) {
                Participant other;
                try (DataInputStream in = new DataInputStream(Files.newInputStream(target))) {
                    other = Participant.read(in, target.toString());
                }
                String why = self.refusal(other);
                throw new RendezvousException("cannot join rendezvous '" + key + "' in " + dir + " as rank " + rank()
                        + ": " + target + " exists: " + (why != null ? why
                        : "rank " + rank() + " is already taken by pid " + other.pid() + " of this job"));
            } finally {
                Files.deleteIfExists(temp);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("rendezvous '" + key + "': cannot write " + target, e);
        }
    }

    /** Rank {@code r}'s contribution to {@code key}, or null if it has not arrived. */
    private byte[] read(String key, int r) {
        Path f = file(key, r);
        byte[] raw;
        try {
            BasicFileAttributes file = Files.readAttributes(f, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
            if (!file.isRegularFile() || file.size() > Wire.MAX_MESSAGE_BYTES) {
                throw new RendezvousException("rendezvous '" + key + "' in " + dir + " refused " + f + ": "
                        + (file.isRegularFile() ? file.size() + " bytes, more than a rank writes ("
                        + Wire.MAX_MESSAGE_BYTES + " at most)" : "not a regular file"));
            }
            raw = Files.readAllBytes(f);
        } catch (NoSuchFileException e) {
            return null;
        } catch (IOException e) {
            throw new UncheckedIOException("rendezvous '" + key + "': cannot read " + f, e);
        }
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(raw))) {
            Participant other = Participant.read(in, f.toString());
            String why = self.refusal(other);
            if (why == null && other.rank() != r) {
                why = f + " names rank " + other.rank();
            }
            if (why != null) {
                throw new RendezvousException("rendezvous '" + key + "' in " + dir + " refused " + f + ": " + why);
            }
            return Wire.readPart(in, f.toString());
        } catch (IOException e) {
            throw new RendezvousException("rendezvous '" + key + "': " + f + " is truncated or corrupt", e);
        }
    }

    /** Nothing to release: the files stay with the directory. */
    @Override
    public void close() {
    }

    @Override
    public String toString() {
        return "rank " + rank() + " of " + worldSize() + " in " + describe();
    }
}
