package io.github.dcp4j.rendezvous;

import org.junit.jupiter.api.Test;

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
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> LauncherEnvironment.of(batch));
        assertTrue(e.getMessage().contains("SLURM_STEP_ID"), e.getMessage());
    }

    @Test
    void missingAndMalformedVariablesAreNamed() {
        IllegalArgumentException size = assertThrows(IllegalArgumentException.class,
                () -> LauncherEnvironment.of(env("OMPI_COMM_WORLD_RANK", "0")));
        assertTrue(size.getMessage().contains("OMPI_COMM_WORLD_SIZE is not set"), size.getMessage());
        IllegalArgumentException rank = assertThrows(IllegalArgumentException.class,
                () -> LauncherEnvironment.of(env("PMI_SIZE", "4")));
        assertTrue(rank.getMessage().contains("PMI_RANK is not set"), rank.getMessage());
        IllegalArgumentException word = assertThrows(IllegalArgumentException.class,
                () -> LauncherEnvironment.of(env("SLURM_PROCID", "one", "SLURM_NTASKS", "2", "SLURM_STEP_ID", "0")));
        assertTrue(word.getMessage().contains("SLURM_PROCID") && word.getMessage().contains("'one'"),
                word.getMessage());
        IllegalArgumentException none = assertThrows(IllegalArgumentException.class,
                () -> LauncherEnvironment.of(env("HOME", "/root")));
        assertTrue(none.getMessage().contains("RANK") && none.getMessage().contains("SLURM_PROCID"),
                none.getMessage());
        assertFalse(LauncherEnvironment.present(env("HOME", "/root")));
        assertTrue(LauncherEnvironment.present(env("PMI_RANK", "0")));
    }

    @Test
    void inconsistentValuesAreRefusedNamingTheLauncher() {
        IllegalArgumentException outside = assertThrows(IllegalArgumentException.class,
                () -> LauncherEnvironment.of(env("RANK", "4", "WORLD_SIZE", "4")));
        assertTrue(outside.getMessage().contains("RANK") && outside.getMessage().contains("[0, 4)"),
                outside.getMessage());
        IllegalArgumentException node = assertThrows(IllegalArgumentException.class,
                () -> LauncherEnvironment.of(env("OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2",
                        "OMPI_COMM_WORLD_LOCAL_SIZE", "3")));
        assertTrue(node.getMessage().contains("OMPI_COMM_WORLD") && node.getMessage().contains("[1, 2]"),
                node.getMessage());
        IllegalArgumentException tasks = assertThrows(IllegalArgumentException.class,
                () -> LauncherEnvironment.of(env("SLURM_PROCID", "0", "SLURM_NTASKS", "2", "SLURM_STEP_ID", "0",
                        "SLURM_NODEID", "2", "SLURM_TASKS_PER_NODE", "1(x2)")));
        assertTrue(tasks.getMessage().contains("SLURM_NODEID is 2"), tasks.getMessage());
    }

    @Test
    void slurmHostListsGiveTheirFirstHost() {
        assertEquals("node03", LauncherEnvironment.firstHost("node[03-05,9],gpu1"));
        assertEquals("rack2-n1", LauncherEnvironment.firstHost("rack[2-3]-n[1-4]"));
        assertEquals("solo", LauncherEnvironment.firstHost("solo"));
        assertEquals("a", LauncherEnvironment.firstHost("a,b[1-2]"));
        assertThrows(IllegalArgumentException.class, () -> LauncherEnvironment.firstHost("node[03-05"));
        assertThrows(IllegalArgumentException.class, () -> LauncherEnvironment.firstHost("node[x-y]"));
        assertThrows(IllegalArgumentException.class, () -> LauncherEnvironment.firstHost(",a"));
    }

    @Test
    void slurmTasksPerNodeIsReadNodeByNode() {
        assertEquals(2, LauncherEnvironment.tasksOnNode("2(x3),1", 0));
        assertEquals(2, LauncherEnvironment.tasksOnNode("2(x3),1", 2));
        assertEquals(1, LauncherEnvironment.tasksOnNode("2(x3),1", 3));
        assertEquals(8, LauncherEnvironment.tasksOnNode("8", 0));
        assertThrows(IllegalArgumentException.class, () -> LauncherEnvironment.tasksOnNode("2(3)", 0));
    }

    @Test
    void aSlurmRankFindsItsStoreWithNoExtraSetupAndOthersNameWhatIsMissing() {
        // a single-task srun step: rank 0 serves the store on the step's first host, at the job's port
        int port = Integer.parseInt(Rendezvous.slurmPort("99123"));
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
