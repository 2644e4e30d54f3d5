package io.github.dcp4j.rendezvous;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The torch-store rendezvous against a small in-test server that speaks the queries it uses, as torch's TCPStore
 * documents them (validation first, little-endian integers, u64-length strings). No GPU, no torch.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TorchStoreRendezvousTest {
    /** A TCPStore server: VALIDATE, PING, SET, GET, ADD, CHECK, DELETE_KEY; an unknown query closes the connection. */
    static final class FakeTorchStore implements AutoCloseable {
        final ServerSocket server;
        final Map<String, byte[]> keys = new ConcurrentHashMap<>();
        final List<String> refusals = new ArrayList<>();

        FakeTorchStore() throws IOException {
            server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            Thread.ofVirtual().start(() -> {
                while (!server.isClosed()) {
                    try {
                        Socket s = server.accept();
                        Thread.ofVirtual().start(() -> serve(s));
                    } catch (IOException e) {
                        return;
                    }
                }
            });
        }

        int port() {
            return server.getLocalPort();
        }

        private void serve(Socket s) {
            try (s; DataInputStream in = new DataInputStream(new BufferedInputStream(s.getInputStream()));
                 OutputStream out = s.getOutputStream()) {
                if (in.readUnsignedByte() != TorchStoreRendezvous.VALIDATE || le(in, 4).getInt()
                        != TorchStoreRendezvous.VALIDATION_MAGIC) {
                    synchronized (refusals) {
                        refusals.add("not validated");
                    }
                    return;
                }
                while (true) {
                    int type = in.readUnsignedByte();
                    switch (type) {
                        case TorchStoreRendezvous.PING -> out.write(le(4).putInt(le(in, 4).getInt()).array());
                        case TorchStoreRendezvous.SET -> keys.put(string(in), bytes(in));
                        case TorchStoreRendezvous.GET -> {
                            byte[] v = keys.get(string(in));
                            out.write(le(8).putLong(v.length).array());
                            out.write(v);
                        }
                        case TorchStoreRendezvous.ADD -> {
                            String k = string(in);
                            long add = le(in, 8).getLong();
                            long now;
                            synchronized (keys) {
                                byte[] old = keys.get(k);
                                now = (old == null ? 0 : Long.parseLong(new String(old, StandardCharsets.US_ASCII)))
                                        + add;
                                keys.put(k, Long.toString(now).getBytes(StandardCharsets.US_ASCII));
                            }
                            out.write(le(8).putLong(now).array());
                        }
                        case TorchStoreRendezvous.CHECK -> {
                            long n = le(in, 8).getLong();
                            boolean all = true;
                            for (long i = 0; i < n; i++) {
                                all &= keys.containsKey(string(in));
                            }
                            out.write(all ? 0 : 1);
                        }
                        case TorchStoreRendezvous.DELETE_KEY -> out.write(le(8).putLong(
                                keys.remove(string(in)) == null ? 0 : 1).array());
                        default -> {
                            return;
                        }
                    }
                    out.flush();
                }
            } catch (IOException e) {
                // the client left
            }
        }

        private static ByteBuffer le(int n) {
            return ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
        }

        private static ByteBuffer le(DataInputStream in, int n) throws IOException {
            byte[] b = new byte[n];
            in.readFully(b);
            return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
        }

        private static byte[] bytes(DataInputStream in) throws IOException {
            long n = le(in, 8).getLong();
            byte[] b = new byte[(int) n];
            in.readFully(b);
            return b;
        }

        private static String string(DataInputStream in) throws IOException {
            return new String(bytes(in), StandardCharsets.UTF_8);
        }

        @Override
        public void close() throws IOException {
            server.close();
        }
    }

    /** The run's secret that the ranks of these tests share, and another run's. */
    private static final String SECRET = JobSecret.generate();
    private static final JobSecret RUN = JobSecret.of(SECRET);
    private static final JobSecret OTHER_RUN = JobSecret.of(JobSecret.generate());

    private FakeTorchStore store;

    @BeforeEach
    void start() throws IOException {
        store = new FakeTorchStore();
    }

    @AfterEach
    void stop() throws IOException {
        store.close();
    }

    private Rendezvous open(String job, int rank, int world, Duration timeout) {
        return new TorchStoreRendezvous("127.0.0.1", store.port(), job, RUN, 0,
                rank, world, timeout);
    }

    @Test
    void ranksExchangeRoundAfterRoundInRankOrderAndLeaveOnlyTheirLastKeys() throws Exception {
        int world = 4;
        ExecutorService pool = Executors.newFixedThreadPool(world);
        List<Future<List<List<byte[]>>>> got = new ArrayList<>();
        for (int r = 0; r < world; r++) {
            int rank = r;
            got.add(pool.submit(() -> {
                try (Rendezvous rv = open("job-t", rank, world, Duration.ofSeconds(20))) {
                    List<List<byte[]>> rounds = new ArrayList<>();
                    for (int round = 0; round < 3; round++) {
                        rounds.add(rv.allGather("same", new byte[] {(byte) round, (byte) rank}));
                    }
                    return rounds;
                }
            }));
        }
        pool.shutdown();
        for (Future<List<List<byte[]>>> f : got) {
            List<List<byte[]>> rounds = f.get();
            for (int round = 0; round < 3; round++) {
                for (int r = 0; r < world; r++) {
                    assertArrayEquals(new byte[] {(byte) round, (byte) r}, rounds.get(round).get(r));
                }
            }
        }
        long exchangeKeys = store.keys.keySet().stream().filter(k -> k.contains("-same/")).count();
        assertEquals(world, exchangeKeys, "each rank's last contribution alone: " + store.keys.keySet());
        assertTrue(store.keys.keySet().stream().allMatch(k -> k.startsWith("/dcp4j/job-t/")), "" + store.keys.keySet());
    }

    @Test
    void aRankThatNeverArrivesIsNamedAfterTheTimeout() {
        try (Rendezvous rank0 = open("job-u", 0, 2, Duration.ofMillis(500))) {
            RendezvousException e = assertThrows(RendezvousException.class,
                    () -> rank0.allGather("waits", new byte[] {1}));
            assertTrue(e.getMessage().contains("rank(s) [1] never arrived"), e.getMessage());
        }
    }

    @Test
    void aSecondClaimOfARankIsRefused() {
        try (Rendezvous first = open("job-v", 1, 2, Duration.ofSeconds(2))) {
            RendezvousException e = assertThrows(RendezvousException.class,
                    () -> open("job-v", 1, 2, Duration.ofSeconds(2)));
            assertTrue(e.getMessage().contains("rank 1 is already taken"), e.getMessage());
        }
    }

    @Test
    void aContributionWithAnotherSecretIsRefused() throws Exception {
        Future<Exception> other = Executors.newVirtualThreadPerTaskExecutor().submit(() -> {
            try (Rendezvous rv = new TorchStoreRendezvous("127.0.0.1", store.port(), "job-w", OTHER_RUN, 0, 1,
                    2, Duration.ofSeconds(2))) {
                rv.allGather("x", new byte[] {1});
                return null;
            } catch (RendezvousException e) {
                return e;
            }
        });
        try (Rendezvous rank0 = open("job-w", 0, 2, Duration.ofSeconds(2))) {
            // the rank with another secret writes under a run of its own: rank 0 never sees it
            RendezvousException e = assertThrows(RendezvousException.class,
                    () -> rank0.allGather("x", new byte[] {0}));
            assertTrue(e.getMessage().contains("never arrived"), e.getMessage());
        }
        assertInstanceOf(RendezvousException.class, other.get());
    }

    @Test
    void somethingThatIsNoTorchStoreIsNamed() throws Exception {
        try (ServerSocket silent = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            Thread.ofVirtual().start(() -> {
                try (Socket s = silent.accept()) {
                    s.getOutputStream().write(new byte[] {1, 2, 3, 4});
                    s.getInputStream().readAllBytes();
                } catch (IOException ignored) {
                    // the client left
                }
            });
            RendezvousException e = assertThrows(RendezvousException.class, () -> new TorchStoreRendezvous(
                    "127.0.0.1", silent.getLocalPort(), "job", RUN, 0, 0, 1, Duration.ofSeconds(2)));
            assertTrue(e.getMessage().contains("not a torch TCPStore"), e.getMessage());
        }
    }

    @Test
    void aStoreThatDropsTheClientAtTheHandshakeIsNamedWithTheTorchVersionItSpeaks() throws Exception {
        try (ServerSocket old = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            Thread.ofVirtual().start(() -> {
                try (Socket s = old.accept()) {
                    s.getInputStream().read();
                } catch (IOException ignored) {
                    // the client left
                }
            });
            RendezvousException e = assertThrows(RendezvousException.class, () -> new TorchStoreRendezvous(
                    "127.0.0.1", old.getLocalPort(), "job", RUN, 0, 0, 1, Duration.ofSeconds(2)));
            assertTrue(e.getMessage().contains("closed the connection at the handshake"), e.getMessage());
            assertTrue(e.getMessage().contains("torch 1.13"), e.getMessage());
        }
    }

    @Test
    void aRestartedGroupUsesKeysOfItsOwn() {
        try (Rendezvous first = new TorchStoreRendezvous("127.0.0.1", store.port(), "job-r", RUN, 0, 0, 1,
                Duration.ofSeconds(2))) {
            first.allGather("x", new byte[] {1});
        }
        // the worker restarted: the same job, rank and store, the next attempt
        try (Rendezvous again = new TorchStoreRendezvous("127.0.0.1", store.port(), "job-r", RUN, 1, 0, 1,
                Duration.ofSeconds(2))) {
            assertArrayEquals(new byte[] {2}, again.allGather("x", new byte[] {2}).getFirst());
        }
    }

    @Test
    void underTorchrunTheAgentsStoreIsUsedUnlessDcp4jIsGivenAPortOfItsOwn() {
        Map<String, String> torchrun = Map.of("RANK", "0", "WORLD_SIZE", "1", "MASTER_ADDR", "127.0.0.1",
                "MASTER_PORT", "" + store.port(), "TORCHELASTIC_USE_AGENT_STORE", "True", "TORCHELASTIC_RUN_ID", "r1",
                Rendezvous.DCP4J_JOB_SECRET, SECRET);
        try (Rendezvous rv = Rendezvous.fromEnvironment(torchrun, Duration.ofSeconds(2))) {
            assertInstanceOf(TorchStoreRendezvous.class, rv);
            assertEquals(1, rv.allGather("solo", new byte[] {5}).size());
        }
        assertTrue(store.keys.keySet().stream().anyMatch(k -> k.startsWith("/dcp4j/r1/")), "" + store.keys.keySet());
    }
}
