package io.github.dcp4j.check;

import io.github.dcp4j.Engines;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.engine.cuda.RankSetup;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.Variant;
import io.github.dcp4j.op.VariantWorkspace;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.reference.ConformanceCases.GroupInputs;
import io.github.dcp4j.reference.Fp64Oracle;
import io.github.dcp4j.reference.RandomInputs;

import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.function.Consumer;

import static io.github.dcp4j.reference.Fp64Oracle.TOLERANCE;

/**
 * The main job (the command line without a subcommand): the op at the DeepSeek-V2 decode shape (strided input), for
 * each batch timed on one group and every rank's output checked against the fp64 oracle, one {@link Row} per batch.
 * In this process on the engine an {@link Engines.Choice} opens ({@link #run}), or as one rank of a multi-process group
 * on CUDA IPC ({@link #runAsRank}).
 */
public final class MainJob {
    /** Ranks of the group in this process. */
    public static final int CP = 8;
    /** Heads per rank. */
    public static final int LOCAL_HEADS = 16;
    /** Elements per head. */
    public static final int HEAD_DIM = 512;
    /** The inputs' and outputs' element type. */
    public static final DType DTYPE = DType.BF16;
    /** The base of the LSE inputs. */
    public static final LseMode MODE = LseMode.BASE2;
    /** How long a rank waits for a peer (kernel and rendezvous). */
    public static final Duration TIMEOUT = Duration.ofSeconds(10);
    /** Calls per batch when the ranks are processes: a fixed count, since every rank must make the same calls. */
    public static final int RANK_CALLS = 200;
    private static final int WARMUP_CALLS = 3;
    /** Warm-up time before timing, so that the JIT has compiled the hot paths. */
    private static final long WARMUP_NANOS = 500_000_000L;
    private static final int MIN_CALLS = 5;
    private static final int MAX_CALLS = 2000;

    private final int[] batches;
    private final double seconds;
    private final PrintWriter progress;

    /**
     * A main job over {@code batches}.
     *
     * @param batches  batches (tokens per rank) to run, in order, each at least 1
     * @param seconds  timing budget per batch in this process, finite and positive
     * @param progress where the progress lines of a run in this process go (flushed after each)
     * @throws IllegalArgumentException for a batch below 1 or a budget that is not a finite positive number
     */
    public MainJob(int[] batches, double seconds, PrintWriter progress) {
        for (int b : batches) {
            if (b < 1) {
                throw new IllegalArgumentException("the main job's batches must all be >= 1; got " + b);
            }
        }
        if (!(seconds > 0) || Double.isInfinite(seconds)) {
            throw new IllegalArgumentException("the main job's seconds per batch must be a finite number > 0; got "
                    + seconds);
        }
        this.batches = batches.clone();
        this.seconds = seconds;
        this.progress = progress;
    }

    /**
     * One batch's line of the table (public accessors: it is also the JSON's shape).
     *
     * @param engine           the engine that ran it
     * @param variant          the protocol variant its calls ran (op.Variant; auto's pick for the batch)
     * @param batch            tokens per rank
     * @param maxRelativeError the largest relative error (L2) of any rank's output against the fp64 oracle
     * @param medianMicros     µs per call, the median of the timed calls
     * @param calls            timed calls
     */
    public record Row(String engine, String variant, int batch, double maxRelativeError, double medianMicros,
                      int calls) {
        /** The header line of the rows as CSV. */
        public static final String CSV_HEADER = "engine,variant,batch,max_rel_err,us_per_call,calls";

        /**
         * {@return whether every rank matched the fp64 oracle within {@link Fp64Oracle#TOLERANCE}} A NaN error (an
         * output NaN where the oracle's is not) does not.
         */
        public boolean passed() {
            return maxRelativeError <= TOLERANCE;
        }

        /** {@return this row as one CSV line} */
        public String csvLine() {
            return String.format(Locale.ROOT, "%s,%s,%d,%.6e,%.3f,%d", engine, variant, batch, maxRelativeError,
                    medianMicros, calls);
        }
    }

    /**
     * What a run found.
     *
     * @param rows   one row per batch, in the batches' order
     * @param passed whether every rank of every batch matched the fp64 oracle within {@link Fp64Oracle#TOLERANCE}
     */
    public record Result(List<Row> rows, boolean passed) {
        /** A result, the rows copied. */
        public Result {
            rows = List.copyOf(rows);
        }
    }

    /**
     * Runs every batch in this process, each on its own group of {@link #CP} ranks that {@code choice} opens
     * ({@link Engines#openGroup}): warm-up calls, then calls timed one by one for the budget, then every rank's
     * output against the fp64 oracle.
     *
     * @param choice the engine
     * @param row    receives each batch's row as soon as it is done
     * @return the rows and the verdict
     * @throws IllegalStateException where the engine cannot be opened here (with the reason)
     */
    public Result run(Engines.Choice choice, Consumer<Row> row) {
        return run(choice, Variant.LL128, row);
    }

    /**
     * As {@link #run(Engines.Choice, Consumer)}, each group running {@code variant}'s protocol
     * ({@link Engines#openGroup(Engines.Choice, WorkspaceSpec, java.time.Duration, Variant)}); each row names the
     * variant its calls ran.
     *
     * @param choice  the engine
     * @param variant the protocol variant
     * @param row     receives each batch's row as soon as it is done
     * @return the rows and the verdict
     * @throws IllegalStateException    where the engine cannot be opened here (with the reason)
     * @throws IllegalArgumentException where the engine does not run the variant
     */
    public Result run(Engines.Choice choice, Variant variant, Consumer<Row> row) {
        boolean allPass = true;
        List<Row> rows = new ArrayList<>();
        for (int batch : batches) {
            Row r = runBatch(choice, variant, batch);
            rows.add(r);
            row.accept(r);
            allPass &= r.passed();
        }
        return new Result(rows, allPass);
    }

    /** A progress line, flushed at once. */
    private void progress(String format, Object... args) {
        progress.printf(format + "%n", args);
        progress.flush();
    }

    private Row runBatch(Engines.Choice choice, Variant variant, int batch) {
        progress("batch %d: generating inputs", batch);
        WorkspaceSpec spec = new WorkspaceSpec(batch, LOCAL_HEADS, CP, HEAD_DIM, DTYPE);
        try (Arena arena = Arena.ofShared(); LocalGroup engine = Engines.openGroup(choice, spec, TIMEOUT, variant)) {
            GroupInputs g = RandomInputs.group(arena, new SplittableRandom(2026L * 1_000_003 + batch), batch,
                    LOCAL_HEADS, CP, HEAD_DIM, DTYPE, 3.0);
            List<TensorView> partialO = g.partialO();
            List<TensorView> partialLse = g.partialLse();
            List<TensorView> outs = new ArrayList<>();
            for (TensorView o : partialO) {
                outs.add(TensorView.allocate(arena, DTYPE, ReduceCall.outputShape(o)));
            }
            progress("batch %d: timing on %s", batch, engine.description());
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
            progress("batch %d: checking %d ranks against the fp64 oracle", batch, CP);
            double maxError = 0;
            for (int r = 0; r < CP; r++) {
                double e = Fp64Oracle.relativeError(outs.get(r), Fp64Oracle.reduce(partialO, partialLse, r, MODE));
                maxError = Math.max(maxError, e);
            }
            long[] sorted = samples.stream().mapToLong(Long::longValue).sorted().toArray();
            return new Row(engine.engineName(), engine.variantFor(spec.maxRows(), HEAD_DIM, DTYPE).spelling(), batch,
                    maxError, median(sorted) / 1e3, sorted.length);
        }
    }

    /**
     * Runs every batch as one rank of the group {@code setup} joined (collective; started by {@code launch}): cp =
     * the group's size, CUDA IPC workspaces, {@link #RANK_CALLS} calls timed per batch (launch + wait, as the loopback
     * figure), this rank's output checked against fp64. Each row, on every rank, holds the maximum over ranks of the
     * errors and of the medians.
     *
     * @param setup this rank of the group
     * @param row   receives each batch's row as soon as it is done
     * @return the rows and the verdict, the same on every rank
     */
    public Result runAsRank(RankSetup setup, Consumer<Row> row) {
        return runAsRank(setup, Variant.LL128, row);
    }

    /**
     * As {@link #runAsRank(RankSetup, Consumer)}, every rank running {@code variant}'s protocol (the same on every
     * rank); each row names the variant its calls ran.
     *
     * @param setup   this rank of the group
     * @param variant the protocol variant
     * @param row     receives each batch's row as soon as it is done
     * @return the rows and the verdict, the same on every rank
     */
    public Result runAsRank(RankSetup setup, Variant variant, Consumer<Row> row) {
        int cp = setup.worldSize();
        int rank = setup.rank();
        boolean allPass = true;
        List<Row> rows = new ArrayList<>();
        for (int batch : batches) {
            WorkspaceSpec spec = new WorkspaceSpec(batch, LOCAL_HEADS, cp, HEAD_DIM, DTYPE);
            VariantWorkspace vw = setup.variantWorkspace(variant, spec);
            try (Arena arena = Arena.ofShared(); var ws = setup.openWorkspaces(vw.bytes());
                 var engine = setup.openEngine(ws, TIMEOUT, vw, spec)) {
                GroupInputs g = RandomInputs.group(arena, new SplittableRandom(2026L * 1_000_003 + batch), batch,
                        LOCAL_HEADS, cp, HEAD_DIM, DTYPE, 3.0);
                List<TensorView> partialO = g.partialO();
                List<TensorView> partialLse = g.partialLse();
                TensorView mine = TensorView.allocate(arena, DTYPE, ReduceCall.outputShape(partialO.get(rank)));
                long[] samples = new long[RANK_CALLS];
                Variant ran;
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
                    ran = call.variant();
                }
                Arrays.sort(samples);
                double error = Fp64Oracle.relativeError(mine, Fp64Oracle.reduce(partialO, partialLse, rank, MODE));
                double[] worst = maxOverRanks(setup, error, median(samples) / 1e3);
                Row r = new Row("cuda-ipc", ran.spelling(), batch, worst[0], worst[1], samples.length);
                rows.add(r);
                row.accept(r);
                allPass &= r.passed();
            }
        }
        return new Result(rows, allPass);
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
