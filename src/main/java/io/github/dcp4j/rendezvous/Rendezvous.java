package io.github.dcp4j.rendezvous;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;

/**
 * How the ranks of a group in several processes find each other and exchange small messages (IPC handles, call
 * descriptors). Every exchange is an all-gather under a key: each rank contributes its bytes and receives every
 * rank's, in rank order. All ranks make the same exchanges in the same order; the implementations number them, so a
 * name may be used again (the n-th exchange of every rank meets the n-th of the others). Every wait is bounded by
 * {@link #timeout()}; a rank that never arrives fails the others' exchange with a {@link RendezvousException} naming
 * it, and a participant of another job, of another world size or with a rank already taken is refused.
 */
public interface Rendezvous extends AutoCloseable {

    /** This participant's rank, in [0, worldSize). */
    int rank();

    int worldSize();

    /** How long one exchange waits for every rank. */
    Duration timeout();

    /** Where the ranks meet, for messages (a directory or host:port). */
    String describe();

    /**
     * Contributes {@code mine} under {@code key} and returns every rank's contribution, indexed by rank.
     *
     * @throws RendezvousException when a rank does not arrive within the timeout, left, or is foreign
     */
    List<byte[]> allGather(String key, byte[] mine);

    /** Waits until every rank has reached {@code key}. */
    default void barrier(String key) {
        allGather(key, new byte[0]);
    }

    @Override
    void close();

    /** Rank; required. */
    String RANK = "RANK";
    /** Number of ranks; required. */
    String WORLD_SIZE = "WORLD_SIZE";
    /** Host of rank 0's TCP store (torchrun's name). */
    String MASTER_ADDR = "MASTER_ADDR";
    /** Port of rank 0's TCP store (torchrun's name). */
    String MASTER_PORT = "MASTER_PORT";
    /** Port of rank 0's TCP store when it must differ from MASTER_PORT (torchrun's agent holds MASTER_PORT). */
    String DCP4J_MASTER_PORT = "DCP4J_MASTER_PORT";
    /** A shared directory to meet in instead of TCP. */
    String DCP4J_RENDEZVOUS_DIR = "DCP4J_RENDEZVOUS_DIR";
    /** Identifies one job, so that a participant of another job (or a stale file) is refused. */
    String DCP4J_JOB_ID = "DCP4J_JOB_ID";
    /** torchrun's run id, used as the job id when DCP4J_JOB_ID is not set. */
    String TORCHELASTIC_RUN_ID = "TORCHELASTIC_RUN_ID";

    /**
     * The rendezvous the environment describes, torchrun's convention: {@code RANK}, {@code WORLD_SIZE}, and either
     * {@code DCP4J_RENDEZVOUS_DIR} (a shared directory) or {@code MASTER_ADDR} + {@code MASTER_PORT} (rank 0 serves a
     * TCP store there; {@code DCP4J_MASTER_PORT} overrides the port). The job id is {@code DCP4J_JOB_ID}, else
     * {@code TORCHELASTIC_RUN_ID}, else "default".
     */
    static Rendezvous fromEnvironment(Map<String, String> env, Duration timeout) {
        int world = intVariable(env, WORLD_SIZE);
        int rank = intVariable(env, RANK);
        String job = env.getOrDefault(DCP4J_JOB_ID, env.getOrDefault(TORCHELASTIC_RUN_ID, "default"));
        String dir = env.get(DCP4J_RENDEZVOUS_DIR);
        if (dir != null && !dir.isEmpty()) {
            return new DirectoryRendezvous(Path.of(dir), job, rank, world, timeout);
        }
        String host = env.get(MASTER_ADDR);
        String port = env.getOrDefault(DCP4J_MASTER_PORT, env.get(MASTER_PORT));
        if (host == null || port == null) {
            throw new IllegalArgumentException("no rendezvous in the environment: set " + DCP4J_RENDEZVOUS_DIR
                    + " (a shared directory), or " + MASTER_ADDR + " and " + MASTER_PORT + " (rank 0 serves a TCP"
                    + " store), beside " + RANK + " and " + WORLD_SIZE);
        }
        return TcpRendezvous.connect(host, parsePort(port), job, rank, world, timeout);
    }

    /** Whether the environment names a rank of a multi-process group ({@code RANK} and {@code WORLD_SIZE} set). */
    static boolean inEnvironment(Map<String, String> env) {
        return env.containsKey(RANK) && env.containsKey(WORLD_SIZE);
    }

    private static int intVariable(Map<String, String> env, String name) {
        String v = env.get(name);
        if (v == null) {
            throw new IllegalArgumentException("environment variable " + name + " is not set");
        }
        try {
            return Integer.parseInt(v.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("environment variable " + name + " must be an integer; got '" + v
                    + "'");
        }
    }

    private static int parsePort(String v) {
        if (!v.trim().matches("[0-9]{1,5}") || Integer.parseInt(v.trim()) < 1 || Integer.parseInt(v.trim()) > 65535) {
            throw new IllegalArgumentException("the rendezvous port must be in [1, 65535]; got '" + v + "'");
        }
        return Integer.parseInt(v.trim());
    }

    /** Checks rank and world size, shared by the implementations. */
    static void requireRank(int rank, int worldSize) {
        if (worldSize < 1) {
            throw new IllegalArgumentException("world size must be >= 1; got " + worldSize);
        }
        if (rank < 0 || rank >= worldSize) {
            throw new IllegalArgumentException("rank must be in [0, " + worldSize + "); got " + rank);
        }
    }

    /** Keys become file names and wire strings: letters, digits, '-', '_' and '.'. */
    static void requireKey(String key) {
        if (key == null || !key.matches("[A-Za-z0-9_.-]{1,100}") || key.startsWith(".")) {
            throw new IllegalArgumentException("rendezvous key must be 1-100 of [A-Za-z0-9_.-], not starting with"
                    + " '.'; got '" + key + "'");
        }
    }
}
