package io.github.dcp4j.bench;

import io.github.dcp4j.layout.RowLayout;
import io.github.dcp4j.op.Crossovers;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.Variant;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The benchmark's variants without a GPU: the case matrix, the byte floors, the ratio to unfused, --tune. */
class VariantBenchTest {
    private static final List<Variant> ALL = List.of(Variant.LL128, Variant.LL, Variant.SIMPLE, Variant.UNFUSED,
            Variant.AUTO);

    @Test
    void everyCaseRunsOncePerVariantUnfusedFirst() {
        List<Benchmark.Case> cases = CaseMatrix.cases(List.of("layer"), List.of(1, 4), 8, List.of("hot"),
                List.of("host"), ALL);
        assertEquals(10, cases.size());
        assertEquals(List.of(Variant.UNFUSED, Variant.LL128, Variant.LL, Variant.SIMPLE, Variant.AUTO),
                cases.subList(0, 5).stream().map(Benchmark.Case::variant).toList());
        assertTrue(cases.subList(0, 5).stream().allMatch(c -> c.sameInputs(cases.getFirst())));
        assertTrue(!cases.get(5).sameInputs(cases.getFirst()), "another batch");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> CaseMatrix.cases(
                List.of("layer"), List.of(1), 8, List.of("hot"), List.of("host"), List.of(Variant.LL, Variant.LL)));
        assertEquals("--variants must name each variant once; got [ll, ll]", e.getMessage());
    }

    /**
     * Workspace bytes per row as each variant moves them, from the layouts' formulas written out independently; the
     * fused variants move cp - 1 sources' rows (the own slice stays in partial_o), unfused all cp.
     */
    @Test
    void byteFloorsCountTheBytesEachVariantMoves() {
        RowLayout row = RowLayout.of(512, DType.BF16.bytes());
        assertEquals(9 * 128 + 3 * 16, Benchmark.workspaceBytesPerRow(Variant.LL128, row));
        assertEquals(2 * 1024 + 8, Benchmark.workspaceBytesPerRow(Variant.LL, row));
        assertEquals(1024 + 4, Benchmark.workspaceBytesPerRow(Variant.SIMPLE, row));
        assertEquals(1024 + 4, Benchmark.workspaceBytesPerRow(Variant.UNFUSED, row));
        Benchmark.Case c = new Benchmark.Case(Benchmark.Mode.LAYER, 2, 16, 512, 8, true, false, false);
        double rows = 2 * 16;
        double simple = 8 * (rows * 8 * (1024 + 4) + 2 * rows * 7 * (1024 + 4) + rows * 1024);
        assertEquals(simple, Benchmark.bytesPerCall(c, Variant.SIMPLE));
        double unfused = 8 * (rows * 8 * (1024 + 4) + 2 * rows * 8 * (1024 + 4) + rows * 1024);
        assertEquals(unfused, Benchmark.bytesPerCall(c, Variant.UNFUSED));
        double ll128 = 8 * (rows * 8 * (1024 + 4) + 2 * rows * 7 * (9 * 128 + 3 * 16) + rows * 1024);
        assertEquals(ll128, Benchmark.bytesPerCall(c, Variant.LL128));
        assertTrue(Benchmark.bytesPerCall(c, Variant.LL) > Benchmark.bytesPerCall(c, Variant.LL128));
        assertThrows(IllegalArgumentException.class, () -> Benchmark.workspaceBytesPerRow(Variant.AUTO, row));
    }

    private static Benchmark.Result result(Benchmark.Case c, double us, Variant ran) {
        return new Benchmark.Result(c, us, 3, 4, 1e-3, Double.NaN, Double.NaN, ran);
    }

    @Test
    void eachRowIsComparedWithUnfusedOnTheSameInputs(@TempDir Path dir) throws IOException {
        Benchmark.Case base = new Benchmark.Case(Benchmark.Mode.LAYER, 8, 16, 512, 8, true, false, false);
        Benchmark.Case other = new Benchmark.Case(Benchmark.Mode.LAYER, 16, 16, 512, 8, true, false, false);
        SplittableRandom random = new SplittableRandom();
        double unfusedUs = 10 + random.nextDouble();
        double simpleUs = 5 + random.nextDouble();
        List<Benchmark.Result> results = List.of(
                result(base.withVariant(Variant.UNFUSED), unfusedUs, Variant.UNFUSED),
                result(base.withVariant(Variant.SIMPLE), simpleUs, Variant.SIMPLE),
                result(base.withVariant(Variant.AUTO), simpleUs, Variant.LL128),
                result(other.withVariant(Variant.SIMPLE), 7, Variant.SIMPLE));
        assertNull(BenchReport.unfusedFor(results.get(0), results), "unfused is not compared with itself");
        assertEquals(unfusedUs, BenchReport.unfusedFor(results.get(1), results));
        assertNull(BenchReport.unfusedFor(results.get(3), results), "no unfused row of that batch");
        assertEquals("auto:ll128", results.get(2).variantLabel());
        Path csv = dir.resolve("bench.csv");
        BenchReport.writeCsv(csv, results, Map.of());
        List<String> lines = Files.readAllLines(csv);
        List<String> header = Arrays.asList(lines.getFirst().split(","));
        String[] simple = lines.get(2).split(",", -1);
        assertEquals("simple", simple[header.indexOf("variant")]);
        assertEquals(unfusedUs, Double.parseDouble(simple[header.indexOf("unfused_us")]));
        assertEquals(simpleUs / unfusedUs, Double.parseDouble(simple[header.indexOf("unfused_ratio")]), 1e-12);
        assertEquals("auto:ll128", lines.get(3).split(",", -1)[header.indexOf("variant")]);
        assertEquals("", lines.get(4).split(",", -1)[header.indexOf("unfused_ratio")]);
    }

    @Test
    void tuneTakesTheFastestVariantAtEachBatch() {
        List<Benchmark.Result> results = new ArrayList<>();
        // ll fastest at 1 and 2, ll128 at 4, simple at 8 and 16; auto's rows and flushed rows are not candidates
        double[][] us = {{3, 2, 5, 9}, {4, 3, 6, 9}, {5, 6, 7, 9}, {9, 10, 8, 9}, {15, 20, 12, 13}};
        int[] batches = {1, 2, 4, 8, 16};
        Variant[] variants = {Variant.LL128, Variant.LL, Variant.SIMPLE, Variant.UNFUSED};
        for (int i = 0; i < batches.length; i++) {
            Benchmark.Case c = new Benchmark.Case(Benchmark.Mode.LAYER, batches[i], 16, 512, 8, true, false, false);
            for (int v = 0; v < variants.length; v++) {
                results.add(result(c.withVariant(variants[v]), us[i][v], variants[v]));
            }
            results.add(result(c.withVariant(Variant.AUTO), 0.5, Variant.LL128));
            Benchmark.Case flushed = new Benchmark.Case(Benchmark.Mode.LAYER, batches[i], 16, 512, 8, true, true,
                    false, Variant.UNFUSED);
            results.add(result(flushed, 0.1, Variant.UNFUSED));
        }
        Crossovers c = BenchReport.tune(results, "test");
        long perToken = 16L * 8 * 512 * 2;
        assertEquals(List.of(new Crossovers.Step(Variant.LL, 0), new Crossovers.Step(Variant.LL128, 4 * perToken),
                new Crossovers.Step(Variant.SIMPLE, 8 * perToken)), c.steps());
        assertEquals(c.steps(), Crossovers.parse(c.format("test"), "round trip").steps());
        assertThrows(IllegalArgumentException.class, () -> BenchReport.tune(results.stream()
                .filter(r -> r.c().variant() == Variant.LL128 || r.c().variant() == Variant.AUTO).toList(), "one"));
    }
}
