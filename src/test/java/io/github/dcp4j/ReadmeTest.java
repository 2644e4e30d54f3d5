package io.github.dcp4j;

import io.github.dcp4j.cuda.Cuda;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.net.URISyntaxException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The README's Java examples, taken from README.md as it stands (not a copy), compiled and run: each block is a
 * whole compilation unit with a {@code main}. The CPU example runs everywhere; the device-tensor one on a GPU. The
 * build's compilation lands in target/readme-examples, which the GPU bundle carries (its runtime has no compiler).
 */
class ReadmeTest {
    private static final Pattern JAVA_BLOCK = Pattern.compile("```java\\n(.*?)```", Pattern.DOTALL);
    private static final Pattern PUBLIC_CLASS = Pattern.compile("public class (\\w+)");
    /** Where the build compiles the examples, and where the GPU bundle's test class path carries them. */
    private static final Path COMPILED = Path.of("target/readme-examples");
    private static final String BUNDLED = "/readme-examples/";

    /** README.md from the checkout (tests run in its root), else from the test class path (the GPU bundle). */
    private static String readme() throws IOException {
        Path file = Path.of("README.md");
        if (Files.exists(file)) {
            return Files.readString(file);
        }
        try (InputStream in = ReadmeTest.class.getResourceAsStream("/README.md")) {
            assertTrue(in != null, "README.md is neither in the working directory nor on the test class path");
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    /** Every ```java block of the README, by the name of its public class. */
    private static Map<String, String> examples() throws IOException {
        Map<String, String> blocks = new LinkedHashMap<>();
        Matcher m = JAVA_BLOCK.matcher(readme());
        while (m.find()) {
            Matcher name = PUBLIC_CLASS.matcher(m.group(1));
            assertTrue(name.find(), "every README Java block is a whole class with main:\n" + m.group(1));
            blocks.put(name.group(1), m.group(1));
        }
        return blocks;
    }

    private static String classPathOf(Class<?>... classes) throws URISyntaxException {
        List<String> entries = new ArrayList<>(List.of(System.getProperty("java.class.path")));
        for (Class<?> c : classes) {
            entries.add(Path.of(c.getProtectionDomain().getCodeSource().getLocation().toURI()).toString());
        }
        return String.join(java.io.File.pathSeparator, entries);
    }

    /** Compiles every block into {@code dir}; the compiler's messages on failure. */
    private static void compileAll(Path dir) throws Exception {
        List<Path> sources = new ArrayList<>();
        for (Map.Entry<String, String> e : examples().entrySet()) {
            Path source = dir.resolve(e.getKey() + ".java");
            Files.writeString(source, e.getValue());
            sources.add(source);
        }
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        ByteArrayOutputStream messages = new ByteArrayOutputStream();
        List<String> args = new ArrayList<>(List.of("-d", dir.toString(), "-classpath",
                classPathOf(DcpLseReduce.class, jcuda.Pointer.class)));
        sources.forEach(s -> args.add(s.toString()));
        int result = javac.run(null, messages, messages, args.toArray(String[]::new));
        assertEquals(0, result, "the README's examples compile as written:\n" + messages);
    }

    /** Runs {@code main} of the compiled class {@code name}; returns what it printed. */
    private static String run(Path dir, String name) throws Exception {
        PrintStream original = System.out;
        ByteArrayOutputStream printed = new ByteArrayOutputStream();
        try (URLClassLoader loader = new URLClassLoader(new URL[] {dir.toUri().toURL()},
                ReadmeTest.class.getClassLoader())) {
            System.setOut(new PrintStream(printed, true, StandardCharsets.UTF_8));
            loader.loadClass(name).getMethod("main", String[].class).invoke(null, (Object) new String[0]);
        } finally {
            System.setOut(original);
        }
        return printed.toString(StandardCharsets.UTF_8);
    }

    @Test
    void everyExampleCompilesAsWritten() throws Exception {
        assertEquals(List.of("RanksOnThreads", "DeviceTensorsOnTheCallersStream"), List.copyOf(examples().keySet()));
        Files.createDirectories(COMPILED);
        compileAll(COMPILED);
    }

    @Test
    void theCpuExampleRunsAndEveryRankMatchesTheFp64Oracle(@TempDir Path dir) throws Exception {
        compileAll(dir);
        String printed = run(dir, "RanksOnThreads");
        Matcher m = Pattern.compile("rank (\\d+): relative error against fp64 (\\S+)").matcher(printed);
        int ranks = 0;
        while (m.find()) {
            ranks++;
            assertTrue(Double.parseDouble(m.group(2)) < 1e-2, "rank " + m.group(1) + ": " + m.group(2));
        }
        assertEquals(8, ranks, "one line per rank:\n" + printed);
    }

    @Test
    @Tag("gpu")
    void theDeviceTensorExampleRunsOnAGpu(@TempDir Path dir) throws Exception {
        Cuda.Availability a = Cuda.availability();
        Assumptions.assumeTrue(a.available(), () -> "no CUDA device: " + a.reason());
        Path classes = dir;
        if (ToolProvider.getSystemJavaCompiler() != null) {
            compileAll(dir);
        } else {
            URL bundled = ReadmeTest.class.getResource(BUNDLED);
            assertTrue(bundled != null, "no compiler here and no " + BUNDLED + " on the test class path");
            classes = Path.of(bundled.toURI());
        }
        run(classes, "DeviceTensorsOnTheCallersStream");
    }
}
