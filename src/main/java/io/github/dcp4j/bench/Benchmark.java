package io.github.dcp4j.bench;

import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.CudaEvent;
import io.github.dcp4j.cuda.CudaGraph;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.cuda.DeviceBuffer;
import io.github.dcp4j.engine.cuda.KernelCall;
import io.github.dcp4j.layout.FencedLayout;
import io.github.dcp4j.layout.LlLayout;
import io.github.dcp4j.layout.RowLayout;
import io.github.dcp4j.op.Crossovers;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.Variant;

import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * The benchmark, on any {@link Deployment} (loopback, threads, processes). Every time is from CUDA events around
 * queued work, after warm-up, the median of samples, and per case the maximum over ranks of each rank's median. Each
 * case's floors are measured in the same run: the launch floor (the empty kernel launched as the op is, in a CUDA
 * graph) and the byte floor (the bytes the busiest GPU must move, at the device-to-device copy bandwidth measured
 * here).
 */
public final class Benchmark implements AutoCloseable {

    /** How calls are issued, as in upstream's bench_dcp_lse_reduce.py, plus the per-layer mode. */
    public enum Mode {
        /** N calls launched one by one per sample. */
        EAGER("eager"),
        /** 1 call captured in a graph, replayed N times per sample. */
        GRAPH("graph"),
        /** 50 calls captured in one graph, 1 replay per sample. */
        GRAPH_50("graph-50"),
        /** 60 calls per graph (one per layer) at the DeepSeek-V2 decode shape, strided input. */
        LAYER("layer");

        private final String spelling;

        Mode(String spelling) {
            this.spelling = spelling;
        }

        /** {@return the mode's name on the command line and in the reports} */
        public String spelling() {
            return spelling;
        }

        /**
         * The mode named {@code s}.
         *
         * @param s eager, graph, graph-50 or layer
         * @return that mode
         * @throws IllegalArgumentException for any other name, quoting it
         */
        public static Mode parse(String s) {
            for (Mode m : values()) {
                if (m.spelling.equals(s)) {
                    return m;
                }
            }
            throw new IllegalArgumentException("--modes must be eager, graph, graph-50 or layer; got '" + s
                    + "'");
        }
    }

    /**
     * One measured case.
     *
     * @param mode         how the calls are issued
     * @param batch        tokens per call
     * @param heads        heads each rank owns
     * @param headDim      elements of one head
     * @param cp           ranks in the group
     * @param strided      partial_o as strided views of attention outputs (else packed copies)
     * @param deviceInputs inputs and outputs as device tensors, used in place (else host views, copied once per
     *                     prepared call: the times are the same launches either way, this shows it)
     * @param flushL2      whether L2 is flushed before every call
     * @param variant      the protocol variant (op.Variant; auto picks per call)
     */
    public record Case(Mode mode, int batch, int heads, int headDim, int cp, boolean strided, boolean flushL2,
                       boolean deviceInputs, Variant variant) {
        /**
         * A case of the default variant, ll128.
         *
         * @param mode         how the calls are issued
         * @param batch        tokens per call
         * @param heads        heads each rank owns
         * @param headDim      elements of one head
         * @param cp           ranks in the group
         * @param strided      partial_o as strided views of attention outputs
         * @param flushL2      whether L2 is flushed before every call
         * @param deviceInputs inputs and outputs as device tensors
         */
        public Case(Mode mode, int batch, int heads, int headDim, int cp, boolean strided, boolean flushL2,
                    boolean deviceInputs) {
            this(mode, batch, heads, headDim, cp, strided, flushL2, deviceInputs, Variant.LL128);
        }

        /**
         * The same case in another variant.
         *
         * @param v the variant
         * @return this case with {@code v} as its variant
         */
        public Case withVariant(Variant v) {
            return new Case(mode, batch, heads, headDim, cp, strided, flushL2, deviceInputs, v);
        }

        /**
         * Whether two cases differ in their variant at most (the same inputs, the same run).
         *
         * @param other another case
         * @return whether {@code other} is this case but for the variant
         */
        public boolean sameInputs(Case other) {
            return withVariant(Variant.LL128).equals(other.withVariant(Variant.LL128));
        }

        /** {@return the partial outputs one rank holds: rows x cp x head_dim x 2 bytes (bf16), auto's measure} */
        public long bytesPerRank() {
            return Crossovers.bytesPerRank((long) batch * heads, cp, headDim, DType.BF16);
        }

        /** {@return the input column: strided or packed, with "-dev" for device tensors} */
        public String inputName() {
            return (strided ? "strided" : "packed") + (deviceInputs ? "-dev" : "");
        }
    }

    /**
     * A case's result: µs per call, its floors and ratios, the error against fp64 and the host cost of a launch.
     *
     * @param c                    the case
     * @param usPerCall            µs per call, all ranks together
     * @param launchFloorUs        the empty kernel's µs per call, launched as the op is
     * @param byteFloorUs          the bytes the op must move at the measured copy bandwidth, in µs
     * @param maxRelativeError     the largest relative error against fp64 (NaN where not checked)
     * @param hostUsPerLaunch      host µs to queue one op launch (eager modes; NaN elsewhere)
     * @param hostUsPerEmptyLaunch host µs to queue one bare empty launch (eager modes; NaN elsewhere)
     * @param ran                  the variant that ran: the case's, or the one auto picked
     */
    public record Result(Case c, double usPerCall, double launchFloorUs, double byteFloorUs, double maxRelativeError,
                         double hostUsPerLaunch, double hostUsPerEmptyLaunch, Variant ran) {
        /**
         * A result of the case's own variant (not auto).
         *
         * @param c                    the case
         * @param usPerCall            µs per call, all ranks together
         * @param launchFloorUs        the empty kernels' µs per call, launched as the op is
         * @param byteFloorUs          the bytes the op must move at the measured copy bandwidth, in µs
         * @param maxRelativeError     the largest relative error against fp64 (NaN where not checked)
         * @param hostUsPerLaunch      host µs to queue one op launch (eager modes; NaN elsewhere)
         * @param hostUsPerEmptyLaunch host µs to queue one bare empty launch (eager modes; NaN elsewhere)
         */
        public Result(Case c, double usPerCall, double launchFloorUs, double byteFloorUs, double maxRelativeError,
                      double hostUsPerLaunch, double hostUsPerEmptyLaunch) {
            this(c, usPerCall, launchFloorUs, byteFloorUs, maxRelativeError, hostUsPerLaunch, hostUsPerEmptyLaunch,
                    c.variant());
        }

        /** {@return the variant as the reports name it: its own, or auto with the one it picked ("auto:ll128")} */
        public String variantLabel() {
            return c.variant() == Variant.AUTO ? "auto:" + ran.spelling() : ran.spelling();
        }

        /** {@return µs per call over the launch floor} */
        public double launchRatio() {
            return usPerCall / launchFloorUs;
        }

        /** {@return µs per call over the byte floor} */
        public double byteRatio() {
            return usPerCall / byteFloorUs;
        }
    }

    /**
     * Sampling parameters.
     *
     * @param samples      samples per case
     * @param warmup       warm-up runs before the samples
     * @param eagerCalls   eager calls per sample
     * @param graphReplays graph replays per sample
     */
    public record Settings(int samples, int warmup, int eagerCalls, int graphReplays) {
    }

    static final int GRAPH_50_CALLS = 50;
    static final int LAYER_CALLS = 60;
    /**
     * Unmeasured launches before the host cost is sampled: more than HotSpot's tiered compilation needs to compile a
     * method at its top tier (Tier4CompileThreshold, 15000 by default), so that the samples time compiled code on both
     * paths: an eager call's checks run nowhere else in a benchmark, so without these they would be timed while
     * HotSpot still interprets them.
     */
    static final int HOST_WARMUP_LAUNCHES = 20_000;
    /** Bytes written to flush L2 between calls: well above the 50-60 MB L2 of Hopper parts. */
    static final long FLUSH_BYTES = 256L << 20;
    static final long COPY_BYTES = 1L << 30;

    private final Deployment deployment;
    private final CudaDevice device;
    private final Settings settings;
    private final PrintWriter progress;
    private final CudaStream stream;
    private final Map<CudaDevice, DeviceBuffer> flushBuffers = new IdentityHashMap<>();
    private final double copyBytesPerSecond;

    /**
     * A benchmark of {@code deployment}'s launches; floors measured on its first GPU.
     *
     * @param deployment how the ranks run
     * @param settings   the sampling parameters
     * @param progress   where progress lines go
     */
    public Benchmark(Deployment deployment, Settings settings, PrintWriter progress) {
        this.deployment = deployment;
        this.device = deployment.devices().getFirst();
        this.settings = settings;
        this.progress = progress;
        this.stream = new CudaStream(device);
        // one process measures while the others wait: concurrent copies from every process would share the GPU
        this.copyBytesPerSecond = deployment.maxOverProcesses("copy-bandwidth",
                deployment.reports() ? measureCopyBandwidth() : 0);
    }

    /** {@return the device-to-device copy bandwidth, bytes read plus bytes written per second (median of samples)} */
    public double copyBytesPerSecond() {
        return copyBytesPerSecond;
    }

    private double measureCopyBandwidth() {
        progress.println("floor: measuring device-to-device copy bandwidth (" + (COPY_BYTES >> 20) + " MiB)");
        progress.flush();
        try (DeviceBuffer a = DeviceBuffer.allocate(device, COPY_BYTES);
             DeviceBuffer b = DeviceBuffer.allocate(device, COPY_BYTES)) {
            Lane copy = new Lane(device, stream);
            double ms = medianMillis(List.of(copy), l -> a.copyToAsync(b, stream), 3, 20);
            return 2.0 * COPY_BYTES / (ms / 1e3);
        }
    }

    /** One launch's GPU and stream: every lane of a case runs at the same time, each timed by its own events. */
    private record Lane(CudaDevice device, CudaStream stream) {
    }

    /**
     * Runs one case: inputs, warm-up, samples, floors, and the check of this process's ranks against fp64. Times are
     * the maximum over ranks (lanes, then processes) of each rank's median.
     *
     * @param c the case
     * @return its result
     */
    public Result run(Case c) {
        if (deployment.reports()) {
            progress.printf("case: %s batch %d heads %d head_dim %d cp %d %s L2 %s variant %s%n", c.mode().spelling(),
                    c.batch(), c.heads(), c.headDim(), c.cp(), c.strided() ? "strided" : "packed",
                    c.flushL2() ? "flushed" : "hot", c.variant());
            progress.flush();
        }
        try (Arena arena = Arena.ofShared(); Deployment.Prepared p = deployment.prepare(c, arena)) {
            List<KernelCall> calls = p.lanes();
            List<Lane> lanes = new ArrayList<>();
            for (KernelCall k : calls) {
                lanes.add(new Lane(k.device(), k.stream()));
            }
            String key = c.mode().spelling() + "-" + c.batch() + "-" + c.heads() + "-" + c.headDim()
                    + (c.flushL2() ? "-flushed" : "-hot") + "-" + c.variant().spelling();
            Variant ran = calls.getFirst().variant();
            double us = measure(c, lanes, i -> calls.get(i).launch(), key);
            double floor = graphMicros(lanes, i -> calls.get(i).launchEmpty(), callsPerGraph(c));
            double err = p.checkOutputs();
            double[] host = c.mode() == Mode.EAGER && calls.size() == 1
                    ? hostCost(calls.getFirst(), p.eagerCall().orElse(calls.getFirst()::launch))
                    : new double[] {Double.NaN, Double.NaN};
            return new Result(c, us,
                    deployment.maxOverProcesses(key + "-floor", floor), byteFloorMicros(c, ran),
                    deployment.maxOverProcesses(key + "-err", err), deployment.maxOverProcesses(key + "-host", host[0]),
                    deployment.maxOverProcesses(key + "-host-empty", host[1]), ran);
        }
    }

    static int callsPerGraph(Case c) {
        return switch (c.mode()) {
            case EAGER, GRAPH -> 1;
            case GRAPH_50 -> GRAPH_50_CALLS;
            case LAYER -> LAYER_CALLS;
        };
    }

    /** What one lane queues for one call (on its device thread). */
    private interface LaneWork {
        void queue(int lane);
    }

    /**
     * µs per call in the case's mode, the maximum over ranks; with L2 flushed, minus the same structure of flushes
     * alone (maximum over ranks too).
     */
    private double measure(Case c, List<Lane> lanes, LaneWork launch, String key) {
        if (!c.flushL2()) {
            return deployment.maxOverProcesses(key + "-us", modeMicros(c, lanes, launch));
        }
        for (Lane l : lanes) {  // allocated before any capture: a graph cannot capture an allocation
            flushBuffers.computeIfAbsent(l.device(), d -> DeviceBuffer.allocate(d, FLUSH_BYTES));
        }
        LaneWork flush = i -> flushBuffers.get(lanes.get(i).device()).fillAsync((byte) 1, lanes.get(i).stream());
        LaneWork both = i -> {
            flush.queue(i);
            launch.queue(i);
        };
        return deployment.maxOverProcesses(key + "-us", modeMicros(c, lanes, both))
                - deployment.maxOverProcesses(key + "-flush", modeMicros(c, lanes, flush));
    }

    private double modeMicros(Case c, List<Lane> lanes, LaneWork one) {
        return switch (c.mode()) {
            case EAGER -> medianMillis(lanes, i -> repeat(() -> one.queue(i), settings.eagerCalls()),
                    settings.warmup(), settings.samples()) * 1e3 / settings.eagerCalls();
            case GRAPH -> {
                List<CudaGraph> graphs = capture(lanes, one, 1);
                try {
                    yield medianMillis(lanes, i -> repeat(() -> graphs.get(i).launch(lanes.get(i).stream()),
                            settings.graphReplays()), settings.warmup(), settings.samples()) * 1e3
                            / settings.graphReplays();
                } finally {
                    graphs.forEach(CudaGraph::close);
                }
            }
            case GRAPH_50, LAYER -> graphMicros(lanes, one, callsPerGraph(c));
        };
    }

    /** One graph per lane of {@code calls} calls each. */
    private static List<CudaGraph> capture(List<Lane> lanes, LaneWork one, int calls) {
        List<CudaGraph> graphs = new ArrayList<>();
        for (int i = 0; i < lanes.size(); i++) {
            int lane = i;
            graphs.add(CudaGraph.capture(lanes.get(i).stream(), () -> repeat(() -> one.queue(lane), calls)));
        }
        return graphs;
    }

    /** µs per call of {@code calls} calls captured in one graph per lane, replayed once per sample. */
    private double graphMicros(List<Lane> lanes, LaneWork one, int calls) {
        List<CudaGraph> graphs = capture(lanes, one, calls);
        try {
            return medianMillis(lanes, i -> graphs.get(i).launch(lanes.get(i).stream()), settings.warmup(),
                    settings.samples()) * 1e3 / calls;
        } finally {
            graphs.forEach(CudaGraph::close);
        }
    }

    private static void repeat(Runnable r, int times) {
        for (int i = 0; i < times; i++) {
            r.run();
        }
    }

    /**
     * The largest over lanes of the median over samples of the CUDA-event time of {@code work} on each lane, after
     * {@code warmup} unmeasured runs. Every lane's work of a sample is queued before any is waited for.
     * <p>
     * Each sample queues the work twice and times the second: the untimed lead-in absorbs the skew between the
     * moments the hosts queue the sample (ranks in other processes queue theirs whenever their previous sample ended,
     * and a rank's first call waits for its slowest peer), so the timed part starts with every rank in step, as
     * consecutive layers of one decode step do.
     */
    private double medianMillis(List<Lane> lanes, LaneWork work, int warmup, int samples) {
        for (int w = 0; w < warmup; w++) {
            for (int i = 0; i < lanes.size(); i++) {
                int lane = i;
                lanes.get(i).device().run(() -> work.queue(lane));
            }
        }
        for (Lane l : lanes) {
            l.stream().synchronize();
        }
        double[][] ms = new double[lanes.size()][samples];
        List<CudaEvent[]> events = new ArrayList<>();
        try {
            for (Lane l : lanes) {
                events.add(new CudaEvent[] {new CudaEvent(l.device()), new CudaEvent(l.device())});
            }
            for (int s = 0; s < samples; s++) {
                for (int i = 0; i < lanes.size(); i++) {
                    int lane = i;
                    Lane l = lanes.get(i);
                    CudaEvent[] e = events.get(i);
                    l.device().run(() -> {
                        work.queue(lane);
                        e[0].record(l.stream());
                        work.queue(lane);
                        e[1].record(l.stream());
                    });
                }
                for (int i = 0; i < lanes.size(); i++) {
                    CudaEvent[] e = events.get(i);
                    ms[i][s] = lanes.get(i).device().call(() -> CudaEvent.elapsedMillis(e[0], e[1]));
                }
            }
        } finally {
            for (CudaEvent[] e : events) {
                e[0].close();
                e[1].close();
            }
        }
        double worst = 0;
        for (double[] lane : ms) {
            Arrays.sort(lane);
            worst = Math.max(worst, lane[samples / 2]);
        }
        return worst;
    }

    /**
     * Host cost of one eager call from Java, µs: {@code eager} (a prepared call's launch, or with device tensors the
     * whole call: checks, pointer checks, arguments and launch) and the bare empty launch through the same binding
     * (time to queue a batch of launches, medians of samples). Only where this process makes one launch (loopback,
     * or one rank per process whose peers run the same loop); with several launches per process a lone lane would
     * wait for the others.
     */
    private double[] hostCost(KernelCall call, Runnable eager) {
        return call.device().call(() -> new double[] {hostMicros(call, eager), hostMicros(call, call::launchEmpty)});
    }

    private double hostMicros(KernelCall call, Runnable launch) {
        int batch = 20;
        for (int w = 0; w < HOST_WARMUP_LAUNCHES; w += batch) {
            call.stream().synchronize();
            repeat(launch, batch);
        }
        double[] us = new double[settings.samples()];
        for (int s = 0; s < us.length; s++) {
            call.stream().synchronize();
            long t0 = System.nanoTime();
            repeat(launch, batch);
            us[s] = (System.nanoTime() - t0) / 1e3 / batch;
        }
        call.stream().synchronize();
        Arrays.sort(us);
        return us[us.length / 2];
    }

    /**
     * The byte floor of one call of {@code ran}, µs: inputs read once, the workspace bytes of the rows that travel as
     * that variant moves them written once and read once (every source's in unfused, whose copy kernel sends the own
     * slice too; the cp - 1 others in the fused variants, which read the own slice from partial_o), outputs written
     * once, for all cp ranks, at the measured copy bandwidth.
     *
     * @param c   the case
     * @param ran the variant that ran (not auto)
     * @return the floor, in µs
     */
    public double byteFloorMicros(Case c, Variant ran) {
        return bytesPerCall(c, ran) * deployment.ranksPerGpu(c.cp()) / c.cp() / copyBytesPerSecond * 1e6;
    }

    static double bytesPerCall(Case c, Variant ran) {
        long rows = (long) c.batch() * c.heads();
        RowLayout row = RowLayout.of(c.headDim(), DType.BF16.bytes());
        double inputs = rows * c.cp() * ((double) row.dataBytes() + Float.BYTES);
        int travelling = ran == Variant.UNFUSED ? c.cp() : c.cp() - 1;
        double lines = 2.0 * rows * travelling * workspaceBytesPerRow(ran, row);
        double outputs = (double) rows * row.dataBytes();
        return c.cp() * (inputs + lines + outputs);
    }

    /**
     * The workspace bytes one source's row takes in {@code ran}'s layout: LL128 lines with their LSE lines; LL lines
     * (twice the data) and the LSE line; for simple and unfused the raw slice and its LSE value (the chunk flags, one
     * per block, are left out).
     */
    static long workspaceBytesPerRow(Variant ran, RowLayout row) {
        return switch (ran) {
            case LL128 -> row.rowBytes();
            case LL -> LlLayout.rowBytes(row);
            case SIMPLE, UNFUSED -> (long) row.dataBytes() + FencedLayout.WORD_BYTES;
            case AUTO -> throw new IllegalArgumentException("the byte floor is of the variant auto picked; got auto");
        };
    }

    /**
     * Runs every case, reporting each result to {@code sink} as it comes.
     *
     * @param cases the cases, in order
     * @param sink  receives each result as it comes
     * @return every result, in order
     */
    public List<Result> runAll(List<Case> cases, Consumer<Result> sink) {
        List<Result> results = new ArrayList<>();
        for (Case c : cases) {
            Result r = run(c);
            results.add(r);
            sink.accept(r);
        }
        return results;
    }

    @Override
    public void close() {
        flushBuffers.values().forEach(DeviceBuffer::close);
        stream.close();
    }
}
