package io.github.dcp4j.peer;

import io.github.dcp4j.rendezvous.DirectoryRendezvous;
import io.github.dcp4j.rendezvous.JobSecret;
import io.github.dcp4j.rendezvous.Rendezvous;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The checks before any launch: every rank reaches the same verdict, naming the rank and what it disagreed about. */
class GroupCheckTest {

    private static GroupCheck.Claim call(int rows, int headDim) {
        return GroupCheck.Claim.of("cp_size", 4, "rows", rows, "head_dim", headDim, "dtype", "BF16");
    }

    @Test
    void identicalClaimsPass() {
        assertDoesNotThrow(() -> GroupCheck.verify("the call", List.of(call(16, 512), call(16, 512),
                call(16, 512))));
    }

    @Test
    void theRankThatDiffersIsNamedWithItsValueAndTheOthers() {
        GroupCheck.MismatchException e = assertThrows(GroupCheck.MismatchException.class,
                () -> GroupCheck.verify("the call", List.of(call(16, 512), call(16, 512), call(64, 512),
                        call(16, 512))));
        assertEquals(List.of("rank 2 has rows 64 where 3 other rank(s) have 16"), e.disagreements());
        assertTrue(e.getMessage().startsWith("the call refused on every rank before any launch"), e.getMessage());
    }

    @Test
    void whenRankZeroIsTheOddOneTheMajorityDecides() {
        GroupCheck.MismatchException e = assertThrows(GroupCheck.MismatchException.class,
                () -> GroupCheck.verify("the call", List.of(call(16, 256), call(16, 512), call(16, 512))));
        assertEquals(List.of("rank 0 has head_dim 256 where 2 other rank(s) have 512"), e.disagreements());
    }

    @Test
    void aLocalProblemOfOneRankIsReportedByEveryRank() {
        GroupCheck.Claim wrong = GroupCheck.Claim.of().withProblem("passed cp_rank 3 / cp_size 4: cp_rank must be"
                + " the workspace's rank 1; got 3");
        GroupCheck.MismatchException e = assertThrows(GroupCheck.MismatchException.class,
                () -> GroupCheck.verify("the call", List.of(call(16, 512), wrong, call(16, 512), call(16, 512))));
        assertEquals(List.of("rank 1: passed cp_rank 3 / cp_size 4: cp_rank must be the workspace's rank 1; got 3"),
                e.disagreements(), "the rank with a problem is named for it alone, not for its missing fields");
    }

    /** Through a real rendezvous, ranks as threads: each rank throws the same message, naming rank 1. */
    @Test
    void everyRankRefusesTheCallOfOneMismatchedRank(@TempDir Path dir) throws Exception {
        int world = 3;
        JobSecret secret = JobSecret.of(JobSecret.generate());
        ExecutorService pool = Executors.newFixedThreadPool(world);
        try {
            List<Future<String>> verdicts = new ArrayList<>();
            for (int r = 0; r < world; r++) {
                int rank = r;
                verdicts.add(pool.submit(() -> {
                    try (Rendezvous rv = new DirectoryRendezvous(dir, "check", secret, rank, world,
                            Duration.ofSeconds(10))) {
                        GroupCheck.agree(rv, "call-check", "the call", call(rank == 1 ? 8 : 16, 512));
                        return null;
                    } catch (GroupCheck.MismatchException e) {
                        return e.getMessage();
                    }
                }));
            }
            String first = verdicts.getFirst().get();
            assertTrue(first.contains("rank 1 has rows 8 where 2 other rank(s) have 16"), first);
            for (Future<String> v : verdicts) {
                assertEquals(first, v.get());
            }
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void peerAddressesMustBeNonNullAndLineAligned() {
        assertDoesNotThrow(() -> PeerWorkspaces.requireValid(1, 2, 4096, 256, r -> 0x7f0000000000L + r * 8192L));
        IllegalArgumentException nul = assertThrows(IllegalArgumentException.class,
                () -> PeerWorkspaces.requireValid(0, 2, 4096, 0, r -> r == 1 ? 0 : 0x7f0000000000L));
        assertEquals("rank 1's workspace address is null", nul.getMessage());
        IllegalArgumentException odd = assertThrows(IllegalArgumentException.class,
                () -> PeerWorkspaces.requireValid(0, 2, 4096, 64, r -> 0x7f0000000000L));
        assertTrue(odd.getMessage().contains("base 0x7f0000000000 + offset 64) is not 128-byte aligned"),
                odd.getMessage());
        IllegalArgumentException rank = assertThrows(IllegalArgumentException.class,
                () -> PeerWorkspaces.requireValid(2, 2, 4096, 0, r -> 0x7f0000000000L));
        assertEquals("rank must be in [0, 2); got 2", rank.getMessage());
    }
}
