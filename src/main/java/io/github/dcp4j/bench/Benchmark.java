package io.github.dcp4j.bench;

import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.CudaEvent;
import io.github.dcp4j.cuda.CudaGraph;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.cuda.DeviceBuffer;
import io.github.dcp4j.engine.cuda.CudaLoopbackEngine;
import io.github.dcp4j.engine.cuda.LoopbackCall;
import io.github.dcp4j.layout.RowLayout;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.reference.Fp64Oracle;
import io.github.dcp4j.reference.RandomInputs;
import jcuda.driver.JCudaDriver;

import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.function.Consumer;

/**
 * The benchmark, on one GPU in loopback (all cp ranks in one launch, so one median per case). Every time is from CUDA
 * events around queued work, after warm-up, the median of samples. Each case's floors are measured in the same run:
 * the launch floor (the empty kernel launched as the op is, in a CUDA graph) and the byte floor (the bytes the op
 * must move at the device-to-device copy bandwidth measured here).
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

        public String spelling() {
            return spelling;
        }

        public static Mode parse(String s) {
            for (Mode m : values()) {
                if (m.spelling.equals(s)) {
                    return m;
                }
            }
            throw new IllegalArgumentException("mode must be eager, graph, graph-50 or layer; got '" + s + "'");
        }
    }

    /** One measured case. */
    public record Case(Mode mode, int batch, int heads, int headDim, int cp, boolean strided, boolean flushL2) {
    }

    /** A case's result: µs per call, its floors and ratios, the error against fp64 and the host cost of a launch. */
    public record Result(Case c, double usPerCall, double launchFloorUs, double byteFloorUs, double maxRelativeError,
                         double hostUsPerLaunch, double hostUsPerEmptyLaunch) {
        public double launchRatio() {
            return usPerCall / launchFloorUs;
        }

        public double byteRatio() {
            return usPerCall / byteFloorUs;
        }
    }

    /** Sampling parameters. */
    public record Settings(int samples, int warmup, int eagerCalls, int graphReplays, Duration timeout) {
    }

    static final int GRAPH_50_CALLS = 50;
    static final int LAYER_CALLS = 60;
    /** Bytes written to flush L2 between calls: well above the 50-60 MB L2 of Hopper parts. */
    static final long FLUSH_BYTES = 256L << 20;
    static final long COPY_BYTES = 1L << 30;

    private final CudaDevice device;
    private final Settings settings;
    private final PrintWriter progress;
    private final CudaStream stream;
    private final DeviceBuffer flush;
    private final double copyBytesPerSecond;

    public Benchmark(CudaDevice device, Settings settings, PrintWriter progress) {
        this.device = device;
        this.settings = settings;
        this.progress = progress;
        this.stream = new CudaStream(device);
        this.flush = DeviceBuffer.allocate(device, FLUSH_BYTES);
        this.copyBytesPerSecond = measureCopyBandwidth();
    }

    /** Device-to-device copy bandwidth, bytes read plus bytes written per second (median of samples). */
    public double copyBytesPerSecond() {
        return copyBytesPerSecond;
    }

    private double measureCopyBandwidth() {
        progress.println("floor: measuring device-to-device copy bandwidth (" + (COPY_BYTES >> 20) + " MiB)");
        progress.flush();
        try (DeviceBuffer a = DeviceBuffer.allocate(device, COPY_BYTES);
             DeviceBuffer b = DeviceBuffer.allocate(device, COPY_BYTES)) {
            double ms = medianMillis(() -> a.copyToAsync(b, stream), 3, 20);
            return 2.0 * COPY_BYTES / (ms / 1e3);
        }
    }

    /** Runs one case: inputs, warm-up, samples, floors, and the check of every rank against fp64. */
    public Result run(Case c) {
        progress.printf("case: %s batch %d heads %d head_dim %d cp %d %s L2 %s%n", c.mode().spelling(), c.batch(),
                c.heads(), c.headDim(), c.cp(), c.strided() ? "strided" : "packed", c.flushL2() ? "flushed" : "hot");
        progress.flush();
        WorkspaceSpec spec = new WorkspaceSpec(c.batch(), c.heads(), c.cp(), c.headDim(), DType.BF16);
        try (Arena arena = Arena.ofShared();
             CudaLoopbackEngine engine = CudaLoopbackEngine.open(device, spec, settings.timeout())) {
            SplittableRandom random = new SplittableRandom(2026L + c.batch() * 31L + c.heads());
            List<TensorView> o = new ArrayList<>();
            List<TensorView> lse = new ArrayList<>();
            List<TensorView> out = new ArrayList<>();
            for (int r = 0; r < c.cp(); r++) {
                RandomInputs in = RandomInputs.attention(arena, random.split(), c.batch(), c.heads(), c.cp(),
                        c.headDim(), DType.BF16, 3.0);
                o.add(c.strided() ? in.partialO() : in.partialO().contiguousCopy(arena));
                lse.add(c.strided() ? in.partialLse() : in.partialLse().contiguousCopy(arena));
                out.add(TensorView.allocate(arena, DType.BF16, ReduceCall.outputShape(o.getLast())));
            }
            try (LoopbackCall call = engine.prepare(o, lse, out, LseMode.BASE2, stream)) {
                double us = measure(c, call::launch);
                double floor = graphMicros(call::launchEmpty, callsPerGraph(c));
                call.checkTimeouts();
                call.readOutputs();
                double err = 0;
                for (int r = 0; r < c.cp(); r++) {
                    err = Math.max(err, Fp64Oracle.relativeError(out.get(r),
                            Fp64Oracle.reduce(o, lse, r, LseMode.BASE2)));
                }
                double[] host = c.mode() == Mode.EAGER ? hostCost(call) : new double[] {Double.NaN, Double.NaN};
                return new Result(c, us, floor, byteFloorMicros(c), err, host[0], host[1]);
            }
        }
    }

    static int callsPerGraph(Case c) {
        return switch (c.mode()) {
            case EAGER, GRAPH -> 1;
            case GRAPH_50 -> GRAPH_50_CALLS;
            case LAYER -> LAYER_CALLS;
        };
    }

    /** µs per call in the case's mode; with L2 flushed, minus the same structure of flushes alone. */
    private double measure(Case c, Runnable launch) {
        Runnable one = c.flushL2() ? () -> {
            flush.fillAsync((byte) 1, stream);
            launch.run();
        } : launch;
        double us = modeMicros(c, one);
        if (c.flushL2()) {
            us -= modeMicros(c, () -> flush.fillAsync((byte) 1, stream));
        }
        return us;
    }

    private double modeMicros(Case c, Runnable one) {
        return switch (c.mode()) {
            case EAGER -> medianMillis(() -> repeat(one, settings.eagerCalls()), settings.warmup(),
                    settings.samples()) * 1e3 / settings.eagerCalls();
            case GRAPH -> {
                try (CudaGraph g = CudaGraph.capture(stream, one)) {
                    yield medianMillis(() -> repeat(() -> g.launch(stream), settings.graphReplays()),
                            settings.warmup(), settings.samples()) * 1e3 / settings.graphReplays();
                }
            }
            case GRAPH_50, LAYER -> graphMicros(one, callsPerGraph(c));
        };
    }

    /** µs per call of {@code calls} calls captured in one graph, replayed once per sample. */
    private double graphMicros(Runnable one, int calls) {
        try (CudaGraph g = CudaGraph.capture(stream, () -> repeat(one, calls))) {
            return medianMillis(() -> g.launch(stream), settings.warmup(), settings.samples()) * 1e3 / calls;
        }
    }

    private static void repeat(Runnable r, int times) {
        for (int i = 0; i < times; i++) {
            r.run();
        }
    }

    /** Median over samples of the CUDA-event time of {@code work}, after {@code warmup} unmeasured runs. */
    private double medianMillis(Runnable work, int warmup, int samples) {
        return device.call(() -> {
            for (int i = 0; i < warmup; i++) {
                work.run();
            }
            Cuda.check(JCudaDriver.cuStreamSynchronize(stream.handle()), "cuStreamSynchronize");
            double[] ms = new double[samples];
            try (CudaEvent start = new CudaEvent(device); CudaEvent end = new CudaEvent(device)) {
                for (int s = 0; s < samples; s++) {
                    start.record(stream);
                    work.run();
                    end.record(stream);
                    ms[s] = CudaEvent.elapsedMillis(start, end);
                }
            }
            Arrays.sort(ms);
            return ms[samples / 2];
        });
    }

    /**
     * Host cost of one eager launch from Java, µs: the op's launch and the bare empty cooperative launch through the
     * same binding (time to queue a batch of launches, medians of samples).
     */
    private double[] hostCost(LoopbackCall call) {
        return device.call(() -> new double[] {hostMicros(call::launch), hostMicros(call::launchEmpty)});
    }

    private double hostMicros(Runnable launch) {
        int batch = 20;
        double[] us = new double[settings.samples()];
        for (int s = 0; s < us.length; s++) {
            Cuda.check(JCudaDriver.cuStreamSynchronize(stream.handle()), "cuStreamSynchronize");
            long t0 = System.nanoTime();
            repeat(launch, batch);
            us[s] = (System.nanoTime() - t0) / 1e3 / batch;
        }
        Cuda.check(JCudaDriver.cuStreamSynchronize(stream.handle()), "cuStreamSynchronize");
        Arrays.sort(us);
        return us[us.length / 2];
    }

    /**
     * The byte floor of one call, µs: inputs read once, LL128 lines (data and LSE) written once and read once, outputs
     * written once, for all cp ranks, at the measured copy bandwidth.
     */
    public double byteFloorMicros(Case c) {
        return bytesPerCall(c) / copyBytesPerSecond * 1e6;
    }

    static double bytesPerCall(Case c) {
        long rows = (long) c.batch() * c.heads();
        RowLayout row = RowLayout.of(c.headDim(), DType.BF16);
        double inputs = rows * c.cp() * ((double) row.dataBytes() + Float.BYTES);
        double lines = 2.0 * rows * c.cp() * row.rowBytes();
        double outputs = (double) rows * row.dataBytes();
        return c.cp() * (inputs + lines + outputs);
    }

    /** Runs every case, reporting each result to {@code sink} as it comes. */
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
        flush.close();
        stream.close();
    }
}
