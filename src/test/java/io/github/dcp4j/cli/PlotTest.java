package io.github.dcp4j.cli;

import io.github.dcp4j.bench.BenchReport;
import io.github.dcp4j.bench.Benchmark;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import javax.imageio.ImageIO;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The layer-mode plot: from a benchmark's results and from the CSV the benchmark writes. No GPU. */
class PlotTest {
    @TempDir
    Path dir;

    /** Results of every mode, L2 hot and flushed, with random times, and a peer for some layer batches. */
    private static List<Benchmark.Result> results(SplittableRandom random, Map<Integer, Double> peer) {
        List<Benchmark.Result> results = new ArrayList<>();
        for (Benchmark.Mode mode : Benchmark.Mode.values()) {
            for (int batch = 1; batch <= 256; batch *= 2) {
                for (boolean flushed : new boolean[] {false, true}) {
                    boolean layer = mode == Benchmark.Mode.LAYER;
                    Benchmark.Case c = new Benchmark.Case(mode, batch, layer ? 16 : 8, layer ? 512 : 128, 8, layer,
                            flushed, false);
                    results.add(new Benchmark.Result(c, 1 + 500 * random.nextDouble(), 0.5 + random.nextDouble(),
                            batch * random.nextDouble(), 1e-3 * random.nextDouble(), Double.NaN, Double.NaN));
                }
            }
        }
        for (int batch = 1; batch <= 256; batch *= 4) {
            peer.put(batch, 2 + 300 * random.nextDouble());
        }
        return results;
    }

    @Test
    void theCsvTheBenchmarkWritesPlotsTheSamePointsAsItsResults() throws IOException {
        Map<Integer, Double> peer = new HashMap<>();
        List<Benchmark.Result> results = results(new SplittableRandom(71), peer);
        Path csv = dir.resolve("bench.csv");
        BenchReport.writeCsv(csv, results, peer);
        List<LayerPlot.Point> fromResults = LayerPlot.of(results, peer);
        assertEquals(9, fromResults.size(), "one point per layer batch with L2 hot");
        LayerPlot.Layer read = LayerPlot.readCsv(csv);
        assertEquals(fromResults, read.points());
        assertEquals("cp 8, 16 heads per rank, head_dim 512", read.shape());
        assertTrue(fromResults.stream().anyMatch(p -> Double.isNaN(p.peerUs())), "a batch without a peer stays NaN");
    }

    /** A run of several variants: one line per variant, from the results and from the CSV alike. */
    @Test
    void aRunOfSeveralVariantsPlotsOneLinePerVariant() throws IOException {
        Map<Integer, Double> peer = new HashMap<>();
        List<Benchmark.Result> results = new ArrayList<>();
        SplittableRandom random = new SplittableRandom();
        for (io.github.dcp4j.op.Variant v : io.github.dcp4j.op.Variant.values()) {
            for (int batch = 1; batch <= 64; batch *= 4) {
                Benchmark.Case c = new Benchmark.Case(Benchmark.Mode.LAYER, batch, 16, 512, 8, true, false, false, v);
                results.add(new Benchmark.Result(c, 1 + 100 * random.nextDouble(), 1, batch, 1e-3, Double.NaN,
                        Double.NaN, v == io.github.dcp4j.op.Variant.AUTO ? io.github.dcp4j.op.Variant.LL : v));
            }
        }
        Path csv = dir.resolve("variants.csv");
        BenchReport.writeCsv(csv, results, peer);
        List<LayerPlot.Point> fromResults = LayerPlot.of(results, peer);
        assertEquals(5 * 4, fromResults.size());
        assertEquals(fromResults, LayerPlot.readCsv(csv).points());
        assertEquals(List.of("ll128", "ll", "simple", "unfused", "auto"), fromResults.stream()
                .map(LayerPlot.Point::variant).distinct().toList());
        Path png = dir.resolve("variants.png");
        CliTest.Result r = CliTest.run("plot", "--csv", csv.toString(), "--output", png.toString());
        assertEquals(0, r.exitCode(), r.err());
        assertEquals(LayerPlot.WIDTH, ImageIO.read(png.toFile()).getWidth());
    }

    @Test
    void plotWritesAPngOfTheFiguresSize() throws IOException {
        Map<Integer, Double> peer = new HashMap<>();
        Path csv = dir.resolve("bench.csv");
        BenchReport.writeCsv(csv, results(new SplittableRandom(72), peer), peer);
        Path png = dir.resolve("layer.png");
        CliTest.Result r = CliTest.run("plot", "--csv", csv.toString(), "--output", png.toString());
        assertEquals(0, r.exitCode(), r.err());
        BufferedImage image = ImageIO.read(png.toFile());
        assertEquals(LayerPlot.WIDTH, image.getWidth());
        assertEquals(LayerPlot.HEIGHT, image.getHeight());
        try (var files = Files.list(dir)) {
            assertEquals(List.of("bench.csv", "layer.png"), files.map(p -> p.getFileName().toString()).sorted()
                    .toList(), "no temporary file left beside the plot");
        }
    }

    @Test
    void blankLinesAndUnmeasuredValuesDoNotStopThePlot() throws IOException {
        Map<Integer, Double> peer = new HashMap<>();
        List<Benchmark.Result> results = new ArrayList<>(results(new SplittableRandom(74), peer));
        Benchmark.Case unmeasured = new Benchmark.Case(Benchmark.Mode.LAYER, 512, 16, 512, 8, true, false, false);
        results.add(new Benchmark.Result(unmeasured, Double.NaN, 0.8, Double.NaN, Double.NaN, Double.NaN, Double.NaN));
        Path csv = dir.resolve("bench.csv");
        BenchReport.writeCsv(csv, results, peer);
        Files.writeString(csv, Files.readString(csv) + "\n\n");
        Path png = dir.resolve("layer.png");
        CliTest.Result r = CliTest.run("plot", "--csv", csv.toString(), "--output", png.toString());
        assertEquals(0, r.exitCode(), r.err());
        assertEquals(LayerPlot.WIDTH, ImageIO.read(png.toFile()).getWidth());
    }

    @Test
    void aCsvWithoutLayerRowsIsRefusedAndNothingIsWritten() throws IOException {
        Map<Integer, Double> peer = new HashMap<>();
        List<Benchmark.Result> eagerOnly = results(new SplittableRandom(73), peer).stream()
                .filter(x -> x.c().mode() == Benchmark.Mode.EAGER).toList();
        Path csv = dir.resolve("eager.csv");
        BenchReport.writeCsv(csv, eagerOnly, Map.of());
        Path png = dir.resolve("none.png");
        CliTest.Result r = CliTest.run("plot", "--csv", csv.toString(), "--output", png.toString());
        assertEquals(1, r.exitCode());
        assertTrue(r.err().contains("nothing to plot"), r.err());
        assertFalse(Files.exists(png));
    }

    @Test
    void aCsvThatIsNotTheBenchmarksIsRefusedNamingWhatIsMissing() throws IOException {
        Path csv = dir.resolve("peer.csv");
        Files.writeString(csv, "batch,us_per_call,rel_err\n1,5.1,0.0017\n");
        CliTest.Result r = CliTest.run("plot", "--csv", csv.toString(), "--output", dir.resolve("x.png").toString());
        assertEquals(1, r.exitCode());
        assertTrue(r.err().contains("has no column 'mode'"), r.err());
        CliTest.Result missing = CliTest.run("plot", "--csv", dir.resolve("nope.csv").toString(), "--output",
                dir.resolve("x.png").toString());
        assertEquals(1, missing.exitCode());
        assertTrue(missing.err().contains("is not a regular file"), missing.err());
    }

    @Test
    void benchRefusesAPlotWithoutTheLayerModeBeforeItRuns() {
        CliTest.Result r = CliTest.run("bench", "--modes", "eager", "--plot", dir.resolve("x.png").toString());
        assertEquals(2, r.exitCode(), "a usage error");
        assertTrue(r.err().contains("--plot draws the layer mode"), r.err());
    }
}
