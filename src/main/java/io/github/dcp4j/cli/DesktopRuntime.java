package io.github.dcp4j.cli;

/**
 * Whether this Java runtime can draw: plots need {@code java.desktop}, which the GPU bundle's runtime leaves out. Kept
 * apart from {@link LayerPlot}, whose loading already needs that module, so that the check can run first.
 */
final class DesktopRuntime {
    private DesktopRuntime() {
    }

    /** Refuses, before anything is run or drawn, where this runtime has no {@code java.desktop}. */
    static void require() {
        if (ModuleLayer.boot().findModule("java.desktop").isEmpty()) {
            throw new IllegalStateException("plots need the java.desktop module, which this Java runtime does not"
                    + " have (the GPU bundle's leaves it out): write --csv and run `dcp4j plot` on a full JDK");
        }
    }
}
