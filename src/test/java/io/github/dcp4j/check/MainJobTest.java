package io.github.dcp4j.check;

import io.github.dcp4j.Engines;
import io.github.dcp4j.reference.Fp64Oracle;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The main job in this process on the CPU engine: a checked, timed row per batch in the batches' order, each handed
 * over as soon as it is done; what it refuses before it runs. As a rank of a group it needs CUDA IPC. No GPU.
 */
@Timeout(120)
class MainJobTest {
    /** A budget far below the warm-up, so that a batch costs about the warm-up alone. */
    private static final double SECONDS = 0.01;

    @Test
    void aRunGivesEachBatchItsRowAsItIsDoneCheckedAgainstTheOracle() {
        StringWriter progress = new StringWriter();
        List<MainJob.Row> handed = new ArrayList<>();
        MainJob.Result result = new MainJob(new int[] {2, 1}, SECONDS, new PrintWriter(progress))
                .run(Engines.Choice.CPU, handed::add);
        assertTrue(result.passed());
        assertEquals(handed, result.rows());
        assertEquals(List.of(2, 1), result.rows().stream().map(MainJob.Row::batch).toList());
        for (MainJob.Row row : result.rows()) {
            assertEquals("cpu", row.engine());
            assertTrue(row.maxRelativeError() > 0 && row.maxRelativeError() <= Fp64Oracle.TOLERANCE, row.toString());
            assertTrue(row.calls() >= 5 && row.calls() <= 2000, row.toString());
            assertTrue(row.medianMicros() > 0, row.toString());
        }
        String lines = progress.toString();
        assertTrue(lines.startsWith("batch 2: generating inputs" + System.lineSeparator() + "batch 2: timing on "),
                lines);
        assertTrue(lines.contains("batch 1: checking 8 ranks against the fp64 oracle"), lines);
    }

    @Test
    void theSameBatchGivesTheSameErrorRunAfterRun() {
        PrintWriter quiet = new PrintWriter(new StringWriter());
        double first = new MainJob(new int[] {1}, SECONDS, quiet).run(Engines.Choice.CPU, row -> { })
                .rows().getFirst().maxRelativeError();
        double second = new MainJob(new int[] {3, 1}, SECONDS, quiet).run(Engines.Choice.CPU, row -> { })
                .rows().getLast().maxRelativeError();
        assertEquals(first, second, "a batch's inputs come from its own seed");
    }

    @Test
    void anEngineThatCannotOpenHereFailsBeforeAnyRow() {
        List<MainJob.Row> handed = new ArrayList<>();
        MainJob job = new MainJob(new int[] {1}, SECONDS, new PrintWriter(new StringWriter()));
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> job.run(Engines.Choice.TORNADO, handed::add));
        assertTrue(e.getMessage().startsWith("the tornado engine cannot run here: "), e.getMessage());
        assertEquals(List.of(), handed);
    }

    @Test
    void aBatchBelowOneOrABudgetThatIsNotAFinitePositiveNumberIsRefused() {
        PrintWriter quiet = new PrintWriter(new StringWriter());
        IllegalArgumentException batch = assertThrows(IllegalArgumentException.class,
                () -> new MainJob(new int[] {1, 0}, SECONDS, quiet));
        assertEquals("the main job's batches must all be >= 1; got 0", batch.getMessage());
        for (double seconds : new double[] {0, -1, Double.NaN, Double.POSITIVE_INFINITY}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> new MainJob(new int[] {1}, seconds, quiet));
            assertEquals("the main job's seconds per batch must be a finite number > 0; got " + seconds,
                    e.getMessage());
        }
    }

    /** The verdict of a row, in this process and as a rank alike: a NaN error (an output NaN) fails. */
    @Test
    void aRowPassesWithinTheOracleToleranceOnlyAndNeverWithANanError() {
        assertTrue(new MainJob.Row("cpu", "ll128", 1, Fp64Oracle.TOLERANCE, 1, 1).passed());
        assertTrue(!new MainJob.Row("cpu", "ll128", 1, Math.nextUp(Fp64Oracle.TOLERANCE), 1, 1).passed());
        assertTrue(!new MainJob.Row("cuda-ipc", "ll128", 1, Double.NaN, 1, 1).passed());
    }

    @Test
    void aRowIsOneCsvLineUnderTheHeader() {
        assertEquals("engine,variant,batch,max_rel_err,us_per_call,calls", MainJob.Row.CSV_HEADER);
        assertEquals("cpu,ll128,8,1.662200e-03,6415.730,134",
                new MainJob.Row("cpu", "ll128", 8, 1.6622e-3, 6415.73, 134).csvLine());
    }
}
