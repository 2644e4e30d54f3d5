package io.github.dcp4j.cli;

import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;

@Command(name = "plot", mixinStandardHelpOptions = true,
        description = "Draws the layer mode of a benchmark CSV (written by `dcp4j bench --csv`, e.g. on a GPU host) as"
                + " a PNG: µs per call against batch, log-log, for dcp4j, the peer where the run had one, and the"
                + " launch and byte floors of the same run.")
final class PlotCommand implements Callable<Integer> {
    @Option(names = "--csv", required = true, paramLabel = "FILE", description = "The benchmark's CSV.")
    Path csv;

    @Option(names = "--output", required = true, paramLabel = "FILE.png", description = "The PNG to write.")
    Path output;

    @Option(names = "--title", description = "The figure's title, by default \"dcp4j, layer mode\" with the shape of"
            + " the CSV's rows.")
    String title;

    @Override
    public Integer call() throws IOException {
        DesktopRuntime.require();
        if (!Files.isRegularFile(csv)) {
            throw new IllegalArgumentException("--csv " + csv + " is not a regular file");
        }
        LayerPlot.Layer layer = LayerPlot.readCsv(csv);
        LayerPlot.write(output, title != null ? title : "dcp4j, layer mode (" + layer.shape() + ", L2 hot)",
                layer.points());
        return 0;
    }
}
