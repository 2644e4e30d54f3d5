package io.github.dcp4j.rendezvous;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.locks.LockSupport;

/**
 * A rendezvous through a small TCP store that rank 0 serves ({@link TcpStore}); every rank, rank 0 included, is a
 * client of it. Wire format, big-endian ({@link DataOutputStream}):
 *
 * <pre>
 * client → store   HELLO   length, message: participant (magic, job, run, world size, rank, pid) and its tag
 * store → client   OK | ERROR message
 * client → store   GATHER  key, timeout ms, length, message: the rank's part, sealed for the key
 * store → client   RESULT  n × (length, message) | ERROR message
 * client → store   BYE
 * </pre>
 *
 * The store answers a GATHER when every rank has sent one for the key, or with an error naming the ranks that did not
 * arrive in time or that left (closed their connection without BYE).
 */
public final class TcpRendezvous implements Rendezvous {
    static final int HELLO = 1;
    /** The key a hello is sealed for. */
    static final String HELLO_KEY = "hello";
    static final int GATHER = 2;
    static final int BYE = 3;
    static final int OK = 10;
    static final int RESULT = 11;
    static final int ERROR = 12;
    /** How much longer than the store's own deadline a client waits for its answer. */
    private static final long ANSWER_MARGIN_MS = 5_000;

    private final Participant self;
    private final JobSecret secret;
    private final String where;
    private final Duration timeout;
    private final TcpStore store;
    private final Socket socket;
    private final DataInputStream in;
    private final DataOutputStream out;
    private boolean closed;
    private long exchanges;

    private TcpRendezvous(Participant self, JobSecret secret, String host, int port, Duration timeout,
                          TcpStore store) {
        this.self = self;
        this.secret = secret;
        this.where = host + ":" + port;
        this.timeout = timeout;
        this.store = store;
        try {
            this.socket = connectWithRetry(host, port, System.nanoTime() + timeout.toNanos());
            this.in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
            this.out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
            socket.setSoTimeout((int) Math.min(Integer.MAX_VALUE, timeout.toMillis() + ANSWER_MARGIN_MS));
            out.writeInt(HELLO);
            Wire.writeMessage(out, self.seal(secret, HELLO_KEY, null));
            out.flush();
            expectOk("joining");
        } catch (IOException e) {
            closeQuietly();
            throw new RendezvousException("rank " + self.rank() + " cannot join the TCP rendezvous at " + where + ": "
                    + e.getMessage(), e);
        } catch (RuntimeException e) {
            closeQuietly();
            throw e;
        }
    }

    /**
     * Joins the group at {@code host:port}, every message tagged with {@code secret}. Rank 0 first starts the store
     * there, port as given: on the address {@code host} resolves to, and there alone, where that is an address of this
     * machine (a loopback address keeps a one-node group off the network), else on every interface, which the store's
     * log says (an address behind NAT); the other ranks retry their connection until it is up or the timeout passes.
     *
     * @param host      where rank 0 serves the store
     * @param port      its port (0 on rank 0: any free one, see {@link #storePort()})
     * @param job       the job's id: other jobs' ranks are refused
     * @param secret    the run's secret, the same on every rank: participants of other runs, or without it, are
     *                  refused
     * @param rank      this rank
     * @param worldSize the ranks in the group
     * @param timeout   how long one exchange waits for every rank
     * @return this rank, joined
     */
    public static TcpRendezvous connect(String host, int port, String job, JobSecret secret, int rank, int worldSize,
                                        Duration timeout) {
        Objects.requireNonNull(host, "host");
        Objects.requireNonNull(job, "job");
        Objects.requireNonNull(secret, "secret");
        Rendezvous.requireRank(rank, worldSize);
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive; got " + timeout);
        }
        Participant self = Participant.self(job, secret, rank, worldSize);
        TcpStore store = rank == 0 ? TcpStore.start(host, port, self, secret, timeout) : null;
        try {
            return new TcpRendezvous(self, secret, host, store == null ? port : store.port(), timeout, store);
        } catch (RuntimeException e) {
            if (store != null) {
                store.close(Duration.ZERO);
            }
            throw e;
        }
    }

    /** A connection to {@code host:port}, retried (with a growing pause) until it is up or {@code deadline} passes. */
    static Socket connectWithRetry(String host, int port, long deadline) throws IOException {
        long pause = 10_000_000L;
        while (true) {
            Socket s = new Socket();
            try {
                s.setTcpNoDelay(true);
                s.connect(new InetSocketAddress(host, port), 1000);
                return s;
            } catch (ConnectException | SocketTimeoutException e) {
                s.close();
                if (System.nanoTime() - deadline > 0) {
                    throw new ConnectException("no store at " + host + ":" + port + " (is rank 0 running?): "
                            + e.getMessage());
                }
                LockSupport.parkNanos(pause);
                pause = Math.min(200_000_000L, pause * 2);
            }
        }
    }

    private void expectOk(String what) throws IOException {
        int answer = in.readInt();
        if (answer == ERROR) {
            throw new RendezvousException("TCP rendezvous at " + where + " refused rank " + self.rank() + " "
                    + what + ": " + in.readUTF());
        }
        if (answer != OK) {
            throw new RendezvousException("TCP rendezvous at " + where + " answered " + answer + " to " + what);
        }
    }

    /** {@return the port rank 0's store listens on (as given, or the one chosen for 0); -1 on other ranks} */
    public int storePort() {
        return store == null ? -1 : store.port();
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
        return "TCP store at " + where;
    }

    @Override
    public synchronized List<byte[]> allGather(String name, byte[] mine) {
        Rendezvous.requireKey(name);
        String key = ++exchanges + "-" + name;
        if (closed) {
            throw new IllegalStateException("the rendezvous is closed");
        }
        try {
            out.writeInt(GATHER);
            out.writeUTF(key);
            out.writeLong(timeout.toMillis());
            Wire.writeMessage(out, self.seal(secret, key, mine));
            out.flush();
            int answer = in.readInt();
            if (answer == ERROR) {
                throw new RendezvousException(in.readUTF());
            }
            if (answer != RESULT) {
                throw new RendezvousException("TCP rendezvous at " + where + " answered " + answer + " to '" + key
                        + "'");
            }
            int n = in.readInt();
            if (n != worldSize()) {
                throw new RendezvousException("TCP rendezvous at " + where + " answered '" + key + "' with " + n
                        + " parts for a group of " + worldSize());
            }
            // every part is checked as a file would be: the store relays messages, it cannot forge them
            List<byte[]> parts = new ArrayList<>(n);
            for (int r = 0; r < n; r++) {
                String source = "rank " + r + "'s part of '" + key + "' from the store at " + where;
                Participant.Opened part = Participant.open(Wire.readMessage(in, source), true, secret, source);
                String why = self.refusal(part, key, r);
                if (why != null) {
                    throw new RendezvousException("rendezvous '" + key + "' refused " + source + ": " + why);
                }
                parts.add(r == rank() ? mine.clone() : part.part());
            }
            return parts;
        } catch (SocketTimeoutException e) {
            throw new RendezvousException("rendezvous '" + key + "' at " + where + " timed out after " + timeout
                    + " on rank " + rank() + " (the store did not answer)", e);
        } catch (EOFException e) {
            throw new RendezvousException("rendezvous '" + key + "': the store at " + where + " closed the"
                    + " connection (rank 0 left)", e);
        } catch (IOException e) {
            throw new UncheckedIOException("rendezvous '" + key + "' at " + where + " failed on rank " + rank(), e);
        }
    }

    /** Leaves the group; rank 0 then waits (up to the timeout) for the others to leave before it stops the store. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            out.writeInt(BYE);
            out.flush();
        } catch (IOException e) {
            // the store is gone already: nothing left to tell it
        }
        closeQuietly();
        if (store != null) {
            store.close(timeout);
        }
    }

    private void closeQuietly() {
        if (socket != null) {
            try {
                socket.close();
            } catch (IOException e) {
                // closing a broken socket: nothing to recover
            }
        }
    }

    @Override
    public String toString() {
        return "rank " + rank() + " of " + worldSize() + " via " + describe();
    }
}
