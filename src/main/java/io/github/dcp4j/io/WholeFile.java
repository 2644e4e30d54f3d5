package io.github.dcp4j.io;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.security.SecureRandom;
import java.util.HexFormat;

/** Files written whole or not at all: the output of {@code reduce}, the main job's tables. */
public final class WholeFile {
    private static final SecureRandom TEMP_NAMES = new SecureRandom();

    private WholeFile() {
    }

    /** What writes the file's bytes. */
    @FunctionalInterface
    public interface Body {
        /**
         * Writes the file's bytes.
         *
         * @param out the temporary file's stream
         * @throws IOException where writing fails (the file is then not moved into place)
         */
        void writeTo(OutputStream out) throws IOException;
    }

    /**
     * Writes {@code body} to a short unpredictable name beside {@code path}, created new (never an existing file or
     * link) with the umask's mode, as the output will have, then moves it into place; on any failure the temporary
     * file is removed and {@code path} is untouched.
     *
     * @param path the file to write
     * @param body what writes its bytes
     * @throws IOException where the file cannot be written
     */
    public static void write(Path path, Body body) throws IOException {
        Path dir = path.toAbsolutePath().getParent();
        Path tmp = dir.resolve(".dcp4j-" + HexFormat.of().toHexDigits(TEMP_NAMES.nextLong()) + ".partial");
        OutputStream created = Files.newOutputStream(tmp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
        try {  // from here the temporary file is this call's own, and removed whatever happens
            try (OutputStream out = created) {
                body.writeTo(out);
            }
            try {
                Files.move(tmp, path, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, path, StandardCopyOption.REPLACE_EXISTING);
            }
        } finally {
            Files.deleteIfExists(tmp);
        }
    }
}
