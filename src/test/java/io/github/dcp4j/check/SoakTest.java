package io.github.dcp4j.check;

import org.junit.jupiter.api.Test;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Duration;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Where the soak puts the 32-bit counter's wrap, which calls it takes and how it reports. No GPU. */
class SoakTest {
    @Test
    void theWrapFallsInTheMiddleReplayOnACallWhoseOutputIsChecked() {
        for (long calls : new long[] {Soak.GRAPH_CALLS, 3L * Soak.GRAPH_CALLS, 1_000_000, Soak.MAX_CALLS}) {
            long wrapCall = Integer.toUnsignedLong(-Soak.startEpoch(calls));  // the call whose counter is 0
            assertTrue(wrapCall < calls, calls + " calls: the wrap comes within the run");
            assertEquals(calls / Soak.GRAPH_CALLS / 2, wrapCall / Soak.GRAPH_CALLS,
                    calls + " calls: the middle replay");
            assertTrue(wrapCall % Soak.GRAPH_CALLS >= Soak.GRAPH_CALLS - Soak.INPUTS,
                    calls + " calls: the last launch on its input in that replay, so its output is read");
        }
    }

    @Test
    void callsThatAreNotWholeGraphsOrWrapTheCounterTwiceAreRefused() {
        PrintWriter progress = new PrintWriter(new StringWriter());
        for (long calls : new long[] {0, -Soak.GRAPH_CALLS, Soak.GRAPH_CALLS + 1, Soak.MAX_CALLS + Soak.GRAPH_CALLS}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> new Soak(calls, 1, Duration.ofSeconds(1), progress));
            assertTrue(e.getMessage().endsWith("got " + calls), e.getMessage());
        }
    }

    @Test
    void theResultPassesOnlyWithNoMismatchAndEveryCounterAdvancedByTheCalls() {
        long calls = 2 * Soak.GRAPH_CALLS;
        int end = (int) (Soak.startEpoch(calls) + calls);
        Soak.Result ok = new Soak.Result("loopback, 2 ranks", calls, List.of(end, end), 0);
        assertTrue(ok.passed());
        assertEquals("soak passed: loopback, 2 ranks: 2000 calls, every counter from "
                + Integer.toUnsignedLong(Soak.startEpoch(calls)) + " to " + end + ", 0 outputs differ from the CPU"
                + " engine", ok.summary());
        Soak.Result differs = new Soak.Result("rank 1 of 2", calls, List.of(end), 3);
        assertFalse(differs.passed());
        assertTrue(differs.summary().startsWith("soak FAILED: rank 1 of 2: ")
                && differs.summary().endsWith(", 3 outputs differ from the CPU engine"), differs.summary());
        Soak.Result miscounted = new Soak.Result("loopback, 2 ranks", calls, List.of(end, -1), 0);
        assertFalse(miscounted.passed());
        assertTrue(miscounted.summary().contains(" (FAILED: ended at [" + end + ", 4294967295])"),
                miscounted.summary());
    }
}
