package io.github.dcp4j.rendezvous;

import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Who this process is in its group, as the launcher that started it says: rank, world size, rank on this node and
 * ranks on this node, plus what the launcher tells about the job and where rank 0 runs. The first launcher whose
 * variables are present wins, in this order (docs/DEPLOYMENT.md, "Launchers"):
 * <ol>
 *   <li>{@code RANK}, {@code WORLD_SIZE}, {@code LOCAL_RANK}, {@code LOCAL_WORLD_SIZE}: torchrun, {@code dcp4j
 *       launch}, or set by hand;</li>
 *   <li>Open MPI's {@code OMPI_COMM_WORLD_RANK}, {@code _SIZE}, {@code _LOCAL_RANK}, {@code _LOCAL_SIZE};</li>
 *   <li>PMI's {@code PMI_RANK}, {@code PMI_SIZE} (MPICH, Intel MPI, {@code srun --mpi=pmi2}), with MPICH Hydra's
 *       {@code MPI_LOCALRANKID}, {@code MPI_LOCALNRANKS} for the node;</li>
 *   <li>SLURM's {@code SLURM_PROCID}, {@code SLURM_NTASKS}, {@code SLURM_LOCALID}, and this node's count of
 *       {@code SLURM_TASKS_PER_NODE} (by {@code SLURM_NODEID}), in a task of an {@code srun} step
 *       ({@code SLURM_STEP_ID} set; a batch script has {@code SLURM_PROCID} 0 but is no rank); rank 0's host is the
 *       first of {@code SLURM_STEP_NODELIST} (else {@code SLURM_JOB_NODELIST}), and the job id
 *       {@code SLURM_JOB_ID}.</li>
 * </ol>
 * MPI launchers come before SLURM because {@code mpirun} inside a SLURM allocation leaves the batch script's
 * {@code SLURM_PROCID} (0) in every rank's environment. A launcher whose rank variable is set but whose size
 * variable is not, or any value that is not an integer, out of range or malformed, is refused with an
 * {@link EnvironmentException} naming the variable, its value and what it may be.
 *
 * @param launcher    which launcher's variables these are, as its variable prefix ("RANK", "OMPI_COMM_WORLD",
 *                    "PMI", "SLURM")
 * @param rank        in [0, worldSize)
 * @param worldSize   ranks in the group
 * @param localRank   in [0, localWorldSize); the rank when the launcher does not say
 * @param localWorldSize ranks on this node; the world size when the launcher does not say
 * @param jobId       the launcher's job id, where it has one
 * @param rank0Host   the host rank 0 runs on, where the launcher says
 */
public record LauncherEnvironment(String launcher, int rank, int worldSize, int localRank, int localWorldSize,
                                  Optional<String> jobId, Optional<String> rank0Host) {
    /**
     * An environment, checked: ranks within their sizes ({@link #of} has checked each variable as it read it, naming
     * it; these checks hold a record made otherwise to the same rules).
     */
    public LauncherEnvironment {
        if (worldSize < 1) {
            throw new IllegalArgumentException(launcher + ": the world size must be >= 1; got " + worldSize);
        }
        if (rank < 0 || rank >= worldSize) {
            throw new IllegalArgumentException(launcher + ": the rank must be in [0, " + worldSize + "); got "
                    + rank);
        }
        if (localWorldSize < 1 || localWorldSize > worldSize) {
            throw new IllegalArgumentException(launcher + ": the ranks on this node must be in [1, " + worldSize
                    + "]; got " + localWorldSize);
        }
        if (localRank < 0 || localRank >= localWorldSize) {
            throw new IllegalArgumentException(launcher + ": the rank on this node must be in [0, " + localWorldSize
                    + "); got " + localRank);
        }
    }

    private record Names(String prefix, String rank, String size, String localRank, String localSize) {
    }

    private static final Names TORCHRUN = new Names(Rendezvous.RANK, Rendezvous.RANK, Rendezvous.WORLD_SIZE,
            Rendezvous.LOCAL_RANK, Rendezvous.LOCAL_WORLD_SIZE);
    private static final Names OPEN_MPI = new Names("OMPI_COMM_WORLD", "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE");
    private static final Names PMI = new Names("PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS");
    private static final Names SLURM = new Names("SLURM", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", null);
    private static final List<Names> ORDER = List.of(TORCHRUN, OPEN_MPI, PMI, SLURM);

    /**
     * SLURM's variables are read only in a task of an {@code srun} step: a batch script runs with
     * {@code SLURM_PROCID} 0 of the job's tasks, but is not one of them.
     */
    private static final String SLURM_STEP_ID = "SLURM_STEP_ID";
    /** SLURM's task counts of the step's nodes, and this node's index in them. */
    private static final String TASKS_PER_NODE = "SLURM_TASKS_PER_NODE";
    private static final String NODE_ID = "SLURM_NODEID";
    /** The largest integer a variable of ranks or sizes is read as: nine digits. */
    static final int MAX_INTEGER = 999_999_999;

    /**
     * Whether some launcher's rank variable is set.
     *
     * @param env the process environment
     * @return true where one is
     */
    public static boolean present(Map<String, String> env) {
        return ORDER.stream().anyMatch(n -> names(env, n));
    }

    private static boolean names(Map<String, String> env, Names n) {
        return env.containsKey(n.rank()) && (n != SLURM || env.containsKey(SLURM_STEP_ID));
    }

    /**
     * This process's place in its group, from the first launcher whose rank variable is set.
     *
     * @param env the process environment
     * @return the launcher's rank, sizes, job id and rank 0's host
     * @throws EnvironmentException where none is set, or one of the chosen launcher's variables is missing, not an
     *         integer, out of range or malformed (naming it, its value and what it may be)
     */
    public static LauncherEnvironment of(Map<String, String> env) {
        for (Names n : ORDER) {
            if (names(env, n)) {
                return of(env, n);
            }
        }
        for (Names n : ORDER) {
            if (n != SLURM && env.containsKey(n.size())) {
                throw new EnvironmentException(n.rank(), "environment variable " + n.rank() + " is not set ("
                        + n.size() + " is)");
            }
        }
        throw new EnvironmentException(Rendezvous.RANK, "no launcher's variables in the environment: set "
                + Rendezvous.RANK + " and " + Rendezvous.WORLD_SIZE + " (torchrun, dcp4j launch), or start the ranks"
                + " with mpirun (OMPI_COMM_WORLD_RANK, PMI_RANK) or srun (SLURM_PROCID in a step, SLURM_STEP_ID)");
    }

    /**
     * Where {@code variable}, exported in the shell, reaches every rank that this launcher starts: the words that
     * follow "export it before" in a message asking the user to set it.
     */
    String exportedBefore(String variable) {
        if (launcher.equals(OPEN_MPI.prefix())) {
            return "mpirun, and pass it on with `mpirun -x " + variable + " ...` (ranks on other nodes get only"
                    + " the variables -x names)";
        }
        if (launcher.equals(PMI.prefix())) {
            return "mpiexec or srun (each passes its environment on to every rank)";
        }
        if (launcher.equals(SLURM.prefix())) {
            return "srun, or in the batch script (srun passes its environment on to every task)";
        }
        return "torchrun (its workers inherit it), or set the same value in every rank's environment";
    }

    /**
     * The launcher's variables, each checked against the others as it is read (the world size first, then what must
     * fit within it), so that a bad one is named with its value and range rather than found later as an inconsistent
     * record.
     */
    private static LauncherEnvironment of(Map<String, String> env, Names n) {
        int world = integer(env, n.size(), 1, MAX_INTEGER, "");
        String inWorld = " (" + n.size() + " is " + world + ")";
        int rank = integer(env, n.rank(), 0, world - 1, inWorld);
        if (n == SLURM) {
            String nodeList = env.containsKey("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
            Optional<String> rank0Host = Optional.ofNullable(env.get(nodeList)).map(l -> firstHost(nodeList, l));
            boolean perNode = env.containsKey(TASKS_PER_NODE);
            int localWorld = perNode ? slurmTasksOnNode(env, world) : world;
            String onNode = perNode ? " (" + TASKS_PER_NODE + " gives this node " + localWorld + ")" : inWorld;
            return new LauncherEnvironment(n.prefix(), rank, world, localRank(env, n, rank, localWorld, onNode),
                    localWorld, Optional.ofNullable(env.get("SLURM_JOB_ID")), rank0Host);
        }
        boolean perNode = env.containsKey(n.localSize());
        int localWorld = perNode ? integer(env, n.localSize(), 1, world, inWorld) : world;
        String onNode = perNode ? " (" + n.localSize() + " is " + localWorld + ")" : inWorld;
        return new LauncherEnvironment(n.prefix(), rank, world, localRank(env, n, rank, localWorld, onNode),
                localWorld, Optional.empty(), Optional.empty());
    }

    /**
     * The rank on this node: the launcher's variable in [0, localWorld), else the rank, which must be there too;
     * {@code onNode} says where localWorld comes from.
     */
    private static int localRank(Map<String, String> env, Names n, int rank, int localWorld, String onNode) {
        if (env.containsKey(n.localRank())) {
            return integer(env, n.localRank(), 0, localWorld - 1, onNode);
        }
        if (rank >= localWorld) {
            throw new EnvironmentException(n.localRank(), "environment variable " + n.localRank() + " is not set,"
                    + " and " + n.rank() + " " + rank + ", taken in its place, is not in [0, " + (localWorld - 1)
                    + "]" + onNode + ": set " + n.localRank() + " to this process's rank on its node");
        }
        return rank;
    }

    /** This node's task count from {@code SLURM_TASKS_PER_NODE} and {@code SLURM_NODEID}, in [1, world]. */
    private static int slurmTasksOnNode(Map<String, String> env, int world) {
        int node = env.containsKey(NODE_ID) ? integer(env, NODE_ID, 0, MAX_INTEGER, "") : 0;
        int tasks = tasksOnNode(env.get(TASKS_PER_NODE), node);
        if (tasks < 1 || tasks > world) {
            throw new EnvironmentException(TASKS_PER_NODE, "environment variable " + TASKS_PER_NODE + " ('"
                    + env.get(TASKS_PER_NODE) + "') gives node " + node + " " + tasks + " task(s); must be in [1, "
                    + world + "] (SLURM_NTASKS is " + world + ")");
        }
        return tasks;
    }

    /**
     * The integer in variable {@code name}, in [min, max] ({@code why} says where the bounds come from); missing,
     * not an integer or outside them, it is refused naming the variable, its value and the range.
     */
    static int integer(Map<String, String> env, String name, int min, int max, String why) {
        String v = env.get(name);
        if (v == null) {
            throw new EnvironmentException(name, "environment variable " + name + " is not set");
        }
        String t = v.trim();
        if (!t.matches("[0-9]{1,9}") || Integer.parseInt(t) < min || Integer.parseInt(t) > max) {
            String range = max == MAX_INTEGER ? "an integer >= " + min : "an integer in [" + min + ", " + max + "]";
            throw new EnvironmentException(name, "environment variable " + name + " must be " + range + why
                    + "; got '" + v + "'");
        }
        return Integer.parseInt(t);
    }

    /**
     * The first host of the SLURM host list in variable {@code variable}: {@code node[03-05,9],gpu1} gives
     * {@code node03}, {@code rack[2-3]-n[1-4]} gives {@code rack2-n1}.
     */
    static String firstHost(String variable, String list) {
        StringBuilder host = new StringBuilder();
        int i = 0;
        while (i < list.length() && list.charAt(i) != ',') {
            char c = list.charAt(i);
            if (c == '[') {
                int close = list.indexOf(']', i);
                if (close < 0) {
                    throw malformedHostList(variable, list, "no ']'");
                }
                String first = list.substring(i + 1, close).split("[,-]", 2)[0];
                if (!first.matches("[0-9]+")) {
                    throw malformedHostList(variable, list, "range '" + first + "'");
                }
                host.append(first);
                i = close + 1;
            } else {
                host.append(c);
                i++;
            }
        }
        if (host.isEmpty()) {
            throw malformedHostList(variable, list, "no first host");
        }
        return host.toString();
    }

    private static EnvironmentException malformedHostList(String variable, String list, String what) {
        return new EnvironmentException(variable, "environment variable " + variable + " must be a SLURM host list"
                + " such as node[03-05,9],gpu1; got '" + list + "' (" + what + ")");
    }

    /**
     * Node {@code node}'s task count in SLURM's {@code SLURM_TASKS_PER_NODE}: comma-separated counts, each
     * {@code n} or {@code n(xk)} for k nodes in a row ({@code 2(x3),1}: nodes 0-2 run 2 tasks, node 3 one).
     */
    static int tasksOnNode(String spec, int node) {
        long first = 0;  // a long: thousands of entries of up to 999999 nodes each must not wrap around
        for (String part : spec.split(",")) {
            String p = part.trim();
            if (!p.matches("[0-9]{1,6}(\\(x[0-9]{1,6}\\))?")) {
                throw new EnvironmentException(TASKS_PER_NODE, "environment variable " + TASKS_PER_NODE + " must be"
                        + " comma-separated task counts, each n or n(xk) for k nodes, such as 2(x3),1; got '" + spec
                        + "' (entry '" + part + "')");
            }
            int paren = p.indexOf('(');
            int tasks = Integer.parseInt(paren < 0 ? p : p.substring(0, paren));
            int nodes = paren < 0 ? 1 : Integer.parseInt(p.substring(paren + 2, p.length() - 1));
            if (node < first + nodes) {
                return tasks;
            }
            first += nodes;
        }
        throw new EnvironmentException(NODE_ID, "environment variable " + NODE_ID + " is " + node + "; must be in [0, "
                + (first - 1) + "], the nodes of " + TASKS_PER_NODE + " ('" + spec + "')");
    }
}
