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
import java.util.List;
import java.util.Map;
import java.util.function.UnaryOperator;

/**
 * The layer mode's figure: µs per call against batch, both axes logarithmic, for dcp4j, the peer where the run had
 * one, and the launch and byte floors measured in the same run (docs/PERFORMANCE.md, "Method"), as a PNG.
 */
final class LayerPlot {
    static final int WIDTH = 900;
    static final int HEIGHT = 600;

    /** One batch of a layer-mode run with L2 hot; {@code peerUs} is NaN where the run had no peer. */
    record Point(int batch, double dcp4jUs, double peerUs, double launchFloorUs, double byteFloorUs) {
    }

    private LayerPlot() {
    }

    /** The points of {@code results}' layer-mode, L2-hot rows with host inputs, by batch. */
    static List<Point> of(List<Benchmark.Result> results, Map<Integer, Double> peer) {
        List<Point> points = new ArrayList<>();
        for (Benchmark.Result r : results) {
            Benchmark.Case c = r.c();
            if (c.mode() == Benchmark.Mode.LAYER && !c.flushL2() && !c.deviceInputs()) {
                points.add(new Point(c.batch(), r.usPerCall(), peer.getOrDefault(c.batch(), Double.NaN),
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
                points.add(new Point(Integer.parseInt(field.apply("batch")),
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
        XYSeries dcp4j = new XYSeries("dcp4j");
        XYSeries peer = new XYSeries("peer (same run)");
        XYSeries launch = new XYSeries("launch floor");
        XYSeries bytes = new XYSeries("byte floor");
        for (Point p : points) {
            addPlottable(dcp4j, p.batch(), p.dcp4jUs());
            addPlottable(peer, p.batch(), p.peerUs());
            addPlottable(launch, p.batch(), p.launchFloorUs());
            addPlottable(bytes, p.batch(), p.byteFloorUs());
        }
        XYSeriesCollection data = new XYSeriesCollection();
        for (XYSeries series : List.of(dcp4j, peer, launch, bytes)) {
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
        for (int i = 0; i < data.getSeriesCount(); i++) {
            Comparable<?> key = data.getSeriesKey(i);
            renderer.setSeriesPaint(i, key.equals(dcp4j.getKey()) ? new Color(0xC0, 0x20, 0x20)
                    : key.equals(peer.getKey()) ? new Color(0x20, 0x50, 0xB0)
                    : key.equals(launch.getKey()) ? Color.GRAY : new Color(0x20, 0x80, 0x40));
            renderer.setSeriesStroke(i, key.equals(launch.getKey()) || key.equals(bytes.getKey()) ? dashed
                    : new BasicStroke(2.5f));
        }
        JFreeChart chart = new JFreeChart(title, new Font(Font.SANS_SERIF, Font.BOLD, 15), plot, true);
        chart.setBackgroundPaint(Color.WHITE);
        WholeFile.write(png, out -> ChartUtils.writeChartAsPNG(out, chart, WIDTH, HEIGHT));
    }
}
