package io.github.dcp4j.cli;

import io.github.dcp4j.bench.Benchmark;
import io.github.dcp4j.io.WholeFile;
import org.jfree.chart.ChartUtils;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.axis.LogAxis;
import org.jfree.chart.axis.NumberTickUnit;
import org.jfree.chart.plot.XYPlot;
import org.jfree.chart.renderer.xy.XYLineAndShapeRenderer;
import org.jfree.data.xy.XYSeries;
import org.jfree.data.xy.XYSeriesCollection;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.Stroke;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.text.DecimalFormat;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.UnaryOperator;

/**
 * The layer mode's figure: µs per call against batch, both axes logarithmic, for dcp4j (one line per protocol variant
 * where the run had several), the peer where the run had one, and the launch and byte floors measured in the same run
 * (docs/PERFORMANCE.md, "Method"; with several variants, at each batch the lowest of their floors: one kernel's
 * launch, the fewest bytes any variant moves), as a PNG.
 */
final class LayerPlot {
    static final int WIDTH = 900;
    static final int HEIGHT = 600;

    /**
     * One batch of one variant of a layer-mode run with L2 hot; {@code peerUs} is NaN where the run had no peer;
     * {@code variant} is the case's (auto, not the variant it picked).
     */
    record Point(String variant, int batch, double dcp4jUs, double peerUs, double launchFloorUs, double byteFloorUs) {
    }

    /** The variant of CSVs written before the benchmark had variants. */
    private static final String DEFAULT_VARIANT = "ll128";

    private LayerPlot() {
    }

    /** The points of {@code results}' layer-mode, L2-hot rows with host inputs, by batch. */
    static List<Point> of(List<Benchmark.Result> results, Map<Integer, Double> peer) {
        List<Point> points = new ArrayList<>();
        for (Benchmark.Result r : results) {
            Benchmark.Case c = r.c();
            if (c.mode() == Benchmark.Mode.LAYER && !c.flushL2() && !c.deviceInputs()) {
                points.add(new Point(c.variant().spelling(), c.batch(), r.usPerCall(),
                        peer.getOrDefault(c.batch(), Double.NaN),
                        r.launchFloorUs(), r.byteFloorUs()));
            }
        }
        return points;
    }

    /**
     * The layer-mode rows of one CSV.
     *
     * @param points the rows' points, by batch
     * @param shape  the rows' shape, as a title names it ("cp 8, 16 heads per rank, head_dim 512"); empty for none
     */
    record Layer(List<Point> points, String shape) {
    }

    /** The layer mode of a CSV that {@code bench --csv} wrote: its L2-hot rows with strided host inputs. */
    static Layer readCsv(Path csv) throws IOException {
        List<String> lines = Files.readAllLines(csv);
        if (lines.isEmpty()) {
            throw new IllegalArgumentException(csv + " is empty: expected a CSV written by `dcp4j bench --csv`");
        }
        List<String> header = Arrays.asList(lines.getFirst().split(",", -1));
        String[] needed = {"mode", "batch", "heads", "head_dim", "cp", "input", "l2", "us_per_call",
            "launch_floor_us", "byte_floor_us", "peer_us"};
        Map<String, Integer> at = new HashMap<>();
        for (String column : needed) {
            if (!header.contains(column)) {
                throw new IllegalArgumentException(csv + " has no column '" + column
                        + "': expected a CSV written by `dcp4j bench --csv`");
            }
            at.put(column, header.indexOf(column));
        }
        List<Point> points = new ArrayList<>();
        String shape = "";
        for (int i = 1; i < lines.size(); i++) {
            if (lines.get(i).isBlank()) {
                continue;
            }
            String[] f = lines.get(i).split(",", -1);
            if (f.length != header.size()) {
                throw new IllegalArgumentException(csv + " line " + (i + 1) + " has " + f.length + " fields; the"
                        + " header has " + header.size());
            }
            UnaryOperator<String> field = column -> f[at.get(column)];
            if (!field.apply("mode").equals("layer") || !field.apply("l2").equals("hot")
                    || !field.apply("input").equals("strided")) {
                continue;
            }
            try {
                String peer = field.apply("peer_us");
                String variant = header.contains("variant") ? f[header.indexOf("variant")].split(":")[0]
                        : DEFAULT_VARIANT;
                points.add(new Point(variant, Integer.parseInt(field.apply("batch")),
                        Double.parseDouble(field.apply("us_per_call")),
                        peer.isEmpty() ? Double.NaN : Double.parseDouble(peer),
                        Double.parseDouble(field.apply("launch_floor_us")),
                        Double.parseDouble(field.apply("byte_floor_us"))));
                shape = "cp " + field.apply("cp") + ", " + field.apply("heads") + " heads per rank, head_dim "
                        + field.apply("head_dim");
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(csv + " line " + (i + 1) + ": not a number (" + e.getMessage()
                        + ")");
            }
        }
        return new Layer(points, shape);
    }

    /** One colour per variant's line, in the order the run measured them; the first is dcp4j's single line's. */
    private static final Color[] VARIANT_COLORS = {new Color(0xC0, 0x20, 0x20), new Color(0xE0, 0x80, 0x00),
        new Color(0x80, 0x30, 0xA0), new Color(0x00, 0x90, 0x90), new Color(0x60, 0x40, 0x20)};

    /** The lower of two values, where a NaN counts as none. */
    private static double lowest(double a, double b) {
        return Double.isNaN(a) ? b : Double.isNaN(b) ? a : Math.min(a, b);
    }

    /** Adds the point where a logarithmic axis can show it (a finite, positive value; NaN marks "not measured"). */
    private static void addPlottable(XYSeries series, int batch, double us) {
        if (Double.isFinite(us) && us > 0) {
            series.add(batch, us);
        }
    }

    /** A logarithmic axis with a tick at every power of {@code base}, labelled as plain numbers. */
    private static LogAxis logAxis(String label, int base) {
        LogAxis axis = new LogAxis(label);
        axis.setBase(base);
        axis.setTickUnit(new NumberTickUnit(1));
        axis.setMinorTickMarksVisible(true);
        axis.setNumberFormatOverride(new DecimalFormat("0.###"));
        return axis;
    }

    /**
     * Writes the figure of {@code points} to {@code png} (whole or not at all); refused where there are no points.
     * Loading this class needs {@code java.desktop}: callers check {@link DesktopRuntime#require()} first.
     */
    static void write(Path png, String title, List<Point> points) throws IOException {
        if (points.isEmpty()) {
            throw new IllegalArgumentException("nothing to plot: no layer-mode rows with L2 hot (run the benchmark with"
                    + " --modes layer and --l2 hot)");
        }
        System.setProperty("java.awt.headless", "true");
        Map<String, XYSeries> variants = new LinkedHashMap<>();
        points.forEach(p -> variants.computeIfAbsent(p.variant(), v -> new XYSeries("dcp4j " + v)));
        if (variants.size() == 1) {
            variants.values().iterator().next().setKey("dcp4j");  // a run of one variant: dcp4j's one line
        }
        XYSeries peer = new XYSeries("peer (same run)");
        XYSeries launch = new XYSeries("launch floor");
        XYSeries bytes = new XYSeries("byte floor");
        Map<Integer, double[]> floors = new TreeMap<>();  // batch -> the lowest launch and byte floors
        for (Point p : points) {
            addPlottable(variants.get(p.variant()), p.batch(), p.dcp4jUs());
            double[] f = floors.computeIfAbsent(p.batch(), b -> new double[] {p.peerUs(), Double.NaN, Double.NaN});
            f[1] = lowest(f[1], p.launchFloorUs());
            f[2] = lowest(f[2], p.byteFloorUs());
        }
        floors.forEach((batch, f) -> {
            addPlottable(peer, batch, f[0]);
            addPlottable(launch, batch, f[1]);
            addPlottable(bytes, batch, f[2]);
        });
        XYSeriesCollection data = new XYSeriesCollection();
        List<XYSeries> all = new ArrayList<>(variants.values());
        all.addAll(List.of(peer, launch, bytes));
        for (XYSeries series : all) {
            if (series.getItemCount() > 0) {
                data.addSeries(series);
            }
        }
        XYLineAndShapeRenderer renderer = new XYLineAndShapeRenderer(true, true);
        XYPlot plot = new XYPlot(data, logAxis("batch (tokens per call)", 2), logAxis("µs per call, all ranks", 10),
                renderer);
        plot.setBackgroundPaint(Color.WHITE);
        plot.setDomainGridlinePaint(Color.LIGHT_GRAY);
        plot.setRangeGridlinePaint(Color.LIGHT_GRAY);
        Stroke dashed = new BasicStroke(1.5f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f, new float[] {6f, 4f},
                0f);
        Map<Comparable<?>, Color> paints = new HashMap<>();
        int v = 0;
        for (XYSeries series : variants.values()) {
            paints.put(series.getKey(), VARIANT_COLORS[v++ % VARIANT_COLORS.length]);
        }
        paints.put(peer.getKey(), new Color(0x20, 0x50, 0xB0));
        paints.put(launch.getKey(), Color.GRAY);
        paints.put(bytes.getKey(), new Color(0x20, 0x80, 0x40));
        for (int i = 0; i < data.getSeriesCount(); i++) {
            Comparable<?> key = data.getSeriesKey(i);
            renderer.setSeriesPaint(i, paints.get(key));
            renderer.setSeriesStroke(i, key.equals(launch.getKey()) || key.equals(bytes.getKey()) ? dashed
                    : new BasicStroke(2.5f));
        }
        JFreeChart chart = new JFreeChart(title, new Font(Font.SANS_SERIF, Font.BOLD, 15), plot, true);
        chart.setBackgroundPaint(Color.WHITE);
        WholeFile.write(png, out -> ChartUtils.writeChartAsPNG(out, chart, WIDTH, HEIGHT));
    }
}
