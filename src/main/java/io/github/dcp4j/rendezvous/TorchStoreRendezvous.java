package io.github.dcp4j.rendezvous;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.locks.LockSupport;

/**
 * A rendezvous through a store that torch already serves: torchrun's agent store at MASTER_ADDR:MASTER_PORT, so that
 * ranks under torchrun need no port of their own. Each rank is a client of torch's TCPStore wire protocol (c10d's
 * TCPStore / TCPStoreBackend, as published): a query is one byte of query type followed by its arguments, integers in
 * the host's byte order (little-endian on every platform dcp4j runs on), strings and byte arrays as a u64 length and
 * the bytes:
 *
 * <pre>
 * VALIDATE  u32 magic 0x3C85F7CE                      (no answer: the first query of a connection)
 * PING      u32 nonce                           → u32 the same nonce
 * SET       key, value                                (no answer)
 * GET       key                                 → value
 * ADD       key, i64 increment                  → i64 the key's new value
 * CHECK     u64 n, n keys                       → u8 0 where every key is set, 1 where one is not
 * DELETE    key                                 → i64 keys deleted
 * </pre>
 *
 * Keys are {@code dcp4j/<job>/<run>/attempt_<restart count>/...} (the agent's store outlives a restart of its
 * workers), sent with the {@code /} in front that torch's own client puts before every key it sends (TCPStore's key
 * prefix), so that torch's API names them as written here: a rank claims {@code rank/<r>} with ADD (a second claim
 * sees 2), and contributes to exchange k of name n under {@code <k>-<n>/<r>}, a sealed message ({@link Participant}) that the other
 * ranks poll for with CHECK and read with GET; a rank deletes its key of exchange k once exchange k + 1 has completed.
 * Every wait is bounded by the timeout.
 */
final class TorchStoreRendezvous implements Rendezvous {
    static final int VALIDATE = 0;
    static final int SET = 1;
    static final int GET = 3;
    static final int ADD = 4;
    static final int CHECK = 5;
    static final int DELETE_KEY = 8;
    static final int PING = 13;
    static final int VALIDATION_MAGIC = 0x3C85F7CE;
    static final int CHECK_READY = 0;
    /** What torch's client puts before every key on the wire; {@code store.get("k")} in Python asks for "/k". */
    static final String WIRE_KEY_PREFIX = "/";
    private static final long MAX_POLL_NANOS = 20_000_000L;

    private final Participant self;
    private final JobSecret secret;
    private final String where;
    private final String prefix;
    private final Duration timeout;
    private final Socket socket;
    private final DataInputStream in;
    private final OutputStream out;
    private long exchanges;
    /** This rank's key of the last completed exchange, deleted when the next one completes. */
    private String lastOwnKey;

    /** {@code attempt}: torchrun's restart count, so that the keys of a restarted group are its own. */
    TorchStoreRendezvous(String host, int port, String job, JobSecret secret, int attempt, int rank, int worldSize,
                         Duration timeout) {
        Objects.requireNonNull(host, "host");
        Objects.requireNonNull(job, "job");
        Objects.requireNonNull(secret, "secret");
        Rendezvous.requireRank(rank, worldSize);
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive; got " + timeout);
        }
        this.self = Participant.self(job, secret, rank, worldSize);
        this.secret = secret;
        this.where = "torch's store at " + host + ":" + port;
        this.prefix = "dcp4j/" + job + "/" + secret.run() + "/attempt_" + attempt + "/";
        this.timeout = timeout;
        Socket s = null;
        try {
            s = TcpRendezvous.connectWithRetry(host, port, System.nanoTime() + timeout.toNanos());
            s.setSoTimeout((int) Math.min(Integer.MAX_VALUE, Math.max(1, timeout.toMillis())));
            this.socket = s;
            this.in = new DataInputStream(new BufferedInputStream(s.getInputStream()));
            this.out = new BufferedOutputStream(s.getOutputStream());
            int nonce = ThreadLocalRandom.current().nextInt();
            int echoed = handshake(nonce);
            if (echoed != nonce) {
                throw new RendezvousException(where + " answered a ping with " + echoed + ", not " + nonce
                        + ": not a torch TCPStore");
            }
            long claims = add(prefix + "rank/" + rank, 1);
            if (claims != 1) {
                throw new RendezvousException("cannot join " + where + " as rank " + rank + ": rank " + rank
                        + " is already taken in job '" + job + "' (claimed " + claims + " times)");
            }
        } catch (IOException e) {
            closeQuietly(s);
            throw new RendezvousException("rank " + rank + " cannot join " + where + ": " + e.getMessage(), e);
        } catch (RuntimeException e) {
            closeQuietly(s);
            throw e;
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
        return where;
    }

    @Override
    public synchronized List<byte[]> allGather(String name, byte[] mine) {
        Rendezvous.requireKey(name);
        String key = prefix + ++exchanges + "-" + name;
        try {
            set(key + "/" + rank(), self.seal(secret, key + "/" + rank(), mine));
            byte[][] parts = new byte[worldSize()][];
            parts[rank()] = mine.clone();
            long deadline = System.nanoTime() + timeout.toNanos();
            long pause = 100_000L;
            for (int r = 0; r < parts.length; r++) {
                while (parts[r] == null && !check(key + "/" + r)) {
                    if (System.nanoTime() - deadline > 0) {
                        List<Integer> absent = new ArrayList<>();
                        for (int q = r; q < parts.length; q++) {
                            if (parts[q] == null && !check(key + "/" + q)) {
                                absent.add(q);
                            }
                        }
                        throw new RendezvousException("rendezvous '" + key + "' at " + where + " timed out after "
                                + timeout + " on rank " + rank() + ": rank(s) " + absent + " never arrived");
                    }
                    LockSupport.parkNanos(pause);
                    pause = Math.min(MAX_POLL_NANOS, pause * 2);
                }
                if (parts[r] == null) {
                    parts[r] = open(key, r, get(key + "/" + r));
                }
            }
            if (lastOwnKey != null) {
                delete(lastOwnKey);
            }
            lastOwnKey = key + "/" + rank();
            return Arrays.asList(parts);
        } catch (IOException e) {
            throw new RendezvousException("rendezvous '" + key + "' at " + where + " failed on rank " + rank() + ": "
                    + e.getMessage(), e);
        }
    }

    private byte[] open(String key, int r, byte[] raw) throws IOException {
        String source = where + " key " + key + "/" + r;
        Participant.Opened other = Participant.open(raw, true, secret, source);
        String why = self.refusal(other, key + "/" + r, r);
        if (why != null) {
            throw new RendezvousException("rendezvous '" + key + "' refused " + source + ": " + why);
        }
        return other.part();
    }

    private static ByteBuffer query(int type) {
        return ByteBuffer.allocate(64).order(ByteOrder.LITTLE_ENDIAN).put((byte) type);
    }

    /** {@code key} as torch's client sends it, so that torch's API finds it under {@code key}. */
    private static byte[] wireKey(String key) {
        return utf8(WIRE_KEY_PREFIX + key);
    }

    private static ByteBuffer withString(ByteBuffer b, byte[] bytes) {
        ByteBuffer grown = ByteBuffer.allocate(b.position() + Long.BYTES + bytes.length + 64)
                .order(ByteOrder.LITTLE_ENDIAN);
        grown.put(b.flip());
        return grown.putLong(bytes.length).put(bytes);
    }

    private static byte[] utf8(String key) {
        return key.getBytes(StandardCharsets.UTF_8);
    }

    private void send(ByteBuffer b) throws IOException {
        out.write(b.array(), 0, b.position());
        out.flush();
    }

    private void set(String key, byte[] value) throws IOException {
        send(withString(withString(query(SET), wireKey(key)), value));
    }

    private byte[] get(String key) throws IOException {
        send(withString(query(GET), wireKey(key)));
        long n = readLong();
        if (n < 0 || n > Wire.MAX_MESSAGE_BYTES) {
            throw new RendezvousException(where + " answered GET " + key + " with " + n + " bytes; a rank writes at"
                    + " most " + Wire.MAX_MESSAGE_BYTES);
        }
        byte[] value = new byte[(int) n];
        in.readFully(value);
        return value;
    }

    private long add(String key, long increment) throws IOException {
        send(withString(query(ADD), wireKey(key)).putLong(increment));
        return readLong();
    }

    private boolean check(String key) throws IOException {
        send(withString(query(CHECK).putLong(1), wireKey(key)));
        return in.readUnsignedByte() == CHECK_READY;
    }

    /**
     * VALIDATE then PING; the echoed nonce. A store that closes the connection here does not know these queries:
     * torch 1.13's TCPStore drops a client whose first byte is VALIDATE.
     */
    private int handshake(int nonce) throws IOException {
        try {
            send(query(VALIDATE).putInt(VALIDATION_MAGIC));
            send(query(PING).putInt(nonce));
            return readInt();
        } catch (IOException e) {
            if (e instanceof EOFException || e instanceof SocketException) {
                throw new IOException("it closed the connection at the handshake (" + e.getMessage() + "): "
                        + "dcp4j speaks the TCPStore protocol of torch 2 (VALIDATE, then PING; run against torch "
                        + "2.11), and torch 1.13's store drops such a client", e);
            }
            throw e;
        }
    }

    private void delete(String key) throws IOException {
        send(withString(query(DELETE_KEY), wireKey(key)));
        readLong();
    }

    private int readInt() throws IOException {
        byte[] b = new byte[Integer.BYTES];
        in.readFully(b);
        return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).getInt();
    }

    private long readLong() throws IOException {
        byte[] b = new byte[Long.BYTES];
        in.readFully(b);
        return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).getLong();
    }

    private static void closeQuietly(Socket s) {
        if (s != null) {
            try {
                s.close();
            } catch (IOException ignored) {
                // already failing: the first error is the one reported
            }
        }
    }

    /** Closes the connection; the keys stay in torch's store, which lives as long as its job. */
    @Override
    public synchronized void close() {
        closeQuietly(socket);
    }

    @Override
    public String toString() {
        return "rank " + rank() + " of " + worldSize() + " at " + where;
    }
}
