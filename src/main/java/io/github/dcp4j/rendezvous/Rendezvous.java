package io.github.dcp4j.rendezvous;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * How the ranks of a group in several processes find each other and exchange small messages (IPC handles, call
 * descriptors). Every exchange is an all-gather under a key: each rank contributes its bytes and receives every
 * rank's, in rank order. All ranks make the same exchanges in the same order; the implementations number them, so a
 * name may be used again (the n-th exchange of every rank meets the n-th of the others). Every wait is bounded by
 * {@link #timeout()}; a rank that never arrives fails the others' exchange with a {@link RendezvousException} naming
 * it, and a participant of another job, of another world size or with a rank already taken is refused.
 */
public interface Rendezvous extends AutoCloseable {

    /** {@return this participant's rank, in [0, worldSize)} */
    int rank();

    /** {@return the ranks in the group} */
    int worldSize();

    /** {@return how long one exchange waits for every rank} */
    Duration timeout();

    /** {@return where the ranks meet, for messages (a directory or host:port)} */
    String describe();

    /**
     * Contributes {@code mine} under {@code key} and returns every rank's contribution, indexed by rank.
     *
     * @param key  the exchange's name, the same on every rank (see {@link #requireKey})
     * @param mine this rank's contribution
     * @return every rank's contribution, by rank
     * @throws RendezvousException when a rank does not arrive within the timeout, left, or is foreign
     */
    List<byte[]> allGather(String key, byte[] mine);

    /**
     * Waits until every rank has reached {@code key}.
     *
     * @param key the barrier's name, the same on every rank
     */
    default void barrier(String key) {
        allGather(key, new byte[0]);
    }

    @Override
    void close();

    /** Rank (torchrun's name; other launchers', {@link LauncherEnvironment}). */
    String RANK = "RANK";
    /** Number of ranks (torchrun's name). */
    String WORLD_SIZE = "WORLD_SIZE";
    /** Rank on this node (torchrun's name); it picks the GPU. */
    String LOCAL_RANK = "LOCAL_RANK";
    /** Ranks on this node (torchrun's name). */
    String LOCAL_WORLD_SIZE = "LOCAL_WORLD_SIZE";
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
    /**
     * The secret every rendezvous message of one run is tagged with, required of every rank ({@link JobSecret}: at
     * least {@value JobSecret#MIN_CHARS} characters, the same on every rank; {@code dcp4j launch} sets a fresh one per
     * launch).
     */
    String DCP4J_JOB_SECRET = "DCP4J_JOB_SECRET";
    /** torchrun's run id, used as the job id when DCP4J_JOB_ID is not set. */
    String TORCHELASTIC_RUN_ID = "TORCHELASTIC_RUN_ID";
    /** "True" where torchrun's agent serves its store at MASTER_ADDR:MASTER_PORT for the workers. */
    String TORCHELASTIC_USE_AGENT_STORE = "TORCHELASTIC_USE_AGENT_STORE";
    /** How often torchrun has restarted the group's workers (their keys in its store are kept apart by it). */
    String TORCHELASTIC_RESTART_COUNT = "TORCHELASTIC_RESTART_COUNT";

    /**
     * The rendezvous the environment describes: rank and world size from the launcher ({@link LauncherEnvironment}:
     * torchrun's {@code RANK}, {@code WORLD_SIZE}, or Open MPI's, PMI's, SLURM's), and {@code DCP4J_RENDEZVOUS_DIR}
     * (a shared directory) if set, else under torchrun its agent's store at {@code MASTER_ADDR:MASTER_PORT}
     * ({@link TorchStoreRendezvous}, where {@code TORCHELASTIC_USE_AGENT_STORE} is "True" and no
     * {@code DCP4J_MASTER_PORT} is set), else a TCP store that rank 0 serves at {@code MASTER_ADDR} (under
     * SLURM by default the first host of the step) and {@code DCP4J_MASTER_PORT}, else {@code MASTER_PORT}, else
     * under SLURM {@link #slurmPort}. The job id is {@code DCP4J_JOB_ID}, else {@code TORCHELASTIC_RUN_ID}, else
     * the launcher's ({@code SLURM_JOB_ID}), else "default"; every message is tagged with {@code DCP4J_JOB_SECRET},
     * which is read first: a rank without one refuses before it opens anything.
     *
     * @param env     the process environment
     * @param timeout how long one exchange waits for every rank
     * @return this rank's rendezvous, joined
     * @throws EnvironmentException where a variable it reads is missing or malformed (naming it, its value and what it
     *         may be), before anything is opened; among them {@code DCP4J_JOB_SECRET}, not set or too short
     */
    static Rendezvous fromEnvironment(Map<String, String> env, Duration timeout) {
        LauncherEnvironment launch = LauncherEnvironment.of(env);
        JobSecret secret = JobSecret.fromEnvironment(env, launch);
        String job = jobId(env, launch);
        String dir = env.get(DCP4J_RENDEZVOUS_DIR);
        if (dir != null && !dir.isEmpty()) {
            if (!Files.isDirectory(Path.of(dir))) {
                throw new EnvironmentException(DCP4J_RENDEZVOUS_DIR, "environment variable " + DCP4J_RENDEZVOUS_DIR
                        + " must name an existing directory that every rank can write (on a file system every node"
                        + " shares); got '" + dir + "', " + (Files.exists(Path.of(dir)) ? "not a directory"
                        : "which does not exist"));
            }
            return new DirectoryRendezvous(Path.of(dir), job, secret, launch.rank(), launch.worldSize(), timeout);
        }
        if (agentStore(env) && env.containsKey(MASTER_ADDR) && env.containsKey(MASTER_PORT)
                && !env.containsKey(DCP4J_MASTER_PORT)) {
            return new TorchStoreRendezvous(host(env.get(MASTER_ADDR)), port(env, MASTER_PORT), job, secret,
                    restartCount(env), launch.rank(), launch.worldSize(), timeout);
        }
        Optional<String> host = Optional.ofNullable(env.get(MASTER_ADDR)).map(Rendezvous::host).or(launch::rank0Host);
        Optional<Integer> port = env.containsKey(DCP4J_MASTER_PORT) ? Optional.of(port(env, DCP4J_MASTER_PORT))
                : env.containsKey(MASTER_PORT) ? Optional.of(port(env, MASTER_PORT))
                : launch.jobId().map(Rendezvous::slurmPort);
        if (host.isEmpty() || port.isEmpty()) {
            throw new EnvironmentException(host.isEmpty() ? MASTER_ADDR : MASTER_PORT, "no rendezvous in the"
                    + " environment of rank " + launch.rank() + " (from " + launch.launcher() + "): set "
                    + DCP4J_RENDEZVOUS_DIR + " (a shared directory), or " + (host.isEmpty() ? MASTER_ADDR + " and "
                    : "") + MASTER_PORT + " (rank 0 serves a TCP store)");
        }
        return TcpRendezvous.connect(host.get(), port.get(), job, secret, launch.rank(), launch.worldSize(), timeout);
    }

    /**
     * The job id: {@code DCP4J_JOB_ID}, else {@code TORCHELASTIC_RUN_ID}, else the launcher's, else "default"; 1 to 256
     * characters, so that the hello and every message that carry it stay small.
     */
    private static String jobId(Map<String, String> env, LauncherEnvironment launch) {
        String variable = env.containsKey(DCP4J_JOB_ID) ? DCP4J_JOB_ID
                : env.containsKey(TORCHELASTIC_RUN_ID) ? TORCHELASTIC_RUN_ID
                : launch.jobId().isPresent() ? "SLURM_JOB_ID" : null;
        if (variable == null) {
            return "default";
        }
        String job = env.get(variable);
        int maxChars = 256;
        if (job.isEmpty() || job.length() > maxChars) {
            throw new EnvironmentException(variable, "environment variable " + variable + " must be a job id of 1 to "
                    + maxChars + " characters; got " + (job.isEmpty() ? "an empty one" : "one of " + job.length()
                    + " characters, '" + job.substring(0, 32) + "...'"));
        }
        return job;
    }

    /** torchrun's {@code TORCHELASTIC_USE_AGENT_STORE}: "True" or "False" as torchrun writes it, false where unset. */
    private static boolean agentStore(Map<String, String> env) {
        String v = env.get(TORCHELASTIC_USE_AGENT_STORE);
        if (v == null || v.equalsIgnoreCase("false")) {
            return false;
        }
        if (v.equalsIgnoreCase("true")) {
            return true;
        }
        throw new EnvironmentException(TORCHELASTIC_USE_AGENT_STORE, "environment variable "
                + TORCHELASTIC_USE_AGENT_STORE + " must be True or False (torchrun sets it); got '" + v + "'");
    }

    /** torchrun's {@code TORCHELASTIC_RESTART_COUNT}: 0 where it is not set. */
    private static int restartCount(Map<String, String> env) {
        return env.containsKey(TORCHELASTIC_RESTART_COUNT) ? LauncherEnvironment.integer(env,
                TORCHELASTIC_RESTART_COUNT, 0, LauncherEnvironment.MAX_INTEGER, " (torchrun sets it)") : 0;
    }

    /**
     * {@code MASTER_ADDR}, checked to be a host name or an IP address (v6 in brackets or not, with a zone): a value
     * that cannot be one is refused here, naming it; a name no resolver knows fails the connection, naming the host.
     */
    private static String host(String v) {
        if (!v.matches("[A-Za-z0-9._:%\\[\\]-]{1,253}")) {
            throw new EnvironmentException(MASTER_ADDR, "environment variable " + MASTER_ADDR + " must be a host name"
                    + " or an IP address (1 to 253 of letters, digits, '.', '-', '_', ':', '%', '[', ']'); got '" + v
                    + "'");
        }
        return v;
    }

    /**
     * The store's port where only SLURM's job id says which: 20000 + the job id's last four digits, the same on every
     * rank of the job and different for jobs that share a node.
     *
     * @param jobId SLURM's job id
     * @return the port
     */
    static int slurmPort(String jobId) {
        String digits = jobId.replaceAll("[^0-9]", "");
        int last = digits.isEmpty() ? 0 : Integer.parseInt(digits.substring(Math.max(0, digits.length() - 4)));
        return 20000 + last;
    }

    /**
     * Whether the environment names a rank of a multi-process group (some launcher's rank variable is set).
     *
     * @param env the process environment
     * @return true where it does
     */
    static boolean inEnvironment(Map<String, String> env) {
        return LauncherEnvironment.present(env);
    }

    /** The TCP port in variable {@code name}, in [1, 65535]. */
    private static int port(Map<String, String> env, String name) {
        String v = env.get(name);
        if (!v.trim().matches("[0-9]{1,5}") || Integer.parseInt(v.trim()) < 1 || Integer.parseInt(v.trim()) > 65535) {
            throw new EnvironmentException(name, "environment variable " + name + " must be a TCP port in [1, 65535];"
                    + " got '" + v + "'");
        }
        return Integer.parseInt(v.trim());
    }

    /**
     * Checks rank and world size, shared by the implementations.
     *
     * @param rank      the rank
     * @param worldSize the ranks in the group
     */
    static void requireRank(int rank, int worldSize) {
        if (worldSize < 1) {
            throw new IllegalArgumentException("world size must be >= 1; got " + worldSize);
        }
        if (rank < 0 || rank >= worldSize) {
            throw new IllegalArgumentException("rank must be in [0, " + worldSize + "); got " + rank);
        }
    }

    /**
     * Keys become file names and wire strings: letters, digits, '-', '_' and '.'.
     *
     * @param key the key to check
     */
    static void requireKey(String key) {
        if (key == null || !key.matches("[A-Za-z0-9_.-]{1,100}") || key.startsWith(".")) {
            throw new IllegalArgumentException("rendezvous key must be 1-100 of [A-Za-z0-9_.-], not starting with"
                    + " '.'; got '" + key + "'");
        }
    }
}
