package io.github.dcp4j.rendezvous;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Rank, world and node from each launcher's variables, their precedence, and the messages for bad ones. No GPU. */
class LauncherEnvironmentTest {

    private static Map<String, String> env(String... kv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return m;
    }

    @Test
    void torchrunsVariablesGiveRankWorldAndNode() {
        LauncherEnvironment l = LauncherEnvironment.of(env("RANK", "5", "WORLD_SIZE", "8", "LOCAL_RANK", "1",
                "LOCAL_WORLD_SIZE", "4"));
        assertEquals(new LauncherEnvironment("RANK", 5, 8, 1, 4, Optional.empty(), Optional.empty()), l);
    }

    @Test
    void withoutNodeVariablesTheWholeWorldIsOneNode() {
        LauncherEnvironment l = LauncherEnvironment.of(env("RANK", "3", "WORLD_SIZE", "4"));
        assertEquals(3, l.localRank());
        assertEquals(4, l.localWorldSize());
    }

    @Test
    void openMpiAndPmiVariablesAreRead() {
        LauncherEnvironment ompi = LauncherEnvironment.of(env("OMPI_COMM_WORLD_RANK", "6", "OMPI_COMM_WORLD_SIZE", "16",
                "OMPI_COMM_WORLD_LOCAL_RANK", "6", "OMPI_COMM_WORLD_LOCAL_SIZE", "8"));
        assertEquals(new LauncherEnvironment("OMPI_COMM_WORLD", 6, 16, 6, 8, Optional.empty(), Optional.empty()), ompi);
        LauncherEnvironment pmi = LauncherEnvironment.of(env("PMI_RANK", "2", "PMI_SIZE", "4", "MPI_LOCALRANKID", "0",
                "MPI_LOCALNRANKS", "2"));
        assertEquals(new LauncherEnvironment("PMI", 2, 4, 0, 2, Optional.empty(), Optional.empty()), pmi);
    }

    @Test
    void slurmGivesTheNodesTaskCountTheJobAndRankZerosHost() {
        // the last of 7 tasks, alone on the fourth node of four
        LauncherEnvironment l = LauncherEnvironment.of(env("SLURM_PROCID", "6", "SLURM_NTASKS", "7", "SLURM_STEP_ID",
                "0", "SLURM_LOCALID", "0", "SLURM_NODEID", "3", "SLURM_TASKS_PER_NODE", "2(x3),1", "SLURM_JOB_ID",
                "48213", "SLURM_JOB_NODELIST", "gpu[07-09,12]"));
        assertEquals(new LauncherEnvironment("SLURM", 6, 7, 0, 1, Optional.of("48213"), Optional.of("gpu07")), l);
    }

    @Test
    void theStepsNodeListComesBeforeTheJobs() {
        LauncherEnvironment l = LauncherEnvironment.of(env("SLURM_PROCID", "0", "SLURM_NTASKS", "2", "SLURM_STEP_ID",
                "1", "SLURM_STEP_NODELIST", "n[4-5]", "SLURM_JOB_NODELIST", "n[1-5]"));
        assertEquals(Optional.of("n4"), l.rank0Host());
    }

    @Test
    void mpiComesBeforeSlurmAndTorchrunBeforeBoth() {
        // mpirun inside a SLURM allocation: every rank inherits the batch script's SLURM_PROCID 0
        Map<String, String> mpirun = env("SLURM_PROCID", "0", "SLURM_NTASKS", "1", "SLURM_STEP_ID", "0",
                "OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE", "4");
        assertEquals("OMPI_COMM_WORLD", LauncherEnvironment.of(mpirun).launcher());
        assertEquals(3, LauncherEnvironment.of(mpirun).rank());
        Map<String, String> torchrun = new HashMap<>(mpirun);
        torchrun.putAll(env("RANK", "1", "WORLD_SIZE", "2"));
        assertEquals(1, LauncherEnvironment.of(torchrun).rank());
        Map<String, String> pmiAndSlurm = env("PMI_RANK", "1", "PMI_SIZE", "2", "SLURM_PROCID", "0", "SLURM_NTASKS",
                "2", "SLURM_STEP_ID", "0");
        assertEquals("PMI", LauncherEnvironment.of(pmiAndSlurm).launcher());
    }

    @Test
    void aSlurmBatchScriptIsNoRank() {
        // sbatch runs the script with SLURM_PROCID 0 of the job's tasks, outside any srun step
        Map<String, String> batch = env("SLURM_PROCID", "0", "SLURM_NTASKS", "8", "SLURM_JOB_ID", "7");
        assertFalse(LauncherEnvironment.present(batch));
        EnvironmentException e = assertThrows(EnvironmentException.class, () -> LauncherEnvironment.of(batch));
        assertTrue(e.getMessage().contains("SLURM_STEP_ID"), e.getMessage());
    }

    @Test
    void missingAndMalformedVariablesAreNamed() {
        EnvironmentException size = assertThrows(EnvironmentException.class,
                () -> LauncherEnvironment.of(env("OMPI_COMM_WORLD_RANK", "0")));
        assertTrue(size.getMessage().contains("OMPI_COMM_WORLD_SIZE is not set"), size.getMessage());
        EnvironmentException rank = assertThrows(EnvironmentException.class,
                () -> LauncherEnvironment.of(env("PMI_SIZE", "4")));
        assertTrue(rank.getMessage().contains("PMI_RANK is not set"), rank.getMessage());
        EnvironmentException word = assertThrows(EnvironmentException.class,
                () -> LauncherEnvironment.of(env("SLURM_PROCID", "one", "SLURM_NTASKS", "2", "SLURM_STEP_ID", "0")));
        assertTrue(word.getMessage().contains("SLURM_PROCID") && word.getMessage().contains("'one'"),
                word.getMessage());
        EnvironmentException none = assertThrows(EnvironmentException.class,
                () -> LauncherEnvironment.of(env("HOME", "/root")));
        assertTrue(none.getMessage().contains("RANK") && none.getMessage().contains("SLURM_PROCID"),
                none.getMessage());
        assertFalse(LauncherEnvironment.present(env("HOME", "/root")));
        assertTrue(LauncherEnvironment.present(env("PMI_RANK", "0")));
    }

    /** Values that do not fit the others name the variable at fault and the one its range comes from. */
    @Test
    void inconsistentValuesAreRefusedNamingTheVariableAtFault() {
        EnvironmentException outside = assertThrows(EnvironmentException.class,
                () -> LauncherEnvironment.of(env("RANK", "4", "WORLD_SIZE", "4")));
        assertEquals("environment variable RANK must be an integer in [0, 3] (WORLD_SIZE is 4); got '4'",
                outside.getMessage());
        EnvironmentException node = assertThrows(EnvironmentException.class,
                () -> LauncherEnvironment.of(env("OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2",
                        "OMPI_COMM_WORLD_LOCAL_SIZE", "3")));
        assertEquals("OMPI_COMM_WORLD_LOCAL_SIZE", node.variable());
        assertTrue(node.getMessage().contains("[1, 2] (OMPI_COMM_WORLD_SIZE is 2); got '3'"), node.getMessage());
        EnvironmentException tasks = assertThrows(EnvironmentException.class,
                () -> LauncherEnvironment.of(env("SLURM_PROCID", "0", "SLURM_NTASKS", "2", "SLURM_STEP_ID", "0",
                        "SLURM_NODEID", "2", "SLURM_TASKS_PER_NODE", "1(x2)")));
        assertTrue(tasks.getMessage().contains("SLURM_NODEID is 2"), tasks.getMessage());
    }

    /**
     * Every variable that the launcher's environment and the rendezvous read, each with a bad value: an
     * {@link EnvironmentException} that names the variable (also as {@link EnvironmentException#variable()}), its value
     * and what it may be, thrown before anything is opened. {@code environment} is {@code NAME=value} pairs separated
     * by ';', given with a valid secret.
     */
    @ParameterizedTest(name = "{1}: {0}")
    @CsvSource(delimiter = '|', quoteCharacter = '"', textBlock = """
        RANK=x;WORLD_SIZE=2 | RANK | environment variable RANK must be an integer in [0, 1] (WORLD_SIZE is 2); got 'x'
        RANK=0;WORLD_SIZE=0 | WORLD_SIZE | environment variable WORLD_SIZE must be an integer >= 1; got '0'
        RANK=2;WORLD_SIZE=2 | RANK | environment variable RANK must be an integer in [0, 1] (WORLD_SIZE is 2); got '2'
        RANK=0;WORLD_SIZE=4;LOCAL_RANK=3;LOCAL_WORLD_SIZE=2 | LOCAL_RANK | environment variable LOCAL_RANK must be an \
        integer in [0, 1] (LOCAL_WORLD_SIZE is 2); got '3'
        RANK=0;WORLD_SIZE=2;LOCAL_WORLD_SIZE=5 | LOCAL_WORLD_SIZE | environment variable LOCAL_WORLD_SIZE must be an \
        integer in [1, 2] (WORLD_SIZE is 2); got '5'
        RANK=3;WORLD_SIZE=4;LOCAL_WORLD_SIZE=2 | LOCAL_RANK | environment variable LOCAL_RANK is not set, and RANK 3, \
        taken in its place, is not in [0, 1] (LOCAL_WORLD_SIZE is 2): set LOCAL_RANK to this process's rank on its node
        OMPI_COMM_WORLD_RANK=-1;OMPI_COMM_WORLD_SIZE=2 | OMPI_COMM_WORLD_RANK | environment variable \
        OMPI_COMM_WORLD_RANK must be an integer in [0, 1] (OMPI_COMM_WORLD_SIZE is 2); got '-1'
        PMI_RANK=0;PMI_SIZE=99999999999 | PMI_SIZE | environment variable PMI_SIZE must be an integer >= 1; got \
        '99999999999'
        PMI_RANK=0;PMI_SIZE=4;MPI_LOCALNRANKS=0 | MPI_LOCALNRANKS | environment variable MPI_LOCALNRANKS must be an \
        integer in [1, 4] (PMI_SIZE is 4); got '0'
        SLURM_PROCID=0;SLURM_NTASKS=2;SLURM_STEP_ID=0;SLURM_JOB_NODELIST=node[03-05 | SLURM_JOB_NODELIST | \
        environment variable SLURM_JOB_NODELIST must be a SLURM host list such as node[03-05,9],gpu1; got \
        'node[03-05' (no ']')
        SLURM_PROCID=0;SLURM_NTASKS=2;SLURM_STEP_ID=0;SLURM_TASKS_PER_NODE=2(3) | SLURM_TASKS_PER_NODE | environment \
        variable SLURM_TASKS_PER_NODE must be comma-separated task counts, each n or n(xk) for k nodes, such as \
        2(x3),1; got '2(3)' (entry '2(3)')
        SLURM_PROCID=0;SLURM_NTASKS=2;SLURM_STEP_ID=0;SLURM_TASKS_PER_NODE=0 | SLURM_TASKS_PER_NODE | environment \
        variable SLURM_TASKS_PER_NODE ('0') gives node 0 0 task(s); must be in [1, 2] (SLURM_NTASKS is 2)
        SLURM_PROCID=0;SLURM_NTASKS=2;SLURM_STEP_ID=0;SLURM_NODEID=x;SLURM_TASKS_PER_NODE=2 | SLURM_NODEID | \
        environment variable SLURM_NODEID must be an integer >= 0; got 'x'
        SLURM_PROCID=0;SLURM_NTASKS=2;SLURM_STEP_ID=0;SLURM_NODEID=2;SLURM_TASKS_PER_NODE=1(x2) | SLURM_NODEID | \
        environment variable SLURM_NODEID is 2; must be in [0, 1], the nodes of SLURM_TASKS_PER_NODE ('1(x2)')
        SLURM_PROCID=1;SLURM_NTASKS=2;SLURM_STEP_ID=0;SLURM_LOCALID=2;SLURM_TASKS_PER_NODE=2 | SLURM_LOCALID | \
        environment variable SLURM_LOCALID must be an integer in [0, 1] (SLURM_TASKS_PER_NODE gives this node 2); \
        got '2'
        RANK=0;WORLD_SIZE=1;MASTER_ADDR=127.0.0.1;MASTER_PORT=abc | MASTER_PORT | environment variable MASTER_PORT \
        must be a TCP port in [1, 65535]; got 'abc'
        RANK=0;WORLD_SIZE=1;MASTER_ADDR=127.0.0.1;MASTER_PORT=0 | MASTER_PORT | environment variable MASTER_PORT must \
        be a TCP port in [1, 65535]; got '0'
        RANK=0;WORLD_SIZE=1;MASTER_ADDR=127.0.0.1;MASTER_PORT=29500;DCP4J_MASTER_PORT=99999 | DCP4J_MASTER_PORT | \
        environment variable DCP4J_MASTER_PORT must be a TCP port in [1, 65535]; got '99999'
        RANK=0;WORLD_SIZE=1;MASTER_ADDR=;MASTER_PORT=29500 | MASTER_ADDR | environment variable MASTER_ADDR must be a \
        host name or an IP address (1 to 253 of letters, digits, '.', '-', '_', ':', '%', '[', ']'); got ''
        RANK=0;WORLD_SIZE=1;MASTER_ADDR=bad host!;MASTER_PORT=29500 | MASTER_ADDR | environment variable MASTER_ADDR \
        must be a host name or an IP address (1 to 253 of letters, digits, '.', '-', '_', ':', '%', '[', ']'); got \
        'bad host!'
        RANK=0;WORLD_SIZE=1;DCP4J_RENDEZVOUS_DIR=/nonexistent/dcp4j | DCP4J_RENDEZVOUS_DIR | environment variable \
        DCP4J_RENDEZVOUS_DIR must name an existing directory that every rank can write (on a file system every node \
        shares); got '/nonexistent/dcp4j', which does not exist
        RANK=0;WORLD_SIZE=1;DCP4J_RENDEZVOUS_DIR=/dev/null | DCP4J_RENDEZVOUS_DIR | environment variable \
        DCP4J_RENDEZVOUS_DIR must name an existing directory that every rank can write (on a file system every node \
        shares); got '/dev/null', not a directory
        RANK=0;WORLD_SIZE=1;MASTER_ADDR=127.0.0.1;MASTER_PORT=29500;DCP4J_JOB_ID= | DCP4J_JOB_ID | environment \
        variable DCP4J_JOB_ID must be a job id of 1 to 256 characters; got an empty one
        RANK=0;WORLD_SIZE=1;MASTER_ADDR=127.0.0.1;MASTER_PORT=29500;TORCHELASTIC_USE_AGENT_STORE=maybe | \
        TORCHELASTIC_USE_AGENT_STORE | environment variable TORCHELASTIC_USE_AGENT_STORE must be True or False \
        (torchrun sets it); got 'maybe'
        RANK=0;WORLD_SIZE=1;MASTER_ADDR=127.0.0.1;MASTER_PORT=29500;TORCHELASTIC_USE_AGENT_STORE=True;\
        TORCHELASTIC_RESTART_COUNT=x | TORCHELASTIC_RESTART_COUNT | environment variable TORCHELASTIC_RESTART_COUNT \
        must be an integer >= 0 (torchrun sets it); got 'x'
        """)
    void aBadVariableIsNamedWithItsValueAndWhatItMayBe(String environment, String variable, String message) {
        Map<String, String> env = new HashMap<>(Map.of(Rendezvous.DCP4J_JOB_SECRET, JobSecret.generate()));
        for (String pair : environment.split(";")) {
            String[] kv = pair.split("=", 2);
            env.put(kv[0], kv[1]);
        }
        EnvironmentException e = assertThrows(EnvironmentException.class,
                () -> Rendezvous.fromEnvironment(env, Duration.ofSeconds(1)).close());
        assertEquals(variable, e.variable());
        assertEquals(message, e.getMessage());
    }

    @Test
    void aJobIdLongerThanAMessageShouldCarryIsRefusedNamingItsVariable() {
        String id = "r".repeat(257);
        EnvironmentException e = assertThrows(EnvironmentException.class, () -> Rendezvous.fromEnvironment(
                env("RANK", "0", "WORLD_SIZE", "1", "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "29500",
                        Rendezvous.TORCHELASTIC_RUN_ID, id, Rendezvous.DCP4J_JOB_SECRET, JobSecret.generate()),
                Duration.ofSeconds(1)).close());
        assertEquals(Rendezvous.TORCHELASTIC_RUN_ID, e.variable());
        assertEquals("environment variable TORCHELASTIC_RUN_ID must be a job id of 1 to 256 characters; got one of 257"
                + " characters, '" + "r".repeat(32) + "...'", e.getMessage());
    }

    @Test
    void slurmHostListsGiveTheirFirstHost() {
        assertEquals("node03", LauncherEnvironment.firstHost("SLURM_JOB_NODELIST", "node[03-05,9],gpu1"));
        assertEquals("rack2-n1", LauncherEnvironment.firstHost("SLURM_JOB_NODELIST", "rack[2-3]-n[1-4]"));
        assertEquals("solo", LauncherEnvironment.firstHost("SLURM_JOB_NODELIST", "solo"));
        assertEquals("a", LauncherEnvironment.firstHost("SLURM_JOB_NODELIST", "a,b[1-2]"));
        for (String bad : new String[] {"node[03-05", "node[x-y]", ",a"}) {
            EnvironmentException e = assertThrows(EnvironmentException.class,
                    () -> LauncherEnvironment.firstHost("SLURM_STEP_NODELIST", bad));
            assertEquals("SLURM_STEP_NODELIST", e.variable());
            assertTrue(e.getMessage().startsWith("environment variable SLURM_STEP_NODELIST must be a SLURM host list"
                    + " such as node[03-05,9],gpu1; got '" + bad + "'"), e.getMessage());
        }
    }

    @Test
    void slurmTasksPerNodeIsReadNodeByNode() {
        assertEquals(2, LauncherEnvironment.tasksOnNode("2(x3),1", 0));
        assertEquals(2, LauncherEnvironment.tasksOnNode("2(x3),1", 2));
        assertEquals(1, LauncherEnvironment.tasksOnNode("2(x3),1", 3));
        assertEquals(8, LauncherEnvironment.tasksOnNode("8", 0));
        assertEquals("SLURM_TASKS_PER_NODE", assertThrows(EnvironmentException.class,
                () -> LauncherEnvironment.tasksOnNode("2(3)", 0)).variable());
    }

    @Test
    void aSlurmRankFindsItsStoreWithNoExtraSetupAndOthersNameWhatIsMissing() {
        // a single-task srun step: rank 0 serves the store on the step's first host, at the job's port
        int port = Rendezvous.slurmPort("99123");
        assertEquals(29123, port);
        try (Rendezvous rv = Rendezvous.fromEnvironment(env("SLURM_PROCID", "0", "SLURM_NTASKS", "1",
                "SLURM_STEP_ID", "0", "SLURM_JOB_ID", "99123", "SLURM_STEP_NODELIST", "localhost",
                Rendezvous.DCP4J_JOB_SECRET, JobSecret.generate()),
                Duration.ofSeconds(1))) {
            assertEquals(port, ((TcpRendezvous) rv).storePort());
        }
        IllegalArgumentException mpi = assertThrows(IllegalArgumentException.class,
                () -> Rendezvous.fromEnvironment(env("OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2",
                        Rendezvous.DCP4J_JOB_SECRET, JobSecret.generate()), Duration.ofSeconds(1)));
        assertTrue(mpi.getMessage().contains("MASTER_ADDR") && mpi.getMessage().contains("OMPI_COMM_WORLD"),
                mpi.getMessage());
    }
}
