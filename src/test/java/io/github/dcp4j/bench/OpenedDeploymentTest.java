package io.github.dcp4j.bench;

import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.engine.cuda.RankSetup;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** What opening a deployment by name refuses before it holds a device or joins a rendezvous. No GPU. */
class OpenedDeploymentTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(1);

    @Test
    void aNameThatIsNoDeploymentIsRefusedQuotingIt() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> OpenedDeployment.open("nodes", 8, TIMEOUT, line -> { }));
        assertEquals("--ranks must be one of loopback, threads, processes; got 'nodes'", e.getMessage());
    }

    @Test
    void processesOutsideAGroupAreRefusedNamingTheLaunchThatStartsThem() {
        Assumptions.assumeFalse(RankSetup.inEnvironment(), "this JVM is a rank of a group");
        List<String> log = new ArrayList<>();
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> OpenedDeployment.open("processes", 4, TIMEOUT, log::add));
        assertEquals("--ranks processes runs one rank per process: start it with `dcp4j launch --nproc 4 -- bench"
                + " --ranks processes`", e.getMessage());
        assertEquals(List.of(), log);
    }

    @Test
    void loopbackAndThreadsWithoutAGpuAreRefusedWithTheReason() {
        Cuda.Availability gpu = Cuda.availability();
        Assumptions.assumeFalse(gpu.available(), "a GPU is here");
        for (String ranks : List.of("loopback", "threads")) {
            IllegalStateException e = assertThrows(IllegalStateException.class,
                    () -> OpenedDeployment.open(ranks, 8, TIMEOUT, line -> { }));
            assertEquals("bench needs a GPU: " + gpu.reason(), e.getMessage());
        }
    }

    @Test
    void theNamesAreTheDeployments() {
        assertTrue(OpenedDeployment.KINDS.containsAll(List.of("loopback", "threads", "processes")));
        assertEquals(3, OpenedDeployment.KINDS.size());
    }
}
