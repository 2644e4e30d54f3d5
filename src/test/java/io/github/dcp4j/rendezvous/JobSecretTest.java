package io.github.dcp4j.rendezvous;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserPrincipal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
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
 * The run's secret on every rendezvous: a rank without one, or with one too short, refuses before it opens anything; a
 * participant with another secret, a message without a tag, or a leftover of an earlier run is refused by name; a
 * forged file is refused; rank files are created owner-only, never through a link, and files of another user are not
 * read. No GPU.
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
    void aRankWithAnotherSecretIsRefusedNamingTheSecret(String kind) throws Exception {
        List<Exception> e = pair(kind, OTHER);
        // the store (rank 0) refuses rank 1's hello and rank 1 is told; in a directory rank 0 reads rank 1's file
        String refused = e.get(kind.equals("dir") ? 0 : 1).getMessage();
        assertTrue(refused.contains(Rendezvous.DCP4J_JOB_SECRET) && refused.contains("rank 1"), refused);
    }

    /** A message as a participant without a secret would write it: no run id, no tag. */
    private static byte[] untagged(String key, byte[] part) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(bytes);
        out.writeLong(Participant.MAGIC);
        out.writeUTF("job");
        out.writeUTF("");
        out.writeInt(2);
        out.writeInt(1);
        out.writeLong(4242);
        out.writeUTF(key);
        if (part != null) {
            Wire.writePart(out, part);
        }
        Wire.writePart(out, new byte[0]);
        out.flush();
        return bytes.toByteArray();
    }

    /**
     * Rank 1's message for {@code key} as it reaches rank 0 (a hello to its store, or a file in the directory), and
     * rank 0's refusal of it.
     */
    private String refusalOf(String kind, String key, byte[] message) throws Exception {
        if (kind.equals("dir")) {
            Files.write(dir.resolve(key + ".1"), message);
            try (Rendezvous rank0 = open("dir", 0, SECRET, 0, 2, Duration.ofSeconds(2))) {
                return assertThrows(RendezvousException.class, () -> rank0.allGather("x", new byte[] {0}))
                        .getMessage();
            }
        }
        int port = freePort();
        try (Rendezvous rank0 = open("tcp", port, SECRET, 0, 2, Duration.ofSeconds(2));
             Socket raw = new Socket("127.0.0.1", port)) {
            DataOutputStream out = new DataOutputStream(raw.getOutputStream());
            out.writeInt(TcpRendezvous.HELLO);
            Wire.writeMessage(out, message);
            out.flush();
            DataInputStream in = new DataInputStream(raw.getInputStream());
            assertEquals(TcpRendezvous.ERROR, in.readInt(), "the store refuses the hello");
            return in.readUTF();
        }
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"dir", "tcp"})
    void aMessageWithoutATagIsRefusedNamingTheSecret(String kind) throws Exception {
        String key = kind.equals("dir") ? "1-x" : TcpRendezvous.HELLO_KEY;
        String refused = refusalOf(kind, key, untagged(key, kind.equals("dir") ? new byte[] {1} : null));
        assertTrue(refused.contains("rank 1 (pid 4242)") && refused.contains("sent without a secret")
                && refused.contains(Rendezvous.DCP4J_JOB_SECRET), refused);
    }

    /**
     * Two runs of one job never accept each other's messages, even where their run ids were the same: a message that
     * names this run's id but is tagged under another secret is refused as forged.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"dir", "tcp"})
    void aMessageNamingThisRunButTaggedUnderAnotherSecretIsRefusedAsForged(String kind) throws Exception {
        String key = kind.equals("dir") ? "1-x" : TcpRendezvous.HELLO_KEY;
        Participant impostor = new Participant("job", JobSecret.of(SECRET).run(), 2, 1, 4242);
        byte[] message = impostor.seal(JobSecret.of(OTHER), key, kind.equals("dir") ? new byte[] {1} : null);
        String refused = refusalOf(kind, key, message);
        assertTrue(refused.contains("rank 1 (pid 4242)") && refused.contains("does not verify"), refused);
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
    void theSecretComesFromTheEnvironment() throws Exception {
        int port = freePort();
        try (Rendezvous rv = Rendezvous.fromEnvironment(Map.of("RANK", "0", "WORLD_SIZE", "1", "MASTER_ADDR",
                "127.0.0.1", "MASTER_PORT", "" + port, Rendezvous.DCP4J_JOB_SECRET, SECRET), Duration.ofSeconds(1))) {
            assertEquals(1, rv.allGather("solo", new byte[0]).size());
        }
    }

    /**
     * Rank 1 of each rendezvous, its environment without a secret, with an empty one or one of 31 characters: refused
     * naming the variable, why and how to set it, before it writes the directory or connects to the store.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"dir", "tcp", "torch"})
    void aRankWithoutASecretOrWithAShortOneRefusesBeforeItOpensAnything(String kind) throws Exception {
        String[][] cases = {{null, "is not set"}, {"", "is empty"},
            {SECRET.substring(1), "has 31 characters, fewer than the 32 a secret needs"}};
        for (String[] c : cases) {
            try (ServerSocket store = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
                Map<String, String> env = new HashMap<>(Map.of("RANK", "1", "WORLD_SIZE", "2"));
                if (kind.equals("dir")) {
                    env.put(Rendezvous.DCP4J_RENDEZVOUS_DIR, dir.toString());
                } else {
                    env.put(Rendezvous.MASTER_ADDR, "127.0.0.1");
                    env.put(Rendezvous.MASTER_PORT, "" + store.getLocalPort());
                }
                if (kind.equals("torch")) {
                    env.put(Rendezvous.TORCHELASTIC_USE_AGENT_STORE, "True");
                }
                if (c[0] != null) {
                    env.put(Rendezvous.DCP4J_JOB_SECRET, c[0]);
                }
                EnvironmentException e = assertThrows(EnvironmentException.class,
                        () -> Rendezvous.fromEnvironment(env, Duration.ofSeconds(2)));
                assertEquals(Rendezvous.DCP4J_JOB_SECRET, e.variable());
                assertTrue(e.getMessage().startsWith(Rendezvous.DCP4J_JOB_SECRET + " " + c[1] + ": rank 1 joins no"
                        + " group without it") && e.getMessage().contains("authenticated")
                        && e.getMessage().contains(JobSecret.SHELL_COMMAND + " before torchrun")
                        && e.getMessage().contains("`dcp4j launch` makes a fresh one itself"), e.getMessage());
                store.setSoTimeout(200);
                assertThrows(SocketTimeoutException.class, store::accept, "nothing connected to the store");
                try (var files = Files.list(dir)) {
                    assertEquals(0, files.count(), "nothing written in the directory");
                }
            }
        }
    }

    /** The message says how to pass the secret on under the launcher that started the rank. */
    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
        "OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE | before mpirun, and pass it on with `mpirun -x DCP4J_JOB_SECRET",
        "PMI_RANK, PMI_SIZE                         | before mpiexec or srun",
        "SLURM_PROCID, SLURM_NTASKS, SLURM_STEP_ID  | before srun, or in the batch script",
        "RANK, WORLD_SIZE                           | before torchrun (its workers inherit it), or set the same value"})
    void theMessageSaysHowToSetTheSecretUnderEachLauncher(String variables, String howTo) {
        Map<String, String> env = new HashMap<>();
        for (String v : variables.split(",")) {
            env.put(v.strip(), v.contains("RANK") || v.contains("PROCID") ? "0" : "2");
        }
        EnvironmentException e = assertThrows(EnvironmentException.class,
                () -> Rendezvous.fromEnvironment(env, Duration.ofSeconds(1)));
        assertTrue(e.getMessage().contains(JobSecret.SHELL_COMMAND + " " + howTo), e.getMessage());
    }

    @Test
    void aSecretGivenThroughTheApiMustHaveTheMinimumLength() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> JobSecret.of(SECRET.substring(1)));
        assertTrue(e.getMessage().contains("at least 32 characters") && e.getMessage().contains("got 31"),
                e.getMessage());
        assertThrows(NullPointerException.class, () -> JobSecret.of(null));
        assertTrue(!JobSecret.of(SECRET).toString().contains(SECRET), "toString does not reveal the secret");
    }

    @Test
    void generatedSecretsDifferAndRunIdsDoNotRevealThem() {
        String a = JobSecret.generate();
        String b = JobSecret.generate();
        assertNotEquals(a, b);
        assertEquals(2 * JobSecret.GENERATED_BYTES, a.length());
        String run = JobSecret.of(a).run();
        assertEquals(16, run.length());
        assertTrue(!a.contains(run), "the run id is not a piece of the secret");
        assertEquals(run, JobSecret.of(a).run(), "the same secret, the same run");
        assertNotEquals(run, JobSecret.of(b).run(), "another secret, another run");
    }
}
