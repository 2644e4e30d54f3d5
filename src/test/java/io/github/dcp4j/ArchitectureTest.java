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
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The house rules that the compiler does not check, read from the main sources: every package uses packages of lower
 * layers only (so no import cycle, and nothing in the library uses the command line), no package depends on itself
 * through others, and JCuda's driver is called only behind the {@code cuda} facade.
 */
class ArchitectureTest {
    private static final Path MAIN = Path.of("src/main/java");
    private static final String ROOT = "io.github.dcp4j";
    /** A reference to a dcp4j class: an import or a qualified name, its package in group 1. */
    private static final Pattern REFERENCE = Pattern.compile("\\bio\\.github\\.dcp4j((?:\\.[a-z][a-z0-9]*)*)\\.[A-Z]");
    /**
     * The layers, lowest first, as docs/ARCHITECTURE.md draws them (packages relative to the root, "" the root
     * itself): a package may use the packages of lower layers, none of its own layer or above. A new package must be
     * placed here.
     */
    private static final List<Set<String>> LAYERS = List.of(
            Set.of("layout"),
            Set.of("op"),
            Set.of("rendezvous", "cuda", "reference"),
            Set.of("engine", "peer"),
            Set.of("engine.cpu", "engine.cuda"),
            Set.of("", "bench", "io"),
            Set.of("check"),
            Set.of("cli"));

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

    /** The index of {@code pkg}'s layer in {@link #LAYERS}; fails for a package placed on none. */
    private static int layer(String pkg) {
        String relative = pkg.equals(ROOT) ? "" : pkg.substring(ROOT.length() + 1);
        for (int i = 0; i < LAYERS.size(); i++) {
            if (LAYERS.get(i).contains(relative)) {
                return i;
            }
        }
        return fail(pkg + " is on no layer: place it in ArchitectureTest.LAYERS and in docs/ARCHITECTURE.md");
    }

    @Test
    void everyPackageUsesLowerLayersOnly() throws IOException {
        List<String> upward = new ArrayList<>();
        for (Map.Entry<String, Set<String>> uses : packageGraph().entrySet()) {
            for (String used : uses.getValue()) {
                if (layer(used) >= layer(uses.getKey())) {
                    upward.add(uses.getKey() + " -> " + used);
                }
            }
        }
        assertEquals(List.of(), upward, "uses of a package on the same layer or above");
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
