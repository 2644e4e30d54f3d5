package io.github.dcp4j.cli;

import java.io.PrintWriter;
import java.util.function.Consumer;

/** The library's progress lines, onto a command's error stream. */
final class Log {
    private Log() {
    }

    /** Each line printed and flushed at once (ranks in child processes write through their launcher). */
    static Consumer<String> to(PrintWriter err) {
        return line -> {
            err.println(line);
            err.flush();
        };
    }
}
