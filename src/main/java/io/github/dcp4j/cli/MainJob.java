package io.github.dcp4j.cli;

import io.github.dcp4j.Engines;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.engine.cuda.RankSetup;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.reference.ConformanceCases.GroupInputs;
import io.github.dcp4j.reference.Fp64Oracle;
import io.github.dcp4j.reference.RandomInputs;
import picocli.CommandLine;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

import static io.github.dcp4j.reference.Fp64Oracle.TOLERANCE;

/**
 * The main job: the op at the DeepSeek-V2 decode shape on the best available engine, every rank checked against the
 * fp64 oracle, and a table of engine, batch, max relative error and µs per call (median).
 */
final class MainJob {
    static final int CP = 8;
    static final int LOCAL_HEADS = 16;
    static final int HEAD_DIM = 512;
    static final DType DTYPE = DType.BF16;
    static final LseMode MODE = LseMode.BASE2;
    private static final int WARMUP_CALLS = 3;
    private static final Duration TIMEOUT = Duration.ofSeconds(10);
    /** Warm-up time before timing, so that the JIT has compiled the hot paths. */
    private static final long WARMUP_NANOS = 500_000_000L;
    private static final int MIN_CALLS = 5;
    private static final int MAX_CALLS = 2000;

    @Option(names = "--batches", split = ",", defaultValue = "1,8,64", paramLabel = "B[,B...]",
            description = "Batches (tokens per rank) to run, default ${DEFAULT-VALUE}.")
    int[] batches;

    @Option(names = "--seconds", defaultValue = "1.0", paramLabel = "S",
            description = "Timing budget per batch in seconds, default ${DEFAULT-VALUE}.")
    double seconds;

    @Option(names = "--engine", defaultValue = "auto", converter = EngineChoiceConverter.class,
            paramLabel = "auto|cpu|cuda|tornado", description = "Engine of the main job: auto (CUDA where a GPU and"
                    + " driver are present, else CPU; the reason is printed), cpu, cuda or tornado (a TornadoVM engine"
                    + " on the class path; dcp4j has none yet, so it is refused with the reason); default"
                    + " ${DEFAULT-VALUE}.")
    Engines.Choice engine;

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
        if (RankSetup.inEnvironment()) {
            return runAsRank(out, err);
        }
        err.printf("dcp4j main job: DeepSeek-V2 decode shape, cp %d, %d local heads, head_dim %d, %s, lse %s,"
                + " strided input%n", CP, LOCAL_HEADS, HEAD_DIM, DTYPE.name().toLowerCase(), MODE);
        Engines.Choice choice = engine;
        Engines.Resolved resolved = Engines.resolve(choice);
        err.printf("engine: %s (%s)%n", resolved.engine().spelling(), resolved.reason());
        out.printf("%-7s %6s %13s %14s %7s%n", "engine", "batch", "max rel err", "us/call (med)", "calls");
        boolean allPass = true;
        List<Row> rows = new ArrayList<>();
        for (int batch : batches) {
            Row row = runBatch(choice, batch, err);
            rows.add(row);
            out.printf("%-7s %6d %13.3e %14.1f %7d%n", row.engine, batch, row.maxRelativeError, row.medianMicros,
                    row.calls);
            out.flush();
            allPass &= row.maxRelativeError <= TOLERANCE;
        }
        writeTables(rows);
        if (!allPass) {
            err.printf("FAILED: some rank's output differs from the fp64 oracle by more than %.0e%n", TOLERANCE);
            return 1;
        }
        err.printf("every rank of every batch matches the fp64 oracle within %.0e (relative, L2)%n", TOLERANCE);
        return 0;
    }

    /** A progress line on {@code err}, where --progress asks for it or stderr is a terminal. */
    private void progress(PrintWriter err, String format, Object... args) {
        if (progress || (System.console() != null && System.console().isTerminal())) {
            err.printf(format + "%n", args);
            err.flush();
        }
    }

    /** One line of the table (public accessors: it is also the JSON's shape). */
    record Row(String engine, int batch, double maxRelativeError, double medianMicros, int calls) {
    }

    /** The table as CSV and JSON where --csv / --json ask for them. */
    private void writeTables(List<Row> rows) {
        TableFiles.write(csv, json, "engine,batch,max_rel_err,us_per_call,calls",
                (Row r) -> String.format(Locale.ROOT, "%s,%d,%.6e,%.3f,%d", r.engine, r.batch, r.maxRelativeError,
                        r.medianMicros, r.calls), rows);
    }

    private Row runBatch(Engines.Choice choice, int batch, PrintWriter err) {
        progress(err, "batch %d: generating inputs", batch);
        WorkspaceSpec spec = new WorkspaceSpec(batch, LOCAL_HEADS, CP, HEAD_DIM, DTYPE);
        try (Arena arena = Arena.ofShared(); LocalGroup engine = Engines.openGroup(choice, spec, TIMEOUT)) {
            GroupInputs g = RandomInputs.group(arena, new SplittableRandom(2026L * 1_000_003 + batch), batch,
                    LOCAL_HEADS, CP, HEAD_DIM, DTYPE, 3.0);
            List<TensorView> partialO = g.partialO();
            List<TensorView> partialLse = g.partialLse();
            List<TensorView> outs = new ArrayList<>();
            for (TensorView o : partialO) {
                outs.add(TensorView.allocate(arena, DTYPE, ReduceCall.outputShape(o)));
            }
            progress(err, "batch %d: timing on %s", batch, engine.description());
            List<Long> samples = new ArrayList<>();
            try (LocalGroup.PreparedCall call = engine.prepare(partialO, partialLse, outs, MODE)) {
                long start = System.nanoTime();
                for (int i = 0; i < WARMUP_CALLS || System.nanoTime() - start < WARMUP_NANOS; i++) {
                    call.run();
                }
                long budget = (long) (seconds * 1e9);
                start = System.nanoTime();
                while (samples.size() < MIN_CALLS
                        || (samples.size() < MAX_CALLS && System.nanoTime() - start < budget)) {
                    long t0 = System.nanoTime();
                    call.run();
                    samples.add(System.nanoTime() - t0);
                }
                call.readOutputs();
            }
            progress(err, "batch %d: checking %d ranks against the fp64 oracle", batch, CP);
            double maxError = 0;
            for (int r = 0; r < CP; r++) {
                double e = Fp64Oracle.relativeError(outs.get(r), Fp64Oracle.reduce(partialO, partialLse, r, MODE));
                maxError = Math.max(maxError, e);
            }
            long[] sorted = samples.stream().mapToLong(Long::longValue).sorted().toArray();
            return new Row(engine.engineName(), batch, maxError, median(sorted) / 1e3, sorted.length);
        }
    }

    /** Calls per batch when the ranks are processes: a fixed count, since every rank must make the same calls. */
    private static final int RANK_CALLS = 200;

    /**
     * The main job as one rank of a multi-process group (started by {@code launch}): cp = the group's size, CUDA IPC
     * workspaces, every rank checks its own output against fp64 and times its calls (launch + wait, as the loopback
     * figure); rank 0 prints the maximum over ranks of the errors and of the medians.
     */
    private int runAsRank(PrintWriter out, PrintWriter err) {
        try (RankSetup setup = RankSetup.fromEnvironment(TIMEOUT, Log.to(err))) {
            int cp = setup.worldSize();
            int rank = setup.rank();
            boolean reports = rank == 0;
            if (reports) {
                err.printf("dcp4j main job across %d processes: DeepSeek-V2 decode shape, %d local heads, head_dim %d,"
                        + " %s, lse %s, strided input%n", cp, LOCAL_HEADS, HEAD_DIM, DTYPE.name().toLowerCase(), MODE);
                out.printf("%-9s %6s %13s %14s %7s%n", "engine", "batch", "max rel err", "us/call (med)", "calls");
            }
            double worstError = 0;
            for (int batch : batches) {
                WorkspaceSpec spec = new WorkspaceSpec(batch, LOCAL_HEADS, cp, HEAD_DIM, DTYPE);
                try (Arena arena = Arena.ofShared(); var ws = setup.openWorkspaces(spec.bytes());
                     var engine = setup.openEngine(ws, TIMEOUT)) {
                    GroupInputs g = RandomInputs.group(arena, new SplittableRandom(2026L * 1_000_003 + batch), batch,
                            LOCAL_HEADS, cp, HEAD_DIM, DTYPE, 3.0);
                    List<TensorView> partialO = g.partialO();
                    List<TensorView> partialLse = g.partialLse();
                    TensorView mine = TensorView.allocate(arena, DTYPE, ReduceCall.outputShape(partialO.get(rank)));
                    long[] samples = new long[RANK_CALLS];
                    try (var call = engine.prepare(partialO.get(rank), partialLse.get(rank), mine, rank, cp, MODE)) {
                        for (int i = 0; i < WARMUP_CALLS * 10; i++) {
                            call.run();
                        }
                        for (int i = 0; i < samples.length; i++) {
                            long t0 = System.nanoTime();
                            call.run();
                            samples[i] = System.nanoTime() - t0;
                        }
                        call.readOutputs();
                    }
                    Arrays.sort(samples);
                    double error = Fp64Oracle.relativeError(mine, Fp64Oracle.reduce(partialO, partialLse, rank, MODE));
                    double[] worst = maxOverRanks(setup, error, median(samples) / 1e3);
                    worstError = Math.max(worstError, worst[0]);
                    if (reports) {
                        out.printf("%-9s %6d %13.3e %14.1f %7d%n", "cuda-ipc", batch, worst[0], worst[1],
                                samples.length);
                        out.flush();
                    }
                }
            }
            if (worstError > TOLERANCE) {
                err.printf("FAILED: some rank's output differs from the fp64 oracle by more than %.0e%n", TOLERANCE);
                return 1;
            }
            if (reports) {
                err.printf("every rank of every batch matches the fp64 oracle within %.0e (relative, L2)%n",
                        TOLERANCE);
            }
            return 0;
        }
    }

    /** The maximum over ranks of each value. */
    private static double[] maxOverRanks(RankSetup setup, double... values) {
        ByteBuffer mine = ByteBuffer.allocate(values.length * Double.BYTES);
        for (double v : values) {
            mine.putDouble(v);
        }
        double[] max = values.clone();
        for (byte[] b : setup.rendezvous().allGather("main-job", mine.array())) {
            ByteBuffer other = ByteBuffer.wrap(b);
            for (int i = 0; i < max.length; i++) {
                max[i] = Math.max(max[i], other.getDouble());
            }
        }
        return max;
    }

    private static double median(long[] sorted) {
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
    }
}
