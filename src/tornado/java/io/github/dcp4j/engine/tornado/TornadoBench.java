package io.github.dcp4j.engine.tornado;

import io.github.dcp4j.bench.CaseMatrix;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.engine.cpu.CpuEngine;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.reference.RandomInputs;

import java.io.IOException;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * The TornadoVM engine's benchmark row at the layer shape (cp 8, 16 heads per rank, head_dim 512, bf16, base 2,
 * packed host inputs): per batch, with and without TornadoVM's CUDA graphs, the host time of one call (one
 * {@code execute()}: the inputs' copy to the GPU, five kernels, the outputs' copy back; median of samples, each the
 * mean of {@code calls} back-to-back calls) and, from TornadoVM's profiler in a second group, the device time of the
 * graph's kernels, of the copies in and out, and TornadoVM's own total. Every row first checks its outputs against the
 * CPU engine bit for bit. A row that fails is reported and the others still run; the exit status is then 1.
 *
 * <pre>TornadoBench [--batches=1,16,256] [--samples=20] [--calls=20] [--csv=FILE] [--profile-log=FILE]</pre>
 * The merge is the one {@code -Ddcp4j.tornado.merge} names (the engine's own by default).
 */
public final class TornadoBench {
    private static final int CP = 8;
    private static final Duration TIMEOUT = Duration.ofSeconds(10);
    /** Calls before the samples: TornadoVM compiles at the first, and the GPU clocks settle. */
    private static final int WARMUP = 20;
    private static final String HEADER = "engine,merge,batch,cuda_graph,host_us_per_call,kernels_us,copy_in_us,"
            + "copy_out_us,tornado_total_us,bit_exact";

    private TornadoBench() {
    }

    /** One row's results, in microseconds. */
    private record Row(String merge, int batch, boolean cudaGraph, double hostUs, double kernelsUs, double copyInUs,
                       double copyOutUs, double totalUs, boolean bitExact) {
        String csv() {
            return String.format(Locale.ROOT, "tornado,%s,%d,%b,%.2f,%.2f,%.2f,%.2f,%.2f,%b", merge, batch,
                    cudaGraph, hostUs, kernelsUs, copyInUs, copyOutUs, totalUs, bitExact);
        }
    }

    /**
     * Runs the rows and prints them as CSV.
     *
     * @param args {@code --batches=}, {@code --samples=}, {@code --calls=}, {@code --csv=}, {@code --profile-log=}
     * @throws IOException where a file cannot be written
     */
    public static void main(String[] args) throws IOException {
        int[] batches = {1, 16, 256};
        int samples = 20;
        int calls = 20;
        Path csv = null;
        Path profileLog = null;
        for (String a : args) {
            String value = a.substring(a.indexOf('=') + 1);
            if (a.startsWith("--batches=")) {
                batches = Arrays.stream(value.split(",")).mapToInt(Integer::parseInt).toArray();
            } else if (a.startsWith("--samples=")) {
                samples = Integer.parseInt(value);
            } else if (a.startsWith("--calls=")) {
                calls = Integer.parseInt(value);
            } else if (a.startsWith("--csv=")) {
                csv = Path.of(value);
            } else if (a.startsWith("--profile-log=")) {
                profileLog = Path.of(value);
            } else {
                throw new IllegalArgumentException("unknown argument '" + a + "'; expected --batches=, --samples=,"
                        + " --calls=, --csv=, --profile-log=");
            }
        }
        PrintStream out = System.out;
        MergeVariant.Named merge = MergeVariant.fromSystemProperty();
        out.printf("# tornado bench: cp %d, heads %d, head_dim %d, bf16, base2, packed host inputs; merge %s;"
                        + " %d samples x %d calls%n", CP, CaseMatrix.LAYER_HEADS, CaseMatrix.LAYER_HEAD_DIM,
                merge.name(), samples, calls);
        out.println(HEADER);
        List<String> lines = new ArrayList<>(List.of(HEADER));
        StringBuilder profiles = new StringBuilder();
        int failed = 0;
        for (int batch : batches) {
            for (boolean cudaGraph : new boolean[] {false, true}) {
                try {
                    Row row = run(merge, batch, cudaGraph, samples, calls, profiles);
                    out.println(row.csv());
                    lines.add(row.csv());
                    if (!row.bitExact()) {
                        out.printf("# batch %d cuda_graph %b failed: outputs differ from the CPU engine's%n", batch,
                                cudaGraph);
                        failed++;
                    }
                } catch (RuntimeException e) {
                    out.printf("# batch %d cuda_graph %b failed: %s%n", batch, cudaGraph, e);
                    e.printStackTrace(out);
                    failed++;
                }
                out.flush();
            }
        }
        if (csv != null) {
            Files.write(csv, lines);
        }
        if (profileLog != null) {
            Files.writeString(profileLog, profiles);
        }
        if (failed > 0) {
            out.printf("# %d row(s) failed%n", failed);
            System.exit(1);
        }
    }

    private static Row run(MergeVariant.Named merge, int batch, boolean cudaGraph, int samples, int calls,
                           StringBuilder profiles) {
        WorkspaceSpec spec = new WorkspaceSpec(batch, CaseMatrix.LAYER_HEADS, CP, CaseMatrix.LAYER_HEAD_DIM,
                DType.BF16);
        try (Arena arena = Arena.ofShared()) {
            SplittableRandom random = new SplittableRandom(2026L + batch);
            List<TensorView> o = new ArrayList<>();
            List<TensorView> lse = new ArrayList<>();
            for (int r = 0; r < CP; r++) {
                RandomInputs in = RandomInputs.attention(arena, random.split(), batch, CaseMatrix.LAYER_HEADS, CP,
                        CaseMatrix.LAYER_HEAD_DIM, DType.BF16, 3.0);
                o.add(in.partialO().contiguousCopy(arena));
                lse.add(in.partialLse().contiguousCopy(arena));
            }
            List<TensorView> expected;
            try (CpuEngine cpu = CpuEngine.open(spec)) {
                expected = cpu.reduceAll(o, lse, LseMode.BASE2);
            }
            double hostUs;
            boolean exact = true;
            try (TornadoEngine tornado = TornadoEngine.open(spec, TIMEOUT,
                    new TornadoEngine.Options(merge, cudaGraph, false))) {
                List<TensorView> out = outputs(arena, o);
                try (LocalGroup.PreparedCall call = tornado.prepare(o, lse, out, LseMode.BASE2)) {
                    for (int i = 0; i < WARMUP; i++) {
                        call.run();
                    }
                    call.readOutputs();
                    for (int r = 0; r < CP; r++) {
                        exact &= out.get(r).memory().mismatch(expected.get(r).memory()) == -1;
                    }
                    double[] perCall = new double[samples];
                    for (int s = 0; s < samples; s++) {
                        long t0 = System.nanoTime();
                        for (int i = 0; i < calls; i++) {
                            call.run();
                        }
                        perCall[s] = (System.nanoTime() - t0) / 1e3 / calls;
                    }
                    hostUs = median(perCall);
                }
            }
            try (TornadoEngine profiled = TornadoEngine.open(spec, TIMEOUT,
                    new TornadoEngine.Options(merge, cudaGraph, true))) {
                List<TensorView> out = outputs(arena, o);
                try (LocalGroup.PreparedCall call = profiled.prepare(o, lse, out, LseMode.BASE2)) {
                    for (int i = 0; i < WARMUP; i++) {
                        call.run();
                    }
                    double[][] p = new double[4][samples];
                    for (int s = 0; s < samples; s++) {
                        call.run();
                        TornadoEngine.Profile profile = profiled.lastProfile();
                        p[0][s] = profile.kernelNs() / 1e3;
                        p[1][s] = profile.copyInNs() / 1e3;
                        p[2][s] = profile.copyOutNs() / 1e3;
                        p[3][s] = profile.totalNs() / 1e3;
                    }
                    profiles.append("# batch ").append(batch).append(" cuda_graph ").append(cudaGraph).append('\n')
                            .append(profiled.lastProfileLog()).append('\n');
                    return new Row(merge.name(), batch, cudaGraph, hostUs, median(p[0]), median(p[1]), median(p[2]),
                            median(p[3]), exact);
                }
            }
        }
    }

    private static List<TensorView> outputs(Arena arena, List<TensorView> partialO) {
        List<TensorView> out = new ArrayList<>();
        for (TensorView v : partialO) {
            out.add(TensorView.allocate(arena, v.dtype(), ReduceCall.outputShape(v)));
        }
        return out;
    }

    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }
}
