package io.github.dcp4j.rendezvous;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.BindException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
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
 */
final class TcpStore {
    private final ServerSocket server;
    private final Participant owner;
    private final JobSecret secret;
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

    private TcpStore(ServerSocket server, Participant owner, JobSecret secret) {
        this.server = server;
        this.owner = owner;
        this.secret = secret;
        this.acceptor = Thread.ofVirtual().name("dcp4j-rendezvous-store").start(this::acceptLoop);
    }

    /** Serves {@code port} on {@code host}'s interface where it is a loopback address, else on every interface. */
    static TcpStore start(String host, int port, Participant owner, JobSecret secret) {
        try {
            InetAddress address = InetAddress.getByName(host);
            ServerSocket s = new ServerSocket();
            s.setReuseAddress(true);
            try {
                s.bind(address.isLoopbackAddress() ? new InetSocketAddress(address, port) : new InetSocketAddress(port),
                        owner.worldSize() * 2);
            } catch (BindException e) {
                s.close();
                throw new RendezvousException("rank 0 cannot serve the TCP rendezvous on port " + port + ": "
                        + e.getMessage() + " (under torchrun the agent holds MASTER_PORT: set "
                        + Rendezvous.DCP4J_MASTER_PORT + " to a free port)", e);
            }
            return new TcpStore(s, owner, secret);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot open the TCP rendezvous store on port " + port, e);
        }
    }

    int port() {
        return server.getLocalPort();
    }

    /** The address the store listens on (the wildcard address for every interface). */
    InetAddress listensOn() {
        return server.getInetAddress();
    }

    private void acceptLoop() {
        while (!server.isClosed()) {
            try {
                Socket s = server.accept();
                s.setTcpNoDelay(true);
                Thread.ofVirtual().name("dcp4j-rendezvous-peer").start(() -> serve(s));
            } catch (IOException e) {
                return;
            }
        }
    }

    private void serve(Socket socket) {
        int rank = -1;
        boolean bye = false;
        String lastKey = "(before its first exchange)";
        try (socket;
             DataInputStream in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
             DataOutputStream out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()))) {
            if (in.readInt() != TcpRendezvous.HELLO) {
                return;
            }
            String source = "connection from " + socket.getRemoteSocketAddress();
            Participant.Opened hello = Participant.open(Wire.readMessage(in, source), false, secret, source);
            Participant p = hello.from();
            String refusal = join(hello);
            if (refusal != null) {
                out.writeInt(TcpRendezvous.ERROR);
                out.writeUTF(refusal);
                out.flush();
                return;
            }
            rank = p.rank();
            out.writeInt(TcpRendezvous.OK);
            out.flush();
            while (true) {
                int op = in.readInt();
                if (op == TcpRendezvous.BYE) {
                    bye = true;
                    return;
                }
                if (op != TcpRendezvous.GATHER) {
                    return;
                }
                String key = in.readUTF();
                long timeoutMs = in.readLong();
                byte[] mine = Wire.readMessage(in, "rank " + rank + "'s connection");
                lastKey = key;
                gather(rank, key, mine, timeoutMs, out);
                out.flush();
            }
        } catch (IOException | RendezvousException e) {
            // the peer's connection broke or sent what no rank sends: recorded as a departure below
        } finally {
            if (rank >= 0) {
                leave(rank, bye, lastKey);
            }
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
