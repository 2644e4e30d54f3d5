package io.github.dcp4j.cli;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Where the soak puts the 32-bit counter's wrap. No GPU. */
class SoakCommandTest {
    @Test
    void theWrapFallsInTheMiddleReplayOnACallWhoseOutputIsChecked() {
        for (long calls : new long[] {SoakCommand.GRAPH_CALLS, 3L * SoakCommand.GRAPH_CALLS, 1_000_000,
            SoakCommand.MAX_CALLS}) {
            SoakCommand soak = new SoakCommand();
            soak.calls = calls;
            long wrapCall = Integer.toUnsignedLong(-soak.startEpoch());  // the call whose counter is 0
            assertTrue(wrapCall < calls, calls + " calls: the wrap comes within the run");
            assertEquals(calls / SoakCommand.GRAPH_CALLS / 2, wrapCall / SoakCommand.GRAPH_CALLS,
                    calls + " calls: the middle replay");
            assertTrue(wrapCall % SoakCommand.GRAPH_CALLS >= SoakCommand.GRAPH_CALLS - SoakCommand.INPUTS,
                    calls + " calls: the last launch on its input in that replay, so its output is read");
        }
    }
}
