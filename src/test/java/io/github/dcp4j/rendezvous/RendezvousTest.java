package io.github.dcp4j.rendezvous;

import io.github.dcp4j.Fifos;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.DataOutputStream;
import java.io.IOException;
import java.net.ConnectException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** Both rendezvous implementations with ranks as threads: exchanges, bounded waits, and refused participants. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RendezvousTest {
    /** The run's secret that every rank of these tests shares. */
    private static final String SECRET_VALUE = JobSecret.generate();
    private static final JobSecret SECRET = JobSecret.of(SECRET_VALUE);

    @TempDir
    Path dir;

    /** Opens rank {@code rank} of a group of {@code world} on the implementation {@code kind} (dir or tcp). */
    interface Opener {
        Rendezvous open(int rank, int world, String job, Duration timeout);
    }

    private Opener opener(String kind) throws IOException {
        if (kind.equals("dir")) {
            return (rank, world, job, timeout) -> new DirectoryRendezvous(dir, job, SECRET, rank, world, timeout);
        }
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        return (rank, world, job, timeout) -> TcpRendezvous.connect("127.0.0.1", port, job, SECRET, rank, world,
                timeout);
    }

    /** Runs {@code body} as every rank of a group, each on its own thread, and returns each rank's result. */
    private static <T> List<Future<T>> asRanks(int world, RankBody<T> body) {
        ExecutorService pool = Executors.newFixedThreadPool(world);
        List<Future<T>> results = new ArrayList<>();
        for (int r = 0; r < world; r++) {
            int rank = r;
            results.add(pool.submit(() -> body.run(rank)));
        }
        pool.shutdown();
        return results;
    }

    interface RankBody<T> {
        T run(int rank) throws Exception;
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"dir", "tcp"})
    void everyRankReceivesEveryContributionInRankOrderRoundAfterRound(String kind) throws Exception {
        Opener open = opener(kind);
        int world = 5;
        byte[][][] sent = new byte[3][world][];
        SplittableRandom random = new SplittableRandom(7);
        for (int round = 0; round < 3; round++) {
            for (int r = 0; r < world; r++) {
                sent[round][r] = new byte[random.nextInt(0, 2000)];
                random.nextBytes(sent[round][r]);
            }
        }
        List<Future<List<List<byte[]>>>> got = asRanks(world, rank -> {
            try (Rendezvous rv = open.open(rank, world, "job-a", Duration.ofSeconds(20))) {
                List<List<byte[]>> rounds = new ArrayList<>();
                for (int round = 0; round < 3; round++) {
                    rounds.add(rv.allGather("same-name", sent[round][rank]));
                }
                return rounds;
            }
        });
        for (Future<List<List<byte[]>>> f : got) {
            List<List<byte[]>> rounds = f.get();
            for (int round = 0; round < 3; round++) {
                for (int r = 0; r < world; r++) {
                    assertArrayEquals(sent[round][r], rounds.get(round).get(r), "round " + round + " rank " + r);
                }
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"dir", "tcp"})
    void aRankThatNeverArrivesIsNamedAfterTheTimeout(String kind) throws Exception {
        Opener open = opener(kind);
        int world = 3;
        List<Future<Exception>> got = asRanks(world, rank -> {
            if (rank == 2) {
                return null;
            }
            try (Rendezvous rv = open.open(rank, world, "job-b", Duration.ofMillis(800))) {
                long start = System.nanoTime();
                RendezvousException e = assertThrows(RendezvousException.class,
                        () -> rv.allGather("waits", new byte[] {1}));
                double s = (System.nanoTime() - start) / 1e9;
                assertTrue(s < 5, "gave up within the timeout, not after " + s + " s");
                return e;
            } catch (RendezvousException e) {
                return e;
            }
        });
        for (int r = 0; r < 2; r++) {
            Exception e = got.get(r).get();
            assertTrue(e.getMessage().contains("[2]"), "rank " + r + ": " + e.getMessage());
        }
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"dir", "tcp"})
    void aParticipantOfAnotherJobIsRefused(String kind) throws Exception {
        Opener open = opener(kind);
        List<Future<Exception>> got = asRanks(2, rank -> {
            try (Rendezvous rv = open.open(rank, 2, rank == 0 ? "job-c" : "job-other", Duration.ofSeconds(2))) {
                rv.allGather("x", new byte[] {(byte) rank});
                return null;
            } catch (RendezvousException e) {
                return e;
            }
        });
        Exception refused = got.get(kind.equals("dir") ? 0 : 1).get();
        assertInstanceOf(RendezvousException.class, refused);
        assertTrue(refused.getMessage().contains("job-other") && refused.getMessage().contains("job-c"),
                refused.getMessage());
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"dir", "tcp"})
    void aParticipantWithAnotherWorldSizeIsRefused(String kind) throws Exception {
        Opener open = opener(kind);
        List<Future<Exception>> got = asRanks(2, rank -> {
            try (Rendezvous rv = open.open(rank, rank == 0 ? 2 : 3, "job-d", Duration.ofSeconds(2))) {
                rv.allGather("x", new byte[] {(byte) rank});
                return null;
            } catch (RendezvousException e) {
                return e;
            }
        });
        Exception refused = got.get(kind.equals("dir") ? 0 : 1).get();
        assertInstanceOf(RendezvousException.class, refused);
        assertTrue(refused.getMessage().contains("world size 3"), refused.getMessage());
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"dir", "tcp"})
    void aSecondProcessClaimingATakenRankIsRefused(String kind) throws Exception {
        Opener open = opener(kind);
        try (Rendezvous zero = kind.equals("tcp") ? open.open(0, 3, "job-e", Duration.ofSeconds(5)) : null;
             Rendezvous first = open.open(1, 3, "job-e", Duration.ofSeconds(5))) {
            if (kind.equals("dir")) {
                Future<?> waiting = Executors.newSingleThreadExecutor().submit(() -> {
                    try {
                        first.allGather("claim", new byte[] {1});
                    } catch (RendezvousException e) {
                        return e;
                    }
                    return null;
                });
                while (!Files.exists(dir.resolve("1-claim.1"))) {
                    Thread.sleep(5);
                }
                try (Rendezvous second = open.open(1, 3, "job-e", Duration.ofSeconds(5))) {
                    RendezvousException e = assertThrows(RendezvousException.class,
                            () -> second.allGather("claim", new byte[] {2}));
                    assertTrue(e.getMessage().contains("already taken"), e.getMessage());
                }
                waiting.cancel(true);
            } else {
                RendezvousException e = assertThrows(RendezvousException.class,
                        () -> open.open(1, 3, "job-e", Duration.ofSeconds(5)));
                assertTrue(e.getMessage().contains("already taken"), e.getMessage());
            }
        }
    }

    /** A long-running group over a directory leaves one file per rank (its last), however many exchanges it makes. */
    @Test
    void aDirectoryRendezvousLeavesOnlyTheLastExchangesFiles() throws Exception {
        int world = 3;
        List<Future<Integer>> done = asRanks(world, rank -> {
            try (Rendezvous rv = new DirectoryRendezvous(dir, "job-g", SECRET, rank, world, Duration.ofSeconds(20))) {
                for (int i = 0; i < 60; i++) {
                    assertEquals(world, rv.allGather("call-check", new byte[] {(byte) i}).size());
                }
                return rank;
            }
        });
        for (Future<Integer> f : done) {
            f.get();
        }
        try (var files = Files.list(dir)) {
            List<String> left = files.map(p -> p.getFileName().toString()).sorted().toList();
            assertEquals(List.of("60-call-check.0", "60-call-check.1", "60-call-check.2"), left);
        }
    }

    @Test
    void aStaleFileOfAnEarlierJobIsRefusedNamingTheJob() throws Exception {
        try (Rendezvous old = new DirectoryRendezvous(dir, "job-old", SECRET, 0, 1, Duration.ofSeconds(1))) {
            old.allGather("hello", new byte[0]);
        }
        try (Rendezvous fresh = new DirectoryRendezvous(dir, "job-new", SECRET, 0, 1, Duration.ofSeconds(1))) {
            RendezvousException e = assertThrows(RendezvousException.class,
                    () -> fresh.allGather("hello", new byte[0]));
            assertTrue(e.getMessage().contains("job-old") && e.getMessage().contains("stale"), e.getMessage());
        }
    }

    /** A planted directory, or an oversized file, where a peer's rendezvous file belongs: refused by name, at once. */
    @Test
    void aRendezvousFileThatNoRankWroteIsRefused() throws Exception {
        Path planted = dir.resolve("1-hello.1");
        for (boolean asDirectory : new boolean[] {true, false}) {
            if (asDirectory) {
                Files.createDirectory(planted);
            } else {
                Files.delete(planted);
                try (java.io.RandomAccessFile f = new java.io.RandomAccessFile(planted.toFile(), "rw")) {
                    f.setLength(Wire.MAX_MESSAGE_BYTES + 1L);  // sparse
                }
            }
            try (Rendezvous rv = new DirectoryRendezvous(dir, "job-p", SECRET, 0, 2, Duration.ofSeconds(20))) {
                long start = System.nanoTime();
                RendezvousException e = assertThrows(RendezvousException.class,
                        () -> rv.allGather("hello", new byte[] {1}));
                assertTrue((System.nanoTime() - start) / 1e9 < 5, "refused, not waited for");
                assertTrue(e.getMessage().contains(planted + ": " + (asDirectory ? "not a regular file"
                        : (Wire.MAX_MESSAGE_BYTES + 1L) + " bytes, more than a rank writes")), e.getMessage());
            }
            Files.deleteIfExists(dir.resolve("1-hello.0"));
        }
    }

    /**
     * A FIFO where a peer's rendezvous file belongs, or where this rank's own file goes, is refused by its type at
     * once, naming it, and never opened: opening a FIFO for reading blocks until a writer comes, past every timeout.
     */
    @Test
    void aRendezvousFileThatIsAFifoIsRefusedAtOnce() throws Exception {
        Path peers = Fifos.make(dir.resolve("1-hello.1"));
        try (Rendezvous rv = new DirectoryRendezvous(dir, "job-q", SECRET, 0, 2, Duration.ofSeconds(20))) {
            long start = System.nanoTime();
            RendezvousException e = assertThrows(RendezvousException.class,
                    () -> rv.allGather("hello", new byte[] {1}));
            assertTrue((System.nanoTime() - start) / 1e9 < 5, "refused, not waited for");
            assertTrue(e.getMessage().contains(peers + ": not a regular file"), e.getMessage());
        }
        Path own = Fifos.make(dir.resolve("1-again.0"));
        try (Rendezvous rv = new DirectoryRendezvous(dir, "job-q", SECRET, 0, 2, Duration.ofSeconds(20))) {
            long start = System.nanoTime();
            RendezvousException e = assertThrows(RendezvousException.class,
                    () -> rv.allGather("again", new byte[] {1}));
            assertTrue((System.nanoTime() - start) / 1e9 < 5, "refused, not waited for");
            assertTrue(e.getMessage().contains(own + " exists") && e.getMessage().contains("not a regular file"),
                    e.getMessage());
        }
    }

    /**
     * A connection that announces a part of 2 GiB (or sends less than it announced) is dropped by the store before it
     * allocates anything: the other rank learns that its peer left, well before the timeout.
     */
    @ParameterizedTest(name = "announced {0} bytes, sent {1}")
    @CsvSource({"2147483647, 0", "100, 10"})
    void aTcpPartThatIsTooLargeOrCutShortDropsOnlyItsConnection(int announced, int sent) throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        try (Rendezvous rank0 = TcpRendezvous.connect("127.0.0.1", port, "job-w", SECRET, 0, 2,
                Duration.ofSeconds(30))) {
            Future<Exception> gather = Executors.newVirtualThreadPerTaskExecutor().submit(() ->
                    assertThrows(RendezvousException.class, () -> rank0.allGather("round", new byte[] {0})));
            try (java.net.Socket raw = new java.net.Socket("127.0.0.1", port);
                 java.io.DataOutputStream out = new java.io.DataOutputStream(raw.getOutputStream());
                 java.io.DataInputStream in = new java.io.DataInputStream(raw.getInputStream())) {
                out.writeInt(TcpRendezvous.HELLO);
                Wire.writeMessage(out, Participant.self("job-w", SECRET, 1, 2).seal(SECRET,
                        TcpRendezvous.HELLO_KEY, null));
                out.flush();
                assertEquals(TcpRendezvous.OK, in.readInt());
                out.writeInt(TcpRendezvous.GATHER);
                out.writeUTF("round");
                out.writeLong(30_000);
                out.writeInt(announced);
                out.write(new byte[sent]);
                out.flush();
                raw.shutdownOutput();
                assertEquals(-1, in.read(), "the store closes the connection");
            }
            long start = System.nanoTime();
            Exception e = gather.get();
            assertTrue((System.nanoTime() - start) / 1e9 < 10, "named before the 30 s timeout");
            assertTrue(e.getMessage().contains("[1] left"), e.getMessage());
        }
    }

    @Test
    void aTcpRankThatLeavesIsNamedWithoutWaitingForTheTimeout() throws Exception {
        Opener open = opener("tcp");
        List<Future<Exception>> got = asRanks(3, rank -> {
            try (Rendezvous rv = open.open(rank, 3, "job-f", Duration.ofSeconds(30))) {
                rv.allGather("first", new byte[0]);
                if (rank == 2) {
                    closeWithoutBye(rv);
                    return null;
                }
                long start = System.nanoTime();
                RendezvousException e = assertThrows(RendezvousException.class,
                        () -> rv.allGather("second", new byte[0]));
                assertTrue((System.nanoTime() - start) / 1e9 < 10, "named before the 30 s timeout");
                return e;
            }
        });
        for (int r = 0; r < 2; r++) {
            Exception e = got.get(r).get();
            assertTrue(e.getMessage().contains("[2] left"), "rank " + r + ": " + e.getMessage());
        }
    }

    @Test
    void aTcpRoundThatTimedOutIsDroppedByTheStoreOnceItsWaitersGaveUp() throws Exception {
        Opener open = opener("tcp");
        CountDownLatch rank1GaveUp = new CountDownLatch(1);
        CountDownLatch checked = new CountDownLatch(1);
        List<Future<Integer>> got = asRanks(3, rank -> {
            try (Rendezvous rv = open.open(rank, 3, "job-g", Duration.ofMillis(800))) {
                rv.allGather("everyone", new byte[] {(byte) rank});
                if (rank == 2) {
                    checked.await();
                    return -1;
                }
                assertThrows(RendezvousException.class, () -> rv.allGather("without-rank-2", new byte[] {1}));
                if (rank == 1) {
                    rank1GaveUp.countDown();
                    return -1;
                }
                rank1GaveUp.await();
                int held = storeOf(rv).openRounds();
                checked.countDown();
                return held;
            }
        });
        assertEquals(0, got.get(0).get(), "rounds the store still holds after both waiters timed out");
        got.get(1).get();
        got.get(2).get();
    }

    /** A group told to meet at a loopback address serves the store there alone, not on the machine's other interfaces. */
    @Test
    void aLoopbackStoreListensOnLoopbackOnly() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        try (Rendezvous rv = TcpRendezvous.connect("127.0.0.1", port, "job-l", SECRET, 0, 1, Duration.ofSeconds(5))) {
            assertTrue(storeOf(rv).listensOn().isLoopbackAddress(), "" + storeOf(rv).listensOn());
            assertEquals(1, rv.allGather("alone", new byte[] {7}).size());
        }
    }

    /** An address of one of this machine's interfaces other than loopback, where it has one that is up. */
    private static Optional<InetAddress> nonLoopbackAddressHere() throws SocketException {
        return NetworkInterface.networkInterfaces()
                .filter(i -> {
                    try {
                        return i.isUp() && !i.isLoopback();
                    } catch (SocketException e) {
                        return false;
                    }
                })
                .flatMap(NetworkInterface::inetAddresses)
                .filter(a -> a instanceof Inet4Address)
                .findFirst();
    }

    /**
     * A group told to meet at an address of one of this machine's interfaces other than loopback serves the store on
     * that address alone: not on loopback, not on the other interfaces.
     */
    @Test
    void aStoreToldAnAddressOfThisMachineListensThereAlone() throws Exception {
        Optional<InetAddress> here = nonLoopbackAddressHere();
        assumeTrue(here.isPresent(), "this machine has no interface but loopback");
        int port = freePort();
        try (Rendezvous rv = TcpRendezvous.connect(here.get().getHostAddress(), port, "job-n", SECRET, 0, 1,
                Duration.ofSeconds(5))) {
            assertEquals(here.get(), storeOf(rv).listensOn());
            assertThrows(ConnectException.class, () -> new Socket("127.0.0.1", port).close(),
                    "nothing listens on loopback");
            assertEquals(1, rv.allGather("alone", new byte[] {7}).size());
        }
    }

    /**
     * An address that is none of this machine's (an address behind NAT, here one of the ranges kept for documentation)
     * or the wildcard address: the store listens on every interface and says so in its log, with the reason.
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"198.51.100.7, it is no address of this machine's network interfaces", "0.0.0.0, it is the wildcard"
            + " address"})
    void aStoreToldAnAddressOfNoInterfaceHereListensOnEveryInterfaceAndSaysWhy(String host, String why)
            throws Exception {
        assumeTrue(NetworkInterface.getByInetAddress(InetAddress.getByName(host)) == null,
                host + " is an address of this machine");
        try (StoreLog log = new StoreLog()) {
            TcpStore store = TcpStore.start(host, 0, Participant.self("job-a", SECRET, 0, 1), SECRET,
                    Duration.ofSeconds(5));
            try {
                assertTrue(store.listensOn().isAnyLocalAddress(), "" + store.listensOn());
                List<String> lines = log.lines.stream().filter(l -> l.contains("every interface")).toList();
                assertEquals(1, lines.size(), log.lines.toString());
                assertTrue(lines.getFirst().startsWith("TCP rendezvous store: listening on port " + store.port()
                        + " of every interface, not on " + host + " (" + host + ") alone: " + why), lines.getFirst());
            } finally {
                store.close(Duration.ZERO);
            }
        }
    }

    private static TcpStore storeOf(Rendezvous rv) throws Exception {
        var store = TcpRendezvous.class.getDeclaredField("store");
        store.setAccessible(true);
        return (TcpStore) store.get(rv);
    }

    /** Drops the connection as a dying process would (no BYE). */
    private static void closeWithoutBye(Rendezvous rv) throws Exception {
        var socket = TcpRendezvous.class.getDeclaredField("socket");
        socket.setAccessible(true);
        ((java.net.Socket) socket.get(rv)).close();
    }

    /** The store's log lines while it is open (the store logs through System.Logger, here java.util.logging). */
    private static final class StoreLog extends Handler implements AutoCloseable {
        private final Logger logger = Logger.getLogger(TcpStore.class.getName());
        private final List<String> lines = new CopyOnWriteArrayList<>();

        StoreLog() {
            logger.addHandler(this);
        }

        @Override
        public void publish(LogRecord r) {
            lines.add(r.getMessage());
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
            logger.removeHandler(this);
        }

        /** The line that names the connection whose local end is {@code s}, or null. */
        String naming(Socket s) {
            String peer = "/127.0.0.1:" + s.getLocalPort() + ": ";
            return lines.stream().filter(l -> l.contains(peer)).findFirst().orElse(null);
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    /** Whether the store closed {@code s}: its next read ends (end of stream, or a reset) within {@code within}. */
    private static boolean closedByTheStore(Socket s, Duration within) throws IOException {
        s.setSoTimeout((int) within.toMillis());
        try {
            return s.getInputStream().read() == -1;
        } catch (SocketTimeoutException e) {
            return false;
        } catch (SocketException e) {
            return true;  // reset: the store closed it with bytes unread
        }
    }

    /** Every rank of a group of {@code world} but rank 0 joins and all exchange one round: the store still serves. */
    private static void theRanksStillMeet(Rendezvous rank0, int port, String job, int world) throws Exception {
        List<Future<Integer>> others = new ArrayList<>();
        try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
            for (int r = 1; r < world; r++) {
                int rank = r;
                others.add(pool.submit(() -> {
                    try (Rendezvous rv = TcpRendezvous.connect("127.0.0.1", port, job, SECRET, rank, world,
                            Duration.ofSeconds(30))) {
                        return rv.allGather("after", new byte[] {(byte) rank}).size();
                    }
                }));
            }
            List<byte[]> parts = rank0.allGather("after", new byte[] {0});
            for (int r = 0; r < world; r++) {
                assertArrayEquals(new byte[] {(byte) r}, parts.get(r));
            }
            for (Future<Integer> f : others) {
                assertEquals(world, f.get());
            }
        }
    }

    /**
     * A connection that sends no hello, or stops half-way through one, is dropped once the read wait (here the 3 s
     * rendezvous timeout, shorter than the store's 10 s) has passed, and named in the log; the ranks meet as before.
     */
    @Test
    void aTcpConnectionThatStallsBeforeOrInItsHelloIsDroppedAndNamed() throws Exception {
        int port = freePort();
        try (StoreLog log = new StoreLog();
             Rendezvous rank0 = TcpRendezvous.connect("127.0.0.1", port, "job-s", SECRET, 0, 2, Duration.ofSeconds(3));
             Socket silent = new Socket("127.0.0.1", port);
             Socket half = new Socket("127.0.0.1", port)) {
            half.getOutputStream().write(new byte[] {0, 0, 0, TcpRendezvous.HELLO, 0, 0});  // half of its length
            half.getOutputStream().flush();
            long start = System.nanoTime();
            assertTrue(closedByTheStore(silent, Duration.ofSeconds(20)), "a silent connection is dropped");
            assertTrue(closedByTheStore(half, Duration.ofSeconds(20)), "a stalled hello is dropped");
            double s = (System.nanoTime() - start) / 1e9;
            assertTrue(s < TcpStore.MAX_READ_WAIT.toSeconds(), "dropped after the 3 s timeout, not 10 s: " + s);
            for (Socket c : List.of(silent, half)) {
                String line = log.naming(c);
                assertTrue(line != null && line.contains("it did not send its hello within PT3S"),
                        log.lines.toString());
            }
            theRanksStillMeet(rank0, port, "job-s", 2);
        }
    }

    /**
     * A hello longer than any a rank sends (a participant header) is refused when its length arrives, not read: the
     * connection is dropped at once (long before the read wait) and named, and the store goes on serving the ranks.
     */
    @Test
    void aTcpHelloLongerThanAHeaderIsDroppedAtOnceAndNamed() throws Exception {
        int port = freePort();
        try (StoreLog log = new StoreLog();
             Rendezvous rank0 = TcpRendezvous.connect("127.0.0.1", port, "job-t", SECRET, 0, 2, Duration.ofSeconds(30));
             Socket raw = new Socket("127.0.0.1", port)) {
            DataOutputStream out = new DataOutputStream(raw.getOutputStream());
            out.writeInt(TcpRendezvous.HELLO);
            out.writeInt(Wire.MAX_HEADER_BYTES + 1);  // within a message's limit, past a hello's
            out.write(new byte[1 << 16]);
            out.flush();
            assertTrue(closedByTheStore(raw, Duration.ofSeconds(5)), "dropped without waiting for the rest");
            String line = log.naming(raw);
            assertTrue(line != null && line.contains("a hello of " + (Wire.MAX_HEADER_BYTES + 1) + " bytes; a hello has"
                    + " 0 to " + Wire.MAX_HEADER_BYTES), log.lines.toString());
            theRanksStillMeet(rank0, port, "job-t", 2);
        }
    }

    /**
     * More connections waiting for their hello than the group's ranks and the spare ones: each new one drops the
     * oldest waiting, named in the log, at once; ranks that join during the flood send their hello as they connect, so
     * they are never the oldest, and the group meets.
     */
    @Test
    void aFloodOfConnectionsWithoutAHelloCostsTheOldestOfThemNotTheRanks() throws Exception {
        int port = freePort();
        int world = 3;
        int extra = 5;
        List<Socket> flood = new ArrayList<>();
        try (StoreLog log = new StoreLog();
             Rendezvous rank0 = TcpRendezvous.connect("127.0.0.1", port, "job-u", SECRET, 0, world,
                     Duration.ofSeconds(30))) {
            try {
                for (int i = 0; i < TcpStore.maxUnauthenticated(world) + extra; i++) {
                    flood.add(new Socket("127.0.0.1", port));
                }
                for (Socket s : flood.subList(0, extra)) {
                    assertTrue(closedByTheStore(s, Duration.ofSeconds(5)), "the oldest are dropped, long before the"
                            + " 10 s read wait");
                    String line = log.naming(s);
                    assertTrue(line != null && line.contains("more than " + TcpStore.maxUnauthenticated(world)
                            + " connections were waiting for their hello"), log.lines.toString());
                }
                assertTrue(!closedByTheStore(flood.get(extra), Duration.ofMillis(200)), "the others still wait");
                theRanksStillMeet(rank0, port, "job-u", world);
            } finally {
                for (Socket s : flood) {
                    s.close();
                }
            }
        }
    }

    @Test
    void theEnvironmentPicksTheDirectoryOrTheTcpStoreAndNamesWhatIsMissing() throws Exception {
        try (Rendezvous rv = Rendezvous.fromEnvironment(Map.of("RANK", "0", "WORLD_SIZE", "1",
                "DCP4J_RENDEZVOUS_DIR", dir.toString(), "DCP4J_JOB_ID", "env-job", Rendezvous.DCP4J_JOB_SECRET,
                SECRET_VALUE), Duration.ofSeconds(1))) {
            assertInstanceOf(DirectoryRendezvous.class, rv);
            assertEquals(1, rv.allGather("solo", "x".getBytes(StandardCharsets.UTF_8)).size());
        }
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        try (Rendezvous rv = Rendezvous.fromEnvironment(Map.of("RANK", "0", "WORLD_SIZE", "1", "MASTER_ADDR",
                "127.0.0.1", "MASTER_PORT", "" + port, Rendezvous.DCP4J_JOB_SECRET, SECRET_VALUE),
                Duration.ofSeconds(1))) {
            assertInstanceOf(TcpRendezvous.class, rv);
            assertEquals(port, ((TcpRendezvous) rv).storePort());
        }
        IllegalArgumentException none = assertThrows(IllegalArgumentException.class,
                () -> Rendezvous.fromEnvironment(Map.of("RANK", "0", "WORLD_SIZE", "2",
                        Rendezvous.DCP4J_JOB_SECRET, SECRET_VALUE), Duration.ofSeconds(1)));
        assertTrue(none.getMessage().contains("MASTER_ADDR"), none.getMessage());
        IllegalArgumentException noRank = assertThrows(IllegalArgumentException.class,
                () -> Rendezvous.fromEnvironment(Map.of("WORLD_SIZE", "2"), Duration.ofSeconds(1)));
        assertTrue(noRank.getMessage().contains("RANK is not set"), noRank.getMessage());
        IllegalArgumentException badPort = assertThrows(IllegalArgumentException.class,
                () -> Rendezvous.fromEnvironment(Map.of("RANK", "0", "WORLD_SIZE", "1", "MASTER_ADDR", "h",
                        "MASTER_PORT", "99999", Rendezvous.DCP4J_JOB_SECRET, SECRET_VALUE), Duration.ofSeconds(1)));
        assertTrue(badPort.getMessage().contains("99999"), badPort.getMessage());
    }

    @Test
    void ranksOutsideTheGroupAndBadKeysAreRefusedWhenCalled() {
        assertThrows(IllegalArgumentException.class, () -> new DirectoryRendezvous(dir, "j", SECRET, 2, 2,
                Duration.ofSeconds(1)));
        try (Rendezvous rv = new DirectoryRendezvous(dir, "j", SECRET, 0, 1, Duration.ofSeconds(1))) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> rv.allGather("../escape", new byte[0]));
            assertTrue(e.getMessage().contains("../escape"), e.getMessage());
        }
    }
}
