package io.github.dcp4j.rendezvous;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserPrincipal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The run's secret on both rendezvous: a participant with another secret, without one, or a leftover of an earlier
 * run is refused by name; a forged file is refused; rank files are created owner-only, never through a link, and
 * files of another user are not read. No GPU.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class JobSecretTest {
    private static final String SECRET = "0123456789abcdef0123456789abcdef";
    private static final String OTHER = "fedcba9876543210fedcba9876543210";

    @TempDir
    Path dir;

    private Rendezvous open(String kind, int port, String secret, int rank, int world, Duration timeout) {
        return open(kind, dir, port, secret, rank, world, timeout);
    }

    private static Rendezvous open(String kind, Path where, int port, String secret, int rank, int world,
                                   Duration timeout) {
        JobSecret s = JobSecret.of(secret);
        return kind.equals("dir") ? new DirectoryRendezvous(where, "job", s, rank, world, timeout)
                : TcpRendezvous.connect("127.0.0.1", port, "job", s, rank, world, timeout);
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    /** Rank 0 with SECRET, rank 1 with {@code secret1}: each rank's exception, or null where its exchange worked. */
    private List<Exception> pair(String kind, String secret1) throws Exception {
        int port = freePort();
        Path where = Files.createTempDirectory(dir, "pair");
        ExecutorService pool = Executors.newFixedThreadPool(2);
        List<Future<Exception>> got = new ArrayList<>();
        for (int r = 0; r < 2; r++) {
            int rank = r;
            got.add(pool.submit(() -> {
                try (Rendezvous rv = open(kind, where, port, rank == 0 ? SECRET : secret1, rank, 2,
                        Duration.ofSeconds(2))) {
                    rv.allGather("x", new byte[] {(byte) rank});
                    return null;
                } catch (RendezvousException e) {
                    return e;
                }
            }));
        }
        pool.shutdown();
        return List.of(got.get(0).get() == null ? new Exception("none") : got.get(0).get(),
                got.get(1).get() == null ? new Exception("none") : got.get(1).get());
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"dir", "tcp"})
    void ranksWithTheSameSecretMeet(String kind) throws Exception {
        List<Exception> e = pair(kind, SECRET);
        assertEquals("none", e.get(0).getMessage());
        assertEquals("none", e.get(1).getMessage());
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"dir", "tcp"})
    void aRankWithAnotherSecretOrNoneIsRefusedNamingTheSecret(String kind) throws Exception {
        for (String secret1 : new String[] {OTHER, null}) {
            List<Exception> e = pair(kind, secret1);
            // the store (rank 0) refuses rank 1's hello and rank 1 is told; in a directory rank 0 reads rank 1's file
            String refused = e.get(kind.equals("dir") ? 0 : 1).getMessage();
            assertTrue(refused.contains(Rendezvous.DCP4J_JOB_SECRET) && refused.contains("rank 1"), refused);
        }
    }

    @Test
    void aLeftoverFileOfAnEarlierRunIsRefusedAsSuch() throws Exception {
        try (Rendezvous earlier = open("dir", 0, OTHER, 1, 2, Duration.ofMillis(200))) {
            assertThrows(RendezvousException.class, () -> earlier.allGather("x", new byte[] {1}));
        }
        try (Rendezvous now = open("dir", 0, SECRET, 0, 2, Duration.ofSeconds(2))) {
            RendezvousException e = assertThrows(RendezvousException.class,
                    () -> now.allGather("x", new byte[] {0}));
            assertTrue(e.getMessage().contains("1-x.1") && e.getMessage().contains("a leftover of an earlier run"),
                    e.getMessage());
        }
    }

    @Test
    void aFileWhoseBytesWereChangedIsRefusedAsForged() throws Exception {
        try (Rendezvous rank1 = open("dir", 0, SECRET, 1, 2, Duration.ofMillis(200))) {
            assertThrows(RendezvousException.class, () -> rank1.allGather("x", "payload".getBytes(
                    StandardCharsets.UTF_8)));
        }
        Path f = dir.resolve("1-x.1");
        byte[] raw = Files.readAllBytes(f);
        String text = new String(raw, StandardCharsets.ISO_8859_1).replace("payload", "PAYLOAD");
        Files.delete(f);
        Files.write(f, text.getBytes(StandardCharsets.ISO_8859_1));
        try (Rendezvous rank0 = open("dir", 0, SECRET, 0, 2, Duration.ofSeconds(2))) {
            RendezvousException e = assertThrows(RendezvousException.class,
                    () -> rank0.allGather("x", new byte[] {0}));
            assertTrue(e.getMessage().contains("does not verify"), e.getMessage());
        }
    }

    @Test
    void aFileMovedToAnotherExchangeIsRefusedAsReplayed() throws Exception {
        try (Rendezvous rank1 = open("dir", 0, SECRET, 1, 2, Duration.ofMillis(200))) {
            assertThrows(RendezvousException.class, () -> rank1.allGather("x", new byte[] {1}));
        }
        // whoever can write the directory renames rank 1's sealed file of exchange 1 to exchange 1 of another name
        Files.move(dir.resolve("1-x.1"), dir.resolve("1-y.1"));
        try (Rendezvous rank0 = open("dir", 0, SECRET, 0, 2, Duration.ofSeconds(2))) {
            RendezvousException e = assertThrows(RendezvousException.class,
                    () -> rank0.allGather("y", new byte[] {0}));
            assertTrue(e.getMessage().contains("moved or replayed"), e.getMessage());
        }
    }

    @Test
    void aSymbolicLinkOrAnOversizedFileAtARanksNameIsRefusedByName() throws Exception {
        Path link = Files.createSymbolicLink(dir.resolve("1-x.1"), Path.of("/dev/zero"));
        try (Rendezvous rank0 = open("dir", 0, SECRET, 0, 2, Duration.ofSeconds(2))) {
            RendezvousException e = assertThrows(RendezvousException.class,
                    () -> rank0.allGather("x", new byte[] {0}));
            assertTrue(e.getMessage().contains("1-x.1") && e.getMessage().contains("symbolic link"), e.getMessage());
        } finally {
            Files.delete(link);
        }
        Path other = Files.createDirectory(dir.resolve("other"));
        Files.write(other.resolve("1-x.1"), new byte[Wire.MAX_MESSAGE_BYTES + 1]);
        try (Rendezvous rank0 = new DirectoryRendezvous(other, "job", JobSecret.of(SECRET), 0, 2,
                Duration.ofSeconds(2))) {
            RendezvousException e = assertThrows(RendezvousException.class,
                    () -> rank0.allGather("x", new byte[] {0}));
            assertTrue(e.getMessage().contains("more than a rank writes"), e.getMessage());
        }
    }

    @Test
    void rankFilesAreOwnerOnlyAndALinkAtTheirNameIsNeverWrittenThrough() throws Exception {
        assumeTrue(dir.getFileSystem().supportedFileAttributeViews().contains("posix"));
        Path victim = Files.writeString(dir.resolve("victim"), "keep me");
        Files.createSymbolicLink(dir.resolve("1-x.0"), victim);
        try (Rendezvous rank0 = open("dir", 0, SECRET, 0, 1, Duration.ofSeconds(1))) {
            RendezvousException e = assertThrows(RendezvousException.class,
                    () -> rank0.allGather("x", new byte[] {0}));
            assertTrue(e.getMessage().contains("1-x.0 exists"), e.getMessage());
        }
        assertEquals("keep me", Files.readString(victim));
        try (Rendezvous rank0 = open("dir", 0, SECRET, 0, 1, Duration.ofSeconds(1))) {
            assertArrayEquals(new byte[] {7}, rank0.allGather("y", new byte[] {7}).getFirst());
        }
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(
                dir.resolve("1-y.0"), LinkOption.NOFOLLOW_LINKS)));
        try (var left = Files.list(dir)) {
            assertTrue(left.noneMatch(p -> p.getFileName().toString().endsWith(".tmp")), "no temporary file left");
        }
    }

    @Test
    void aRankFileOfAnotherUserIsNotRead() throws Exception {
        assumeTrue(System.getProperty("user.name").equals("root"), "changing a file's owner needs root");
        try (Rendezvous rank1 = open("dir", 0, SECRET, 1, 2, Duration.ofMillis(200))) {
            assertThrows(RendezvousException.class, () -> rank1.allGather("x", new byte[] {1}));
        }
        UserPrincipal nobody;
        try {
            nobody = dir.getFileSystem().getUserPrincipalLookupService().lookupPrincipalByName("nobody");
        } catch (IOException e) {
            assumeTrue(false, "no user 'nobody' here");
            return;
        }
        Files.setOwner(dir.resolve("1-x.1"), nobody);
        try (Rendezvous rank0 = open("dir", 0, SECRET, 0, 2, Duration.ofSeconds(2))) {
            RendezvousException e = assertThrows(RendezvousException.class,
                    () -> rank0.allGather("x", new byte[] {0}));
            assertTrue(e.getMessage().contains("owned by nobody"), e.getMessage());
        }
    }

    @Test
    void theSecretComesFromTheEnvironmentAndAShortOneIsRefused() throws Exception {
        int port = freePort();
        try (Rendezvous rv = Rendezvous.fromEnvironment(Map.of("RANK", "0", "WORLD_SIZE", "1", "MASTER_ADDR",
                "127.0.0.1", "MASTER_PORT", "" + port, Rendezvous.DCP4J_JOB_SECRET, SECRET), Duration.ofSeconds(1))) {
            assertEquals(1, rv.allGather("solo", new byte[0]).size());
        }
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Rendezvous.fromEnvironment(Map.of("RANK", "0", "WORLD_SIZE", "1", "DCP4J_RENDEZVOUS_DIR",
                        dir.toString(), Rendezvous.DCP4J_JOB_SECRET, "short"), Duration.ofSeconds(1)));
        assertTrue(e.getMessage().contains(Rendezvous.DCP4J_JOB_SECRET) && e.getMessage().contains("16"),
                e.getMessage());
    }

    @Test
    void generatedSecretsDifferAndRunIdsDoNotRevealThem() {
        String a = Rendezvous.newJobSecret();
        String b = Rendezvous.newJobSecret();
        assertNotEquals(a, b);
        assertEquals(2 * JobSecret.GENERATED_BYTES, a.length());
        String run = JobSecret.of(a).run();
        assertEquals(16, run.length());
        assertTrue(!a.contains(run), "the run id is not a piece of the secret");
        assertEquals(run, JobSecret.of(a).run(), "the same secret, the same run");
        assertEquals("", JobSecret.NONE.run());
    }
}
