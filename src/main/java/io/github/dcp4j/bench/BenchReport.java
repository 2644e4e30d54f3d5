package io.github.dcp4j.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.github.dcp4j.op.Crossovers;
import io.github.dcp4j.op.Variant;
import io.github.dcp4j.reference.Fp64Oracle;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/** The benchmark's files: the peer's figures read in, the results written out as CSV and JSON. */
public final class BenchReport {
    private BenchReport() {
    }

    /**
     * A peer's µs per call by batch, from a CSV whose rows start with batch,us_per_call (after a header line).
     *
     * @param file the peer's CSV
     * @return µs per call by batch
     * @throws IOException where the file cannot be read
     */
    public static Map<Integer, Double> readPeer(Path file) throws IOException {
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
            + "max_rel_err,variant,unfused_us,unfused_ratio";

    /**
     * The results as CSV, one row per case, with the peer of the same batch where there is one.
     *
     * @param file    the CSV to write (whole or not at all)
     * @param results the benchmark's results
     * @param peer    the peer's µs per call by batch (empty for none)
     * @throws IOException where the file cannot be written
     */
    public static void writeCsv(Path file, List<Benchmark.Result> results, Map<Integer, Double> peer)
            throws IOException {
        List<String> lines = new ArrayList<>();
        lines.add(CSV_HEADER);
        for (Benchmark.Result r : results) {
            Double p = peerFor(r, peer);
            Double u = unfusedFor(r, results);
            lines.add(String.join(",", r.c().mode().spelling(), "" + r.c().batch(), "" + r.c().heads(),
                    "" + r.c().headDim(), "" + r.c().cp(), r.c().inputName(),
                    r.c().flushL2() ? "flushed" : "hot", "" + r.usPerCall(), "" + r.launchFloorUs(),
                    "" + r.launchRatio(), "" + r.byteFloorUs(), "" + r.byteRatio(), p == null ? "" : "" + p,
                    p == null ? "" : "" + r.usPerCall() / p, "" + r.hostUsPerLaunch(), "" + r.hostUsPerEmptyLaunch(),
                    "" + r.maxRelativeError(), r.variantLabel(), u == null ? "" : "" + u,
                    u == null ? "" : "" + r.usPerCall() / u));
        }
        Files.write(file, lines);
    }

    /**
     * The peer's figure a result is compared with: layer mode, L2 hot, the same batch; else null.
     *
     * @param r    a result
     * @param peer the peer's µs per call by batch
     * @return the peer's µs per call, or null
     */
    public static Double peerFor(Benchmark.Result r, Map<Integer, Double> peer) {
        return r.c().mode() == Benchmark.Mode.LAYER && !r.c().flushL2() ? peer.get(r.c().batch()) : null;
    }

    /**
     * The µs per call of the unfused variant on the same case (the same inputs, the same run), where the run measured
     * it and {@code r} is another variant's; else null.
     *
     * @param r       a result
     * @param results every result of the run
     * @return unfused's µs per call, or null
     */
    public static Double unfusedFor(Benchmark.Result r, List<Benchmark.Result> results) {
        if (r.c().variant() == Variant.UNFUSED) {
            return null;
        }
        for (Benchmark.Result u : results) {
            if (u.c().variant() == Variant.UNFUSED && u.c().sameInputs(r.c())) {
                return u.usPerCall();
            }
        }
        return null;
    }

    /**
     * Auto's crossovers from a run of several variants ({@code bench --variants ... --tune FILE}): at each batch of
     * the layer mode with L2 hot and host inputs, the fastest variant other than auto, at that batch's bytes per
     * rank; consecutive batches with the same winner merged (Crossovers.fromFastest). A row whose outputs were found
     * wrong (relative error above {@link Fp64Oracle#TOLERANCE}) never wins.
     *
     * @param results every result of the run
     * @param source  how they were measured, for the file's comment and messages
     * @return the crossovers
     * @throws IllegalArgumentException where the run has no such rows of two variants or more
     */
    public static Crossovers tune(List<Benchmark.Result> results, String source) {
        Map<Integer, Benchmark.Result> fastest = new TreeMap<>();
        Set<Variant> measured = new HashSet<>();
        for (Benchmark.Result r : results) {
            Benchmark.Case c = r.c();
            if (c.mode() != Benchmark.Mode.LAYER || c.flushL2() || c.deviceInputs() || c.variant() == Variant.AUTO
                    || !Double.isFinite(r.usPerCall()) || r.maxRelativeError() > Fp64Oracle.TOLERANCE) {
                continue;
            }
            measured.add(c.variant());
            fastest.merge(c.batch(), r, (a, b) -> b.usPerCall() < a.usPerCall() ? b : a);
        }
        if (measured.size() < 2) {
            throw new IllegalArgumentException("--tune needs layer-mode rows with L2 hot and host inputs of at least"
                    + " two variants other than auto; got " + measured);
        }
        List<Crossovers.Step> steps = new ArrayList<>();
        for (Benchmark.Result r : fastest.values()) {
            steps.add(new Crossovers.Step(r.c().variant(), r.c().bytesPerRank()));
        }
        return Crossovers.fromFastest(steps, source);
    }

    /**
     * The results as JSON with the device, the date and the copy bandwidth of the run.
     *
     * @param file               the JSON to write (whole or not at all)
     * @param results            the benchmark's results
     * @param peer               the peer's µs per call by batch
     * @param device             the GPU, as the report names it
     * @param when               the run's date and time
     * @param copyBytesPerSecond the measured copy bandwidth
     * @throws IOException where the file cannot be written
     */
    public static void writeJson(Path file, List<Benchmark.Result> results, Map<Integer, Double> peer,
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
            n.put("variant", r.variantLabel());
            Double u = unfusedFor(r, results);
            if (u != null) {
                n.put("unfused_us", u);
            }
        }
        mapper.writerWithDefaultPrettyPrinter().writeValue(file.toFile(), root);
    }
}
