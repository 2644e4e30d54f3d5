package io.github.dcp4j;

import java.io.Writer;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;

/** A writer that keeps every complete line and hands each to a callback as it arrives (to act on a child's output). */
public final class LineWatcher extends Writer {
    private final List<String> lines = new CopyOnWriteArrayList<>();
    private final StringBuilder line = new StringBuilder();
    private final Consumer<String> onLine;

    public LineWatcher(Consumer<String> onLine) {
        this.onLine = onLine;
    }

    /** Every complete line so far. */
    public List<String> lines() {
        return lines;
    }

    @Override
    public synchronized void write(char[] c, int off, int len) {
        for (int i = off; i < off + len; i++) {
            if (c[i] != '\n') {
                line.append(c[i]);
                continue;
            }
            String l = line.toString();
            line.setLength(0);
            lines.add(l);
            onLine.accept(l);
        }
    }

    @Override
    public void flush() {
    }

    @Override
    public void close() {
    }
}
