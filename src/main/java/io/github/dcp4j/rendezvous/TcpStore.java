package io.github.dcp4j.rendezvous;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.FilterInputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.BindException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Rank 0's side of {@link TcpRendezvous}: accepts one connection per rank (checking job, run, the hello's tag, world
 * size and that the rank is free), and answers each GATHER once every rank has sent one for its key. One virtual
 * thread per connection.
 *
 * <p>Whoever can reach the port can connect, so a connection is held to limits and dropped, named in the log, when it
 * breaks one, while the store goes on serving the ranks: its hello must arrive whole within {@link #MAX_READ_WAIT}
 * (or the rendezvous timeout, where shorter) and be at most {@link Wire#MAX_HEADER_BYTES}; at most the world size +
 * {@link #SPARE_CONNECTIONS} connections may wait for their hello at once (the oldest is dropped for a new one); a
 * rank's request, once begun, must arrive whole within the same wait, and is at most one message
 * ({@link Wire#MAX_MESSAGE_BYTES}) and a key. A rank sends its next request only after the store answered the last, so
 * that bounds what one connection may have sent before it is answered or dropped.
 */
final class TcpStore {
    /**
     * The longest a connection may take to send its hello, or the rest of a request it has begun: a rank writes either
     * whole as soon as it connects or asks.
     */
    static final Duration MAX_READ_WAIT = Duration.ofSeconds(10);
    /**
     * Connections that may wait for their hello beyond the group's ranks (each rank connects once): room for a rank
     * that reconnects, not for a flood.
     */
    static final int SPARE_CONNECTIONS = 16;
    private static final System.Logger LOG = System.getLogger(TcpStore.class.getName());

    private final ServerSocket server;
    private final Participant owner;
    private final JobSecret secret;
    private final Duration readWait;
    /** Connections whose hello has not been read yet, oldest first (guarded by itself). */
    private final LinkedHashSet<Socket> unauthenticated = new LinkedHashSet<>();
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    /** Ranks connected now (guarded by lock). */
    private final TreeSet<Integer> connected = new TreeSet<>();
    /** Ranks that closed their connection without BYE, with the last key they reached (guarded by lock). */
    private final Map<Integer, String> departed = new HashMap<>();
    /** Contributions per key, until every rank that contributed has left the round (guarded by lock). */
    private final Map<String, Round> rounds = new HashMap<>();
    private final Thread acceptor;

    private static final class Round {
        final byte[][] parts;
        /** Contributors whose wait has ended, with the result or with a failure. */
        int ended;

        Round(int world) {
            parts = new byte[world][];
        }

        int contributors() {
            return parts.length - missing().size();
        }

        List<Integer> missing() {
            List<Integer> m = new ArrayList<>();
            for (int r = 0; r < parts.length; r++) {
                if (parts[r] == null) {
                    m.add(r);
                }
            }
            return m;
        }
    }

    private TcpStore(ServerSocket server, Participant owner, JobSecret secret, Duration readWait) {
        this.server = server;
        this.owner = owner;
        this.secret = secret;
        this.readWait = readWait;
        this.acceptor = Thread.ofVirtual().name("dcp4j-rendezvous-store").start(this::acceptLoop);
    }

    /**
     * Serves {@code port} on the address {@code host} resolves to (the one the ranks connect to) where it is an address
     * of this machine, a loopback address included, so that the store is reachable only where the ranks were told to
     * meet; else on every interface, logged once with the reason: an address behind NAT is no address of this machine,
     * and the connections to it arrive at one of its own. A connection's reads wait at most {@code timeout} or
     * {@link #MAX_READ_WAIT}, the shorter.
     */
    static TcpStore start(String host, int port, Participant owner, JobSecret secret, Duration timeout) {
        try {
            InetAddress address = InetAddress.getByName(host);
            String everyInterface = null;  // why the store cannot listen on the address alone, where it cannot
            if (address.isAnyLocalAddress()) {
                everyInterface = "it is the wildcard address";
            } else if (!isOwn(address)) {
                everyInterface = "it is no address of this machine's network interfaces (an address behind NAT, for"
                        + " one)";
            }
            ServerSocket s = new ServerSocket();
            s.setReuseAddress(true);
            try {
                s.bind(everyInterface == null ? new InetSocketAddress(address, port) : new InetSocketAddress(port),
                        maxUnauthenticated(owner.worldSize()));
            } catch (BindException e) {
                s.close();
                throw new RendezvousException("rank 0 cannot serve the TCP rendezvous on port " + port + ": "
                        + e.getMessage() + " (under torchrun the agent holds MASTER_PORT: set "
                        + Rendezvous.DCP4J_MASTER_PORT + " to a free port)", e);
            }
            if (everyInterface != null) {
                LOG.log(System.Logger.Level.INFO, "TCP rendezvous store: listening on port " + s.getLocalPort()
                        + " of every interface, not on " + host + " (" + address.getHostAddress() + ") alone: "
                        + everyInterface);
            }
            return new TcpStore(s, owner, secret, timeout.compareTo(MAX_READ_WAIT) < 0 ? timeout : MAX_READ_WAIT);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot open the TCP rendezvous store at " + host + ":" + port + ": " + e,
                    e);
        }
    }

    /**
     * Whether this machine can listen on {@code address} alone: a loopback address (all of 127/8 is local, not only the
     * one the loopback interface lists) or one of its interfaces' addresses.
     */
    private static boolean isOwn(InetAddress address) throws SocketException {
        return address.isLoopbackAddress() || NetworkInterface.getByInetAddress(address) != null;
    }

    int port() {
        return server.getLocalPort();
    }

    /** The address the store listens on (the wildcard address for every interface). */
    InetAddress listensOn() {
        return server.getInetAddress();
    }

    /** The connections that may wait for their hello at once in a group of {@code worldSize}. */
    static int maxUnauthenticated(int worldSize) {
        return worldSize + SPARE_CONNECTIONS;
    }

    private void acceptLoop() {
        while (!server.isClosed()) {
            Socket s;
            try {
                s = server.accept();
            } catch (IOException e) {
                return;  // the store is closed
            }
            Socket oldest = admit(s);
            if (oldest != null) {
                drop(oldest, "connection from " + oldest.getRemoteSocketAddress(), "more than "
                        + maxUnauthenticated(owner.worldSize()) + " connections were waiting for their hello; the"
                        + " oldest is dropped");
            }
            Thread.ofVirtual().name("dcp4j-rendezvous-peer").start(() -> serve(s));
        }
    }

    /**
     * Counts {@code s} among the connections waiting for their hello; returns the oldest of them where that makes too
     * many (a rank sends its hello as it connects, so a flood of silent connections costs the flooder its own first).
     */
    private Socket admit(Socket s) {
        synchronized (unauthenticated) {
            unauthenticated.add(s);
            if (unauthenticated.size() <= maxUnauthenticated(owner.worldSize())) {
                return null;
            }
            Socket oldest = unauthenticated.getFirst();
            unauthenticated.remove(oldest);
            return oldest;
        }
    }

    /**
     * Takes {@code s} off the connections waiting for their hello: whether it was among them (false: it was dropped
     * as the oldest).
     */
    private boolean doneWaiting(Socket s) {
        synchronized (unauthenticated) {
            return unauthenticated.remove(s);
        }
    }

    /** Closes a connection that broke a limit or was refused, naming it and why in the log first. */
    private static void drop(Socket s, String who, String why) {
        LOG.log(System.Logger.Level.WARNING, "TCP rendezvous store: dropped the " + who + ": " + why);
        close(s);
    }

    private static void close(Socket s) {
        try {
            s.close();
        } catch (IOException e) {
            // closing a connection that ended or broke: nothing to recover
        }
    }

    private void serve(Socket socket) {
        int rank = -1;
        boolean bye = false;
        boolean inRequest = true;  // the hello is the first request
        String who = "connection from " + socket.getRemoteSocketAddress();
        String lastKey = "(before its first exchange)";
        // the socket is closed in the finally below, after the log names a connection that broke: whoever watches the
        // connection end finds it named
        try {
            socket.setTcpNoDelay(true);
            ReadDeadline deadline = new ReadDeadline(socket);
            DataInputStream in = new DataInputStream(new BufferedInputStream(deadline));
            DataOutputStream out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
            deadline.start(readWait);
            int first = in.readInt();
            if (first != TcpRendezvous.HELLO) {
                throw new RendezvousException("it sent " + first + " where a hello (" + TcpRendezvous.HELLO
                        + ") belongs");
            }
            Participant.Opened hello = Participant.open(Wire.readHeaderMessage(in, "its hello"), false, secret,
                    "its hello");
            if (!doneWaiting(socket)) {
                return;  // dropped as the oldest while its hello arrived
            }
            String refusal = join(hello);
            if (refusal != null) {
                out.writeInt(TcpRendezvous.ERROR);
                out.writeUTF(refusal);
                out.flush();
                drop(socket, who, "refused: " + refusal);
                return;
            }
            rank = hello.from().rank();
            who = "connection of rank " + rank + " from " + socket.getRemoteSocketAddress();
            out.writeInt(TcpRendezvous.OK);
            out.flush();
            while (true) {
                // between requests a rank may be quiet as long as it likes: its own waits are bounded
                deadline.stop();
                inRequest = false;
                int op = in.readInt();
                inRequest = true;
                deadline.start(readWait);
                if (op == TcpRendezvous.BYE) {
                    bye = true;
                    return;
                }
                if (op != TcpRendezvous.GATHER) {
                    throw new RendezvousException("it sent " + op + " where a request (GATHER " + TcpRendezvous.GATHER
                            + " or BYE " + TcpRendezvous.BYE + ") belongs");
                }
                String key = in.readUTF();
                long timeoutMs = in.readLong();
                byte[] mine = Wire.readMessage(in, "its request");
                lastKey = key;
                gather(rank, key, mine, timeoutMs, out);
                out.flush();
            }
        } catch (SocketTimeoutException e) {
            dropBroken(socket, rank, who, "it did not send " + (rank < 0 ? "its hello" : "the rest of its request")
                    + " within " + readWait);
        } catch (IOException | RendezvousException e) {
            // a connection that ends between requests is a rank's departure, recorded below; anything else broke
            if (inRequest) {
                dropBroken(socket, rank, who, e instanceof EOFException
                        ? "the connection ended before its " + (rank < 0 ? "hello" : "request") + " was complete"
                        : e.getMessage());
            }
        } finally {
            close(socket);
            if (rank >= 0) {
                leave(rank, bye, lastKey);
            }
        }
    }

    /** Drops a connection whose hello or request broke, unless it was dropped already as the oldest. */
    private void dropBroken(Socket socket, int rank, String who, String why) {
        if (rank >= 0 || doneWaiting(socket)) {
            drop(socket, who, why);
        }
    }

    /**
     * A connection's input with an optional deadline: while one runs, every read waits at most until it passes, so a
     * peer that stalls in the middle of a hello or a request cannot hold its connection for ever.
     */
    private static final class ReadDeadline extends FilterInputStream {
        private final Socket socket;
        private long deadline;
        private boolean running;

        ReadDeadline(Socket socket) throws IOException {
            super(socket.getInputStream());
            this.socket = socket;
        }

        void start(Duration within) {
            deadline = System.nanoTime() + within.toNanos();
            running = true;
        }

        void stop() {
            running = false;
        }

        /** Sets the socket's read timeout to what is left of the deadline (none where no deadline runs). */
        private void bound() throws IOException {
            if (!running) {
                socket.setSoTimeout(0);
                return;
            }
            long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
            if (left <= 0) {
                throw new SocketTimeoutException("the read deadline passed");
            }
            socket.setSoTimeout((int) Math.min(Integer.MAX_VALUE, left));
        }

        @Override
        public int read() throws IOException {
            bound();
            return super.read();
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            bound();
            return super.read(b, off, len);
        }
    }

    private String join(Participant.Opened hello) {
        Participant p = hello.from();
        String why = owner.refusal(hello, TcpRendezvous.HELLO_KEY);
        if (why != null) {
            return why;
        }
        lock.lock();
        try {
            if (connected.contains(p.rank())) {
                return "rank " + p.rank() + " is already taken (pid " + p.pid() + " tried to join as rank "
                        + p.rank() + " a second time)";
            }
            connected.add(p.rank());
            departed.remove(p.rank());
            return null;
        } finally {
            lock.unlock();
        }
    }

    private void leave(int rank, boolean bye, String lastKey) {
        lock.lock();
        try {
            connected.remove(rank);
            if (!bye) {
                departed.put(rank, lastKey);
            }
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    private void gather(int rank, String key, byte[] mine, long timeoutMs, DataOutputStream out) throws IOException {
        byte[][] result = null;
        String failure;
        Round round = null;
        lock.lock();
        try {
            round = rounds.computeIfAbsent(key, k -> new Round(owner.worldSize()));
            round.parts[rank] = mine;
            changed.signalAll();
            long nanos = TimeUnit.MILLISECONDS.toNanos(timeoutMs);
            while (true) {
                List<Integer> missing = round.missing();
                if (missing.isEmpty()) {
                    result = round.parts;
                    failure = null;
                    break;
                }
                List<Integer> gone = new ArrayList<>();
                for (int m : missing) {
                    if (departed.containsKey(m)) {
                        gone.add(m);
                    }
                }
                if (!gone.isEmpty()) {
                    failure = "rendezvous '" + key + "': rank(s) " + gone + " left the group (connection closed"
                            + " after '" + departed.get(gone.getFirst()) + "') before arriving";
                    break;
                }
                if (nanos <= 0) {
                    failure = "rendezvous '" + key + "' timed out after " + Duration.ofMillis(timeoutMs) + " on rank "
                            + rank + ": rank(s) " + missing + " never arrived";
                    break;
                }
                nanos = changed.awaitNanos(nanos);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            failure = "rendezvous '" + key + "': the store was interrupted";
        } finally {
            // a failed round is dropped too, once its last waiter gave up; a rank arriving later starts a new one
            if (round != null && ++round.ended == round.contributors()) {
                rounds.remove(key);
            }
            lock.unlock();
        }
        if (failure != null) {
            out.writeInt(TcpRendezvous.ERROR);
            out.writeUTF(failure);
            return;
        }
        out.writeInt(TcpRendezvous.RESULT);
        out.writeInt(result.length);
        for (byte[] part : result) {
            Wire.writeMessage(out, part);
        }
    }

    /** Rounds still held: some contributor is still waiting (for tests). */
    int openRounds() {
        lock.lock();
        try {
            return rounds.size();
        } finally {
            lock.unlock();
        }
    }

    /** Waits up to {@code grace} for every rank to leave, then stops accepting and closes. */
    void close(Duration grace) {
        long nanos = grace.toNanos();
        lock.lock();
        try {
            while (!connected.isEmpty() && nanos > 0) {
                nanos = changed.awaitNanos(nanos);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            lock.unlock();
        }
        try {
            server.close();
        } catch (IOException e) {
            // stopping: the port is released either way
        }
        acceptor.interrupt();
    }
}
