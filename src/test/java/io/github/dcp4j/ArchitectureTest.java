package io.github.dcp4j;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The house rules that the compiler does not check, read from the main sources: no package depends on itself
 * through others (no import cycle), and JCuda's driver is called only behind the {@code cuda} facade.
 */
class ArchitectureTest {
    private static final Path MAIN = Path.of("src/main/java");
    private static final String ROOT = "io.github.dcp4j";
    /** A reference to a dcp4j class: an import or a qualified name, its package in group 1. */
    private static final Pattern REFERENCE = Pattern.compile("\\bio\\.github\\.dcp4j((?:\\.[a-z][a-z0-9]*)*)\\.[A-Z]");

    private static Map<String, Set<String>> packageGraph() throws IOException {
        Map<String, Set<String>> graph = new TreeMap<>();
        try (Stream<Path> files = Files.walk(MAIN)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
                String pkg = MAIN.relativize(f.getParent()).toString().replace('/', '.');
                Set<String> uses = graph.computeIfAbsent(pkg, k -> new TreeSet<>());
                String text = Files.readString(f).replaceFirst("package [^;]+;", "");
                Matcher m = REFERENCE.matcher(text);
                while (m.find()) {
                    String used = ROOT + m.group(1);
                    if (!used.equals(pkg)) {
                        uses.add(used);
                    }
                }
            }
        }
        return graph;
    }

    /** A path from {@code from} back to {@code target} over the graph's edges, or null. */
    private static List<String> pathBack(Map<String, Set<String>> graph, String from, String target,
                                         Set<String> seen) {
        for (String next : graph.getOrDefault(from, Set.of())) {
            if (next.equals(target)) {
                return new ArrayList<>(List.of(from, next));
            }
            if (seen.add(next)) {
                List<String> rest = pathBack(graph, next, target, seen);
                if (rest != null) {
                    rest.addFirst(from);
                    return rest;
                }
            }
        }
        return null;
    }

    @Test
    void noPackageImportsItselfThroughOthers() throws IOException {
        Map<String, Set<String>> graph = packageGraph();
        assertTrue(graph.size() > 10, "the main sources were found: " + graph.keySet());
        List<String> cycles = new ArrayList<>();
        for (String pkg : graph.keySet()) {
            List<String> cycle = pathBack(graph, pkg, pkg, new TreeSet<>());
            if (cycle != null) {
                cycles.add(String.join(" -> ", cycle));
            }
        }
        assertEquals(List.of(), cycles, "import cycles between packages");
    }

    @Test
    void onlyTheCudaFacadeCallsTheDriverThroughJCuda() throws IOException {
        List<String> callers = new ArrayList<>();
        try (Stream<Path> files = Files.walk(MAIN)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
                boolean facade = MAIN.relativize(f).startsWith(Path.of("io/github/dcp4j/cuda"));
                if (!facade && Files.readString(f).contains("JCudaDriver")) {
                    callers.add(MAIN.relativize(f).toString());
                }
            }
        }
        assertEquals(List.of(), callers, "files outside io.github.dcp4j.cuda that use JCudaDriver");
    }
}
