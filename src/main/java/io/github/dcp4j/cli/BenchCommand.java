package io.github.dcp4j.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.github.dcp4j.bench.Benchmark;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.Writer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;

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

    @Option(names = "--samples", defaultValue = "30", description = "Samples per case, default ${DEFAULT-VALUE}.")
    int samples;

    @Option(names = "--calls", defaultValue = "50",
            description = "Eager calls / graph replays per sample, default ${DEFAULT-VALUE}.")
    int calls;

    @Option(names = "--csv", paramLabel = "FILE", description = "Also write the results as CSV.")
    Path csv;

    @Option(names = "--json", paramLabel = "FILE", description = "Also write the results as JSON.")
    Path json;

    @Option(names = "--peer-csv", paramLabel = "FILE",
            description = "CSV of a peer (batch,us_per_call,...): unfused_loopback.py's on one GPU, nccl_a2a.py's (the"
                    + " NCCL path) on several; adds its time and dcp4j's ratio to it to the layer rows with L2 hot.")
    Path peerCsv;

    @Spec
    CommandSpec spec;

    static final int[][] REFERENCE_SHAPES = {{1, 2, 64}, {1, 8, 128}, {4, 8, 128}, {16, 8, 128}};
    static final int LAYER_HEADS = 16;
    static final int LAYER_HEAD_DIM = 512;

    @Override
    public Integer call() throws IOException {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        if (samples < 1 || calls < 1) {
            throw new IllegalArgumentException("--samples and --calls must be >= 1; got " + samples + ", " + calls);
        }
        Map<Integer, Double> peer = peerCsv == null ? Map.of() : readPeer(peerCsv);
        List<Benchmark.Case> wanted = cases();
        if (!ranks.equals("loopback") && wanted.stream().anyMatch(Benchmark.Case::deviceInputs)) {
            throw new IllegalArgumentException("--inputs device is measured with --ranks loopback; got --ranks "
                    + ranks);
        }
        try (Ranks where = Ranks.open(ranks, cp, timeout, err);
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
            table.printf("%-8s %5s %5s %5s %-11s %-7s %9s %8s %7s %8s %7s %8s %7s %11s %9s%n", "mode", "batch",
                    "heads",
                    "hdim", "input", "L2", "us/call", "launch", "x", "bytes", "x", "peer", "x", "host", "rel.err");
            if (cases.size() < wanted.size()) {
                table.println("# L2-flushed cases left out: " + unsound.orElseThrow());
            }
            table.flush();
            List<Benchmark.Result> results = bench.runAll(cases, r -> {
                Double p = r.c().mode() == Benchmark.Mode.LAYER && !r.c().flushL2() ? peer.get(r.c().batch()) : null;
                table.printf("%-8s %5d %5d %5d %-11s %-7s %9.2f %8.2f %7.2f %8.2f %7.2f %8s %7s %11s %9.1e%n",
                        r.c().mode().spelling(), r.c().batch(), r.c().heads(), r.c().headDim(),
                        r.c().inputName(), r.c().flushL2() ? "flushed" : "hot", r.usPerCall(),
                        r.launchFloorUs(), r.launchRatio(), r.byteFloorUs(), r.byteRatio(),
                        p == null ? "-" : String.format("%.2f", p), p == null ? "-" : String.format("%.2f",
                                r.usPerCall() / p),
                        Double.isNaN(r.hostUsPerLaunch()) ? "-" : String.format("%.2f/%.2f", r.hostUsPerLaunch(),
                                r.hostUsPerEmptyLaunch()), r.maxRelativeError());
                table.flush();
            });
            table.println("# launch: empty kernel launched as the op, in a CUDA graph; bytes: byte floor; x: ratio;"
                    + " peer: µs per call from --peer-csv (unfused loopback, or the NCCL path); host (eager): µs to"
                    + " queue one op launch / one bare empty launch");
            table.println("# rel.err: NaN where not checked (processes mode checks batches up to 32; `check` covers the"
                    + " rest)");
            table.flush();
            if (csv != null && reports) {
                writeCsv(csv, results, peer);
            }
            if (json != null && reports) {
                writeJson(json, results, peer, device, when, bench.copyBytesPerSecond());
            }
            boolean accurate = results.stream().allMatch(r -> Double.isNaN(r.maxRelativeError())
                    || r.maxRelativeError() <= MainJob.TOLERANCE);
            if (!accurate) {
                err.println("FAILED: some case's output differs from the fp64 oracle by more than " + MainJob.TOLERANCE);
                return 1;
            }
            return 0;
        }
    }

    private List<Benchmark.Case> cases() {
        List<Boolean> flushes = new ArrayList<>();
        for (String s : l2) {
            switch (s) {
                case "hot" -> flushes.add(false);
                case "flushed" -> flushes.add(true);
                default -> throw new IllegalArgumentException("--l2 must be hot and/or flushed; got '" + s + "'");
            }
        }
        List<Boolean> onDevice = new ArrayList<>();
        for (String s : inputs) {
            switch (s) {
                case "host" -> onDevice.add(false);
                case "device" -> onDevice.add(true);
                default -> throw new IllegalArgumentException("--inputs must be host and/or device; got '" + s + "'");
            }
        }
        List<Benchmark.Case> cases = new ArrayList<>();
        for (boolean device : onDevice) {
            casesOf(flushes, device, cases);
        }
        return cases;
    }

    private void casesOf(List<Boolean> flushes, boolean device, List<Benchmark.Case> cases) {
        for (String name : modes) {
            Benchmark.Mode mode = Benchmark.Mode.parse(name);
            for (boolean flush : flushes) {
                if (mode == Benchmark.Mode.LAYER) {
                    for (int b : batches) {
                        if (b < 1) {
                            throw new IllegalArgumentException("--batches must all be >= 1; got " + b);
                        }
                        cases.add(new Benchmark.Case(mode, b, LAYER_HEADS, LAYER_HEAD_DIM, cp, true, flush, device));
                    }
                } else {
                    for (int[] s : REFERENCE_SHAPES) {
                        cases.add(new Benchmark.Case(mode, s[0], s[1], s[2], cp, false, flush, device));
                    }
                }
            }
        }
    }

    private static Map<Integer, Double> readPeer(Path file) throws IOException {
        Map<Integer, Double> peer = new HashMap<>();
        List<String> lines = Files.readAllLines(file);
        for (String line : lines.subList(Math.min(1, lines.size()), lines.size())) {
            String[] cells = line.split(",");
            if (cells.length < 2) {
                throw new IllegalArgumentException(file + ": expected batch,us_per_call,... rows; got '" + line + "'");
            }
            peer.put(Integer.parseInt(cells[0].trim()), Double.parseDouble(cells[1].trim()));
        }
        return peer;
    }

    private static final String CSV_HEADER = "mode,batch,heads,head_dim,cp,input,l2,us_per_call,launch_floor_us,"
            + "launch_ratio,byte_floor_us,byte_ratio,peer_us,peer_ratio,host_us_per_launch,host_us_per_empty_launch,"
            + "max_rel_err";

    private static void writeCsv(Path file, List<Benchmark.Result> results, Map<Integer, Double> peer)
            throws IOException {
        List<String> lines = new ArrayList<>();
        lines.add(CSV_HEADER);
        for (Benchmark.Result r : results) {
            Double p = peerFor(r, peer);
            lines.add(String.join(",", r.c().mode().spelling(), "" + r.c().batch(), "" + r.c().heads(),
                    "" + r.c().headDim(), "" + r.c().cp(), r.c().inputName(),
                    r.c().flushL2() ? "flushed" : "hot", "" + r.usPerCall(), "" + r.launchFloorUs(),
                    "" + r.launchRatio(), "" + r.byteFloorUs(), "" + r.byteRatio(), p == null ? "" : "" + p,
                    p == null ? "" : "" + r.usPerCall() / p, "" + r.hostUsPerLaunch(), "" + r.hostUsPerEmptyLaunch(),
                    "" + r.maxRelativeError()));
        }
        Files.write(file, lines);
    }

    private static Double peerFor(Benchmark.Result r, Map<Integer, Double> peer) {
        return r.c().mode() == Benchmark.Mode.LAYER && !r.c().flushL2() ? peer.get(r.c().batch()) : null;
    }

    private static void writeJson(Path file, List<Benchmark.Result> results, Map<Integer, Double> peer,
                                  String device, String when, double copyBytesPerSecond) throws IOException {
        ObjectMapper mapper = new ObjectMapper();
        ObjectNode root = mapper.createObjectNode();
        root.put("device", device);
        root.put("date", when);
        root.put("copy_bytes_per_second", copyBytesPerSecond);
        ArrayNode rows = root.putArray("results");
        for (Benchmark.Result r : results) {
            ObjectNode n = rows.addObject();
            n.put("mode", r.c().mode().spelling());
            n.put("batch", r.c().batch());
            n.put("heads", r.c().heads());
            n.put("head_dim", r.c().headDim());
            n.put("cp", r.c().cp());
            n.put("input", r.c().inputName());
            n.put("l2", r.c().flushL2() ? "flushed" : "hot");
            n.put("us_per_call", r.usPerCall());
            n.put("launch_floor_us", r.launchFloorUs());
            n.put("byte_floor_us", r.byteFloorUs());
            Double p = peerFor(r, peer);
            if (p != null) {
                n.put("peer_us", p);
            }
            if (!Double.isNaN(r.hostUsPerLaunch())) {
                n.put("host_us_per_launch", r.hostUsPerLaunch());
                n.put("host_us_per_empty_launch", r.hostUsPerEmptyLaunch());
            }
            n.put("max_rel_err", r.maxRelativeError());
        }
        mapper.writerWithDefaultPrettyPrinter().writeValue(file.toFile(), root);
    }
}
