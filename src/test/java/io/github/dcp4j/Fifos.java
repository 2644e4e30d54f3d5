package io.github.dcp4j;

import org.junit.jupiter.api.Assumptions;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Named pipes (FIFOs) where a regular file belongs: opening one for reading blocks until a writer comes, so whatever
 * meets one must refuse it by its type, without opening it.
 */
public final class Fifos {
    private Fifos() {
    }

    /** Makes a FIFO at {@code path} with the system's mkfifo; skips the test where there is none. */
    public static Path make(Path path) throws IOException, InterruptedException {
        Process p;
        try {
            p = new ProcessBuilder("mkfifo", path.toString()).redirectErrorStream(true).start();
        } catch (IOException e) {
            Assumptions.abort("no mkfifo here: " + e.getMessage());
            return path;
        }
        String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), "mkfifo " + path + ": " + output);
        BasicFileAttributes a = Files.readAttributes(path, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        assertTrue(a.isOther(), path + " is a FIFO");
        return path;
    }
}
