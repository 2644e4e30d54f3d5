package io.github.dcp4j.rendezvous;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.SeekableByteChannel;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileAttribute;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserPrincipal;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;

/**
 * A rendezvous in a shared directory, for child JVMs and batch schedulers: each rank's contribution to a key is one
 * file {@code <key>.<rank>}, a sealed message ({@link Participant}), written to a fresh random temporary name
 * (created new, owner-only, never through a link) and then hard-linked into place, which is atomic and fails if the
 * name exists (so a second process claiming a rank, or a stale file of an earlier job or run, is noticed). A file is
 * read only if it is a regular file of this rank's user, no larger than a rank writes, of this job and run, with a
 * tag that verifies under the run's secret. Readers
 * poll for the files of the other ranks. A rank deletes its file of exchange k once exchange k + 1 has completed (every
 * rank has then read it, since no rank publishes k + 1 before it has read all of k), so a rank keeps at most two files
 * and leaves one, its last, which stays until the directory is removed: give each job a fresh directory.
 */
public final class DirectoryRendezvous implements Rendezvous {
    private static final long MAX_POLL_NANOS = 20_000_000L;
    /** How a rank's temporary file is opened: created new, never through a link. */
    private static final Set<OpenOption> CREATE_OWN = Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE,
            LinkOption.NOFOLLOW_LINKS);
    private static final SecureRandom RANDOM = new SecureRandom();

    private final Path dir;
    private final Participant self;
    private final JobSecret secret;
    /** Who owns the files this rank writes, and so must own its peers' (null where the file system has no owners). */
    private UserPrincipal user;
    private final Duration timeout;
    private long exchanges;
    /** This rank's file of the last completed exchange, deleted when the next one completes. */
    private Path lastOwnFile;

    /**
     * A rank of a group meeting in {@code dir}, every file tagged with {@code secret}.
     *
     * @param dir       the shared directory
     * @param job       the job's id: files of other jobs are refused
     * @param secret    the run's secret, the same on every rank: files of other runs, or not tagged under it, are
     *                  refused
     * @param rank      this rank
     * @param worldSize the ranks in the group
     * @param timeout   how long one exchange waits for every rank
     */
    public DirectoryRendezvous(Path dir, String job, JobSecret secret, int rank, int worldSize, Duration timeout) {
        Objects.requireNonNull(dir, "dir");
        Objects.requireNonNull(job, "job");
        Objects.requireNonNull(secret, "secret");
        Rendezvous.requireRank(rank, worldSize);
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive; got " + timeout);
        }
        if (!Files.isDirectory(dir)) {
            throw new IllegalArgumentException("rendezvous directory " + dir + " does not exist");
        }
        this.dir = dir;
        this.self = Participant.self(job, secret, rank, worldSize);
        this.secret = secret;
        this.timeout = timeout;
        this.user = currentUser(dir);
    }

    private static UserPrincipal ownerOf(Path file) {
        try {
            return Files.getOwner(file, LinkOption.NOFOLLOW_LINKS);
        } catch (IOException | UnsupportedOperationException e) {
            return null;
        }
    }

    private static UserPrincipal currentUser(Path dir) {
        try {
            return dir.getFileSystem().getUserPrincipalLookupService()
                    .lookupPrincipalByName(System.getProperty("user.name"));
        } catch (IOException | UnsupportedOperationException e) {
            return null;
        }
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

    /**
     * The bytes of rank file {@code f}, opened once without following a link: a regular file of this rank's user, at
     * most {@link Wire#MAX_MESSAGE_BYTES} long, else refused by name.
     */
    private byte[] readBounded(String key, Path f) throws IOException {
        BasicFileAttributes file = Files.readAttributes(f, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        if (!file.isRegularFile()) {
            throw refused(key, f, file.isSymbolicLink() ? "a symbolic link" : "not a regular file");
        }
        UserPrincipal owner = user == null ? null : Files.getOwner(f, LinkOption.NOFOLLOW_LINKS);
        if (owner != null && !owner.equals(user)) {
            throw refused(key, f, "owned by " + owner.getName() + ", not by " + user.getName()
                    + ", who runs this rank");
        }
        ByteBuffer b;
        long size;
        try (SeekableByteChannel ch = Files.newByteChannel(f, Set.of(StandardOpenOption.READ,
                LinkOption.NOFOLLOW_LINKS))) {
            size = ch.size();
            if (size > Wire.MAX_MESSAGE_BYTES) {
                throw refused(key, f, size + " bytes, more than a rank writes (" + Wire.MAX_MESSAGE_BYTES
                        + " at most)");
            }
            b = ByteBuffer.allocate((int) size + 1);  // one byte more: a file that grows is seen to grow
            fill(ch, b);
        } catch (NoSuchFileException e) {
            throw e;
        } catch (IOException e) {
            throw refused(key, f, e.getMessage());  // e.g. replaced by a link since its attributes were read
        }
        if (b.position() > size) {
            throw refused(key, f, "it grew while it was read (a rank's file is written whole before it appears)");
        }
        return Arrays.copyOf(b.array(), b.position());
    }

    private RendezvousException refused(String key, Path f, String why) {
        return new RendezvousException("rendezvous '" + key + "' in " + dir + " refused " + f + ": " + why);
    }

    /** Reads into {@code b} until it is full or the file ends. */
    private static void fill(SeekableByteChannel ch, ByteBuffer b) throws IOException {
        int n = 0;
        while (b.hasRemaining() && n >= 0) {
            n = ch.read(b);
        }
    }

    /**
     * Writes this rank's file: to a temporary name with a random part, created new (never through a link, never over
     * an existing file) and readable by its owner alone, then hard-linked into place.
     */
    private void publish(String key, byte[] mine) {
        Path target = file(key, rank());
        Path temp = dir.resolve("." + rank() + "." + HexFormat.of().formatHex(randomBytes()) + ".tmp");
        try {
            byte[] message = self.seal(secret, key, mine);
            try (SeekableByteChannel out = Files.newByteChannel(temp, CREATE_OWN, ownerOnly(temp))) {
                if (user == null) {
                    user = ownerOf(temp);  // where the user's name is not in the system's user list
                }
                ByteBuffer b = ByteBuffer.wrap(message);
                while (b.hasRemaining()) {
                    out.write(b);
                }
            }
            try {
                Files.createLink(target, temp);
            } catch (FileAlreadyExistsException e) {
                String why = "rank " + rank() + " is already taken";
                try {
                    Participant.Opened other = Participant.open(readBounded(key, target), true, secret,
                            target.toString());
                    String refusal = self.refusal(other, key);
                    why = refusal != null ? refusal : why + " by pid " + other.from().pid() + " of this run";
                } catch (IOException | RendezvousException unreadable) {
                    why = why + " (the file there cannot be read as a rendezvous message: "
                            + unreadable.getMessage() + ")";
                }
                throw new RendezvousException("cannot join rendezvous '" + key + "' in " + dir + " as rank " + rank()
                        + ": " + target + " exists: " + why);
            } finally {
                Files.deleteIfExists(temp);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("rendezvous '" + key + "': cannot write " + target + ": " + e, e);
        }
    }

    private static FileAttribute<?>[] ownerOnly(Path file) {
        return file.getFileSystem().supportedFileAttributeViews().contains("posix")
                ? new FileAttribute<?>[] {PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString(
                        "rw-------"))}
                : new FileAttribute<?>[0];
    }

    private static byte[] randomBytes() {
        byte[] b = new byte[8];
        RANDOM.nextBytes(b);
        return b;
    }

    /** Rank {@code r}'s contribution to {@code key}, or null if it has not arrived. */
    private byte[] read(String key, int r) {
        Path f = file(key, r);
        byte[] raw;
        try {
            raw = readBounded(key, f);
        } catch (NoSuchFileException e) {
            return null;
        } catch (IOException e) {
            throw new UncheckedIOException("rendezvous '" + key + "': cannot read " + f, e);
        }
        try {
            Participant.Opened other = Participant.open(raw, true, secret, f.toString());
            String why = self.refusal(other, key, r);
            if (why != null) {
                throw new RendezvousException("rendezvous '" + key + "' in " + dir + " refused " + f + ": " + why);
            }
            return other.part();
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
