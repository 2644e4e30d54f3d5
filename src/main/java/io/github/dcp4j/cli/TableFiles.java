package io.github.dcp4j.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.github.dcp4j.io.WholeFile;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.function.Function;

/**
 * A command's result table as the CSV and JSON files its --csv / --json options name, each written whole or not at
 * all ({@link WholeFile}); the JSON is the rows' record components, by name.
 */
final class TableFiles {
    private TableFiles() {
    }

    /**
     * Writes {@code rows} to {@code csv} (the header line, then {@code line} of each row) and to {@code json}; a null
     * path is skipped.
     */
    static <R extends Record> void write(Path csv, Path json, String header, Function<R, String> line, List<R> rows) {
        try {
            if (csv != null) {
                StringBuilder s = new StringBuilder(header).append('\n');
                rows.forEach(r -> s.append(line.apply(r)).append('\n'));
                WholeFile.write(csv, out -> out.write(s.toString().getBytes(StandardCharsets.UTF_8)));
            }
            if (json != null) {
                String text = new ObjectMapper().writerWithDefaultPrettyPrinter().writeValueAsString(rows) + "\n";
                WholeFile.write(json, out -> out.write(text.getBytes(StandardCharsets.UTF_8)));
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the table: " + e.getMessage(), e);
        }
    }
}
