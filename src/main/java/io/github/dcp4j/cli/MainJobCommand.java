package io.github.dcp4j.cli;

import io.github.dcp4j.Engines;
import io.github.dcp4j.check.MainJob;
import io.github.dcp4j.engine.cuda.RankSetup;
import io.github.dcp4j.op.Variant;
import picocli.CommandLine;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

import java.io.PrintWriter;
import java.io.Writer;
import java.nio.file.Path;

import static io.github.dcp4j.reference.Fp64Oracle.TOLERANCE;

/**
 * The main job's options and output ({@link Main} without a subcommand): it checks the options, runs {@link MainJob}
 * and prints its table of engine, variant, batch, max relative error and µs per call (median).
 */
final class MainJobCommand {
    @Option(names = "--batches", split = ",", defaultValue = "1,8,64", paramLabel = "B[,B...]",
            description = "Batches (tokens per rank) to run, default ${DEFAULT-VALUE}.")
    int[] batches;

    @Option(names = "--seconds", defaultValue = "1.0", paramLabel = "S",
            description = "Timing budget per batch in seconds, default ${DEFAULT-VALUE}.")
    double seconds;

    @Option(names = "--engine", defaultValue = "auto", converter = EngineChoiceConverter.class,
            paramLabel = "auto|cpu|cuda|tornado", description = "Engine of the main job: auto (CUDA where a GPU and"
                    + " driver are present, else CPU; the reason is printed), cpu, cuda or tornado (the TornadoVM"
                    + " engine: the tornado jar on the class path, TornadoVM's argument file; else refused with the"
                    + " reason); default"
                    + " ${DEFAULT-VALUE}.")
    Engines.Choice engine;

    @Option(names = "--variant", defaultValue = "ll128", converter = VariantConverter.class,
            paramLabel = "ll128|ll|simple|unfused|auto", description = VariantConverter.DESCRIPTION)
    Variant variant;

    @Option(names = "--progress", description = "Print a progress line per step on stderr (the default where stderr"
            + " is a terminal).")
    boolean progress;

    @Option(names = "--csv", paramLabel = "FILE", description = "Also write the table as CSV to FILE (the main job"
            + " in this process; under `launch` rank 0 prints the table alone).")
    Path csv;

    @Option(names = "--json", paramLabel = "FILE", description = "Also write the table as JSON to FILE.")
    Path json;

    /**
     * Runs the main job with the options of {@code cli}'s command; a bad option value is a usage error.
     *
     * @param cli the command line that holds this mixin: its streams and the usage error's command
     * @return 0 when every rank of every batch matches the oracle, else 1
     */
    int run(CommandLine cli) {
        PrintWriter out = cli.getOut();
        PrintWriter err = cli.getErr();
        for (int b : batches) {
            if (b < 1) {
                throw new ParameterException(cli, "--batches must all be >= 1; got " + b);
            }
        }
        if (!(seconds > 0) || Double.isInfinite(seconds)) {
            throw new ParameterException(cli, "--seconds must be a finite number > 0; got " + seconds);
        }
        boolean terminal = System.console() != null && System.console().isTerminal();
        MainJob job = new MainJob(batches, seconds, progress || terminal ? err : new PrintWriter(Writer.nullWriter()));
        if (RankSetup.inEnvironment()) {
            return runAsRank(job, variant, out, err);
        }
        err.printf("dcp4j main job: DeepSeek-V2 decode shape, cp %d, %d local heads, head_dim %d, %s, lse %s,"
                + " strided input%n", MainJob.CP, MainJob.LOCAL_HEADS, MainJob.HEAD_DIM,
                MainJob.DTYPE.name().toLowerCase(), MainJob.MODE);
        Engines.Resolved resolved = Engines.resolve(engine);
        try {
            Engines.requireRuns(engine, variant);
        } catch (IllegalArgumentException e) {
            throw new ParameterException(cli, e.getMessage(), e);
        }
        err.printf("engine: %s (%s)%n", resolved.engine().spelling(), resolved.reason());
        out.printf("%-7s %-8s %6s %13s %14s %7s%n", "engine", "variant", "batch", "max rel err", "us/call (med)",
                "calls");
        MainJob.Result result = job.run(engine, variant, row -> {
            out.printf("%-7s %-8s %6d %13.3e %14.1f %7d%n", row.engine(), row.variant(), row.batch(),
                    row.maxRelativeError(), row.medianMicros(), row.calls());
            out.flush();
        });
        TableFiles.write(csv, json, MainJob.Row.CSV_HEADER, MainJob.Row::csvLine, result.rows());
        return verdict(result, true, err);
    }

    /**
     * The main job as one rank of a multi-process group (started by {@code launch}): rank 0 prints the table, every
     * row the maximum over ranks.
     */
    private static int runAsRank(MainJob job, Variant variant, PrintWriter out, PrintWriter err) {
        try (RankSetup setup = RankSetup.fromEnvironment(MainJob.TIMEOUT, Log.to(err))) {
            boolean reports = setup.rank() == 0;
            if (reports) {
                err.printf("dcp4j main job across %d processes: DeepSeek-V2 decode shape, %d local heads, head_dim %d,"
                        + " %s, lse %s, strided input%n", setup.worldSize(), MainJob.LOCAL_HEADS, MainJob.HEAD_DIM,
                        MainJob.DTYPE.name().toLowerCase(), MainJob.MODE);
                out.printf("%-9s %-8s %6s %13s %14s %7s%n", "engine", "variant", "batch", "max rel err",
                        "us/call (med)", "calls");
            }
            MainJob.Result result = job.runAsRank(setup, variant, row -> {
                if (reports) {
                    out.printf("%-9s %-8s %6d %13.3e %14.1f %7d%n", row.engine(), row.variant(), row.batch(),
                            row.maxRelativeError(), row.medianMicros(), row.calls());
                    out.flush();
                }
            });
            return verdict(result, reports, err);
        }
    }

    /** The verdict's line (a failure on every rank, a pass where {@code reports}) and the exit code. */
    private static int verdict(MainJob.Result result, boolean reports, PrintWriter err) {
        if (!result.passed()) {
            err.printf("FAILED: some rank's output differs from the fp64 oracle by more than %.0e%n", TOLERANCE);
            return 1;
        }
        if (reports) {
            err.printf("every rank of every batch matches the fp64 oracle within %.0e (relative, L2)%n", TOLERANCE);
        }
        return 0;
    }
}
