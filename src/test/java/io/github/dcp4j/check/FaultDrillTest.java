package io.github.dcp4j.check;

import io.github.dcp4j.engine.cuda.RankSetup;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * What a drill refuses before it touches its process or a GPU: a drill that needs a group without one, a victim
 * outside the group; nothing printed, nothing logged. The drills themselves need a GPU. No GPU.
 */
class FaultDrillTest {
    private static FaultDrill drill(FaultDrill.Kind kind, int victim, StringWriter out) {
        return new FaultDrill(kind, victim, Duration.ofSeconds(5), 5, new PrintWriter(out));
    }

    @Test
    void theKillAndSkipDrillsRunOnlyAsARankOfAGroup() {
        Assumptions.assumeFalse(RankSetup.inEnvironment(), "this JVM is a rank of a group");
        for (FaultDrill.Kind kind : List.of(FaultDrill.Kind.kill, FaultDrill.Kind.skip)) {
            StringWriter out = new StringWriter();
            List<String> log = new ArrayList<>();
            IllegalStateException e = assertThrows(IllegalStateException.class,
                    () -> drill(kind, 0, out).run(log::add));
            assertEquals("the " + kind + " drill runs as a rank of a group", e.getMessage());
            assertEquals("", out.toString());
            assertEquals(List.of(), log);
        }
    }

    @Test
    void aVictimOutsideTheLoopbackGroupIsRefused() {
        Assumptions.assumeFalse(RankSetup.inEnvironment(), "this JVM is a rank of a group");
        for (int victim : new int[] {-1, FaultDrill.LOOPBACK_RANKS}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> drill(FaultDrill.Kind.starve, victim, new StringWriter()).run(line -> { }));
            assertEquals("the drill's victim must be a rank of the group, in [0, " + (FaultDrill.LOOPBACK_RANKS - 1)
                    + "]; got " + victim, e.getMessage());
        }
    }
}
