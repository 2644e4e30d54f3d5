package io.github.dcp4j.cli;

import io.github.dcp4j.bench.BenchReport;
import io.github.dcp4j.bench.Benchmark;
import io.github.dcp4j.bench.CaseMatrix;
import io.github.dcp4j.bench.OpenedDeployment;
import io.github.dcp4j.io.WholeFile;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.op.Crossovers;
import io.github.dcp4j.op.Variant;
import io.github.dcp4j.reference.Fp64Oracle;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;

@Command(name = "bench", mixinStandardHelpOptions = true,
        description = {
            "Times the op with CUDA events (--ranks: loopback = all cp ranks in one launch on one GPU; threads = one"
                + " launch per rank from this JVM, rank r on GPU r mod the GPU count; processes = one rank per"
                + " process over CUDA IPC, started by `dcp4j launch --nproc N -- bench --ranks processes`, where the"
                + " time of a case is the maximum over ranks of each rank's median): eager (N calls per sample), graph"
                + " (1 call captured, replayed N times), graph-50 (50 calls in one graph) on the reference shapes"
                + " (batch x heads x head_dim 1x2x64, 1x8x128, 4x8x128, 16x8x128, packed input), and layer (60 calls"
                + " per graph at the DeepSeek-V2 decode shape: 16 heads per rank, head_dim 512, strided input) over the"
                + " batches; bf16, L2 hot and flushed.",
            "Each row is compared with its floors, measured in the same run: the launch floor (the empty kernel"
                + " launched as the op is, in a CUDA graph) and the byte floor (inputs read once + LL128 lines written"
                + " and read once + outputs written once, at the measured device-to-device copy bandwidth).",
            "--variants runs every protocol variant named (ll128, ll, simple, unfused, auto) on the same inputs in one"
                + " run, each row with its own floors (the launch floor as many empty kernels as the variant launches;"
                + " the byte floor with the workspace bytes as the variant moves them) and its ratio to unfused's row"
                + " (/unfus); --tune FILE writes auto's crossovers from the layer rows (the fastest variant at each"
                + " batch), the file src/main/resources/io/github/dcp4j/op/crossovers-sm_XX.txt ships.",
            "Progress goes to stderr, the table to stdout."})
final class BenchCommand implements Callable<Integer> {
    @Option(names = "--modes", split = ",", defaultValue = "eager,graph,graph-50,layer",
            description = "Modes to run, default ${DEFAULT-VALUE}.")
    List<String> modes;

    @Option(names = "--batches", split = ",", defaultValue = "1,2,4,8,16,32,64,128,256",
            description = "Layer-mode batches, default ${DEFAULT-VALUE}.")
    List<Integer> batches;

    @Option(names = "--cp", defaultValue = "8",
            description = "Ranks, default ${DEFAULT-VALUE} (with --ranks processes: the number of processes).")
    int cp;

    @Option(names = "--ranks", defaultValue = "loopback",
            description = "Where the ranks run: loopback, threads or processes, default ${DEFAULT-VALUE}.")
    String ranks;

    @Option(names = "--timeout", defaultValue = "10s", converter = DurationConverter.class,
            description = "How long a rank waits for a peer, default ${DEFAULT-VALUE}.")
    Duration timeout;

    @Option(names = "--l2", split = ",", defaultValue = "hot,flushed",
            description = "hot, flushed or both (default); flushed cases are left out where processes share a GPU.")
    List<String> l2;

    @Option(names = "--inputs", split = ",", defaultValue = "host",
            description = "Where the inputs and outputs live: host (views copied to the GPU once per prepared call)"
                    + " and/or device (device tensors used in place; eager rows then time the whole call). Device"
                    + " inputs are measured in loopback. Default ${DEFAULT-VALUE}.")
    List<String> inputs;

    @Option(names = {"--variants", "--variant"}, split = ",", defaultValue = "ll128",
            converter = VariantConverter.class, paramLabel = "V[,V...]",
            description = "Protocol variants to run on the same inputs: ll128, ll, simple, unfused, auto (loopback"
                    + " only for all but ll128); default ${DEFAULT-VALUE}.")
    List<Variant> variants;

    @Option(names = "--tune", paramLabel = "FILE",
            description = "Write auto's crossovers (VARIANT FROM_BYTES_PER_RANK per line) from the layer rows with L2"
                    + " hot: the fastest variant other than auto at each batch. Needs --modes layer, --l2 hot and two"
                    + " variants or more.")
    Path tune;

    @Option(names = "--samples", defaultValue = "30", description = "Samples per case, default ${DEFAULT-VALUE}.")
    int samples;

    @Option(names = "--calls", defaultValue = "50",
            description = "Eager calls / graph replays per sample, default ${DEFAULT-VALUE}.")
    int calls;

    @Option(names = "--csv", paramLabel = "FILE", description = "Also write the results as CSV.")
    Path csv;

    @Option(names = "--json", paramLabel = "FILE", description = "Also write the results as JSON.")
    Path json;

    @Option(names = "--plot", paramLabel = "FILE.png",
            description = "Also draw the layer mode with L2 hot (µs per call against batch, log-log, with the peer and"
                    + " the floors) as a PNG; needs a runtime with java.desktop (not the GPU bundle's: plot its CSV"
                    + " with `dcp4j plot`).")
    Path plot;

    @Option(names = "--peer-csv", paramLabel = "FILE",
            description = "CSV of a peer (batch,us_per_call,...): src/bench/unfused_loopback.py's (the unfused path) on"
                    + " one GPU, src/bench/nccl_a2a.py's (the NCCL path) on several; adds its time and dcp4j's ratio"
                    + " to it to the layer rows with L2 hot.")
    Path peerCsv;

    @Spec
    CommandSpec spec;

    /** The cases the options ask for, after checking every option: a bad value is a usage error (exit code 2). */
    private List<Benchmark.Case> checkArguments() {
        CommandLine cli = spec.commandLine();
        if (samples < 1) {
            throw new ParameterException(cli, "--samples must be >= 1; got " + samples);
        }
        if (calls < 1) {
            throw new ParameterException(cli, "--calls must be >= 1; got " + calls);
        }
        if (cp < 1 || cp > Ll128.MAX_RANKS) {
            throw new ParameterException(cli, "--cp must be in [1, " + Ll128.MAX_RANKS + "]; got " + cp);
        }
        if (!OpenedDeployment.KINDS.contains(ranks)) {
            throw new ParameterException(cli, "--ranks must be one of " + String.join(", ", OpenedDeployment.KINDS)
                    + "; got '" + ranks + "'");
        }
        List<Benchmark.Case> wanted;
        try {
            wanted = CaseMatrix.cases(modes, batches, cp, l2, inputs, variants);
        } catch (IllegalArgumentException e) {
            throw new ParameterException(cli, e.getMessage(), e);  // it names the option and the value
        }
        if (!ranks.equals("loopback") && !variants.equals(List.of(Variant.LL128))) {
            throw new ParameterException(cli, "--variants other than ll128 are measured with --ranks loopback; got"
                    + " --ranks " + ranks + " --variants " + variants);
        }
        if (tune != null && (variants.stream().filter(v -> v != Variant.AUTO).count() < 2
                || wanted.stream().noneMatch(c -> c.mode() == Benchmark.Mode.LAYER && !c.flushL2()
                && !c.deviceInputs()))) {
            throw new ParameterException(cli, "--tune picks among the variants' layer rows with L2 hot and host inputs:"
                    + " add layer to --modes, hot to --l2, host to --inputs and two variants or more (other than auto)"
                    + " to --variants");
        }
        if (plot != null && wanted.stream()
                .noneMatch(c -> c.mode() == Benchmark.Mode.LAYER && !c.flushL2() && !c.deviceInputs())) {
            throw new ParameterException(cli, "--plot draws the layer mode with L2 hot and host inputs: add layer to"
                    + " --modes, hot to --l2 and host to --inputs");
        }
        if (!ranks.equals("loopback") && wanted.stream().anyMatch(Benchmark.Case::deviceInputs)) {
            throw new ParameterException(cli, "--inputs device is measured with --ranks loopback; got --ranks "
                    + ranks);
        }
        return wanted;
    }

    @Override
    public Integer call() throws IOException {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        List<Benchmark.Case> wanted = checkArguments();
        if (plot != null) {
            DesktopRuntime.require();
        }
        Map<Integer, Double> peer = peerCsv == null ? Map.of() : BenchReport.readPeer(peerCsv);
        try (OpenedDeployment where = OpenedDeployment.open(ranks, cp, timeout, Log.to(err));
             Benchmark bench = new Benchmark(where.deployment(), new Benchmark.Settings(samples, 10, calls, calls),
                     err)) {
            Optional<String> unsound = where.deployment().flushedCasesUnsound();
            List<Benchmark.Case> cases = unsound.isEmpty() ? wanted
                    : wanted.stream().filter(c -> !c.flushL2()).toList();
            if (cases.isEmpty()) {
                throw new IllegalArgumentException("--l2 flushed cannot be measured with --ranks " + ranks + " here: "
                        + unsound.orElseThrow());
            }
            boolean reports = where.deployment().reports();
            PrintWriter table = reports ? out : new PrintWriter(Writer.nullWriter());
            String when = ZonedDateTime.now().toString();
            String device = where.deployment().devices().getFirst().toString();
            table.printf("# dcp4j bench, %s, %s, bf16, cp %d, ranks: %s (%s), copy bandwidth %.0f GB/s (read + write),"
                    + " µs per call: max over ranks of each rank's median%n", when, device, cp,
                    where.deployment().name(), where.deployment().describe(), bench.copyBytesPerSecond() / 1e9);
            table.printf("%-8s %5s %5s %5s %-11s %-7s %-13s %9s %8s %7s %8s %7s %8s %7s %7s %11s %9s%n", "mode",
                    "batch", "heads", "hdim", "input", "L2", "variant", "us/call", "launch", "x", "bytes", "x", "peer",
                    "x", "/unfus", "host", "rel.err");
            if (cases.size() < wanted.size()) {
                table.println("# L2-flushed cases left out: " + unsound.orElseThrow());
            }
            table.flush();
            List<Benchmark.Result> done = new ArrayList<>();
            List<Benchmark.Result> results = bench.runAll(cases, r -> {
                done.add(r);
                Double p = BenchReport.peerFor(r, peer);
                Double u = BenchReport.unfusedFor(r, done);
                table.printf("%-8s %5d %5d %5d %-11s %-7s %-13s %9.2f %8.2f %7.2f %8.2f %7.2f %8s %7s %7s %11s"
                                + " %9.1e%n",
                        r.c().mode().spelling(), r.c().batch(), r.c().heads(), r.c().headDim(),
                        r.c().inputName(), r.c().flushL2() ? "flushed" : "hot", r.variantLabel(), r.usPerCall(),
                        r.launchFloorUs(), r.launchRatio(), r.byteFloorUs(), r.byteRatio(),
                        p == null ? "-" : String.format("%.2f", p), p == null ? "-" : String.format("%.2f",
                                r.usPerCall() / p),
                        u == null ? "-" : String.format("%.2f", r.usPerCall() / u),
                        Double.isNaN(r.hostUsPerLaunch()) ? "-" : String.format("%.2f/%.2f", r.hostUsPerLaunch(),
                                r.hostUsPerEmptyLaunch()), r.maxRelativeError());
                table.flush();
            });
            table.println("# launch: empty kernel launched as the op (once per kernel of the variant), in a CUDA graph;"
                    + " bytes: byte floor (the variant's workspace bytes); x: ratio; peer: µs per call from --peer-csv"
                    + " (unfused loopback, or the NCCL path); /unfus: µs per call over the unfused variant's on the"
                    + " same inputs; variant: auto:V where auto picked V; host (eager): µs to queue one op launch /"
                    + " one bare empty launch");
            table.println("# rel.err: NaN where not checked (processes mode checks batches up to 32; `check` covers the"
                    + " rest)");
            table.flush();
            if (csv != null && reports) {
                BenchReport.writeCsv(csv, results, peer);
            }
            if (json != null && reports) {
                BenchReport.writeJson(json, results, peer, device, when, bench.copyBytesPerSecond());
            }
            boolean accurate = results.stream().allMatch(r -> Double.isNaN(r.maxRelativeError())
                    || r.maxRelativeError() <= Fp64Oracle.TOLERANCE);
            if (tune != null && reports && !accurate) {
                err.println("auto's crossovers not written to " + tune + ": a variant's outputs are wrong (below)");
            }
            if (tune != null && reports && accurate) {
                Crossovers crossovers = BenchReport.tune(results, "bench --tune, " + device + ", " + when);
                WholeFile.write(tune, o -> o.write(crossovers.format("measured by `dcp4j bench --variants "
                        + variants.stream().map(Variant::spelling).collect(Collectors.joining(",")) + " --tune` on "
                        + device + ", " + when + ": layer mode, L2 hot, cp " + cp).getBytes(StandardCharsets.UTF_8)));
                err.println("auto's crossovers written to " + tune + " (ship it as src/main/resources/io/github/dcp4j/"
                        + "op/" + Crossovers.resourceName(where.deployment().devices().getFirst().computeCapability())
                        + ")");
            }
            if (plot != null && reports) {
                LayerPlot.write(plot, "dcp4j, layer mode, " + device + ", " + when.substring(0, 16),
                        LayerPlot.of(results, peer));
            }
            if (!accurate) {
                err.println("FAILED: some case's output differs from the fp64 oracle by more than "
                        + Fp64Oracle.TOLERANCE);
                return 1;
            }
            return 0;
        }
    }
}
