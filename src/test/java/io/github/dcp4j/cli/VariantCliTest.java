package io.github.dcp4j.cli;

import io.github.dcp4j.layout.LlLayout;
import io.github.dcp4j.layout.RowLayout;
import io.github.dcp4j.op.DType;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@code --variant} and {@code --variants} on the commands, without a GPU. */
class VariantCliTest {

    @Test
    void workspaceSizeOfEachVariant() {
        String[] geometry = {"workspace-size", "--max-tokens", "8", "--local-heads", "2", "--cp", "4", "--head-dim",
            "128", "--dtype", "bf16"};
        for (String v : new String[] {"ll128", "simple", "unfused"}) {
            CliTest.Result r = CliTest.run(concat(geometry, "--variant", v));
            assertEquals(0, r.exitCode(), r.err());
            assertEquals("51328", r.out().strip(), v);
        }
        long ll = new LlLayout(4, 16, RowLayout.of(128, DType.BF16.bytes())).bytes();
        assertEquals(String.valueOf(ll), CliTest.run(concat(geometry, "--variant", "ll")).out().strip());
        // auto by the fallback (no crossovers shipped for sm_75): ll128's workspace only
        CliTest.Result fallback = CliTest.run(concat(geometry, "--variant", "auto", "--sm", "75"));
        assertEquals("51328", fallback.out().strip(), "auto at sm 75");
        // auto by sm_90's measured crossovers (ll128 at every size, measured on an H200): ll128's region only
        CliTest.Result measured = CliTest.run(concat(geometry, "--variant", "auto", "--sm", "90"));
        assertEquals(0, measured.exitCode(), measured.err());
        assertEquals("51328", measured.out().strip(), "auto at sm 90");
        CliTest.Result notAuto = CliTest.run(concat(geometry, "--variant", "ll", "--sm", "90"));
        assertEquals(2, notAuto.exitCode());
        assertTrue(notAuto.err().contains("--sm applies to --variant auto only (the other variants' sizes do not"
                + " depend on the GPU); got --sm 90 with --variant ll"), notAuto.err());
        for (String sm : new String[] {"9", "-90", "1000"}) {
            CliTest.Result outside = CliTest.run(concat(geometry, "--variant", "auto", "--sm", sm));
            assertEquals(2, outside.exitCode(), sm);
            assertTrue(outside.err().contains("--sm must be a compute capability as major x 10 + minor, in [10, 999];"
                    + " got " + sm), outside.err());
        }
        CliTest.Result bad = CliTest.run(concat(geometry, "--variant", "ll16"));
        assertEquals(2, bad.exitCode());
        assertTrue(bad.err().contains("variant must be one of ll128, ll, simple, unfused, auto; got 'll16'"),
                bad.err());
    }

    @Test
    void theCpuEngineRefusesAVariantItDoesNotRun() {
        CliTest.Result r = CliTest.run("--engine", "cpu", "--variant", "simple", "--batches", "1", "--seconds",
                "0.01");
        assertEquals(2, r.exitCode(), r.err());
        assertTrue(r.err().contains("the cpu engine runs the ll128 variant only"), r.err());
        CliTest.Result auto = CliTest.run("--engine", "cpu", "--variant", "auto", "--batches", "1", "--seconds",
                "0.01");
        assertEquals(0, auto.exitCode(), auto.err());
        List<String> rows = auto.out().lines().skip(1).toList();
        assertEquals(1, rows.size(), auto.out());
        assertEquals("ll128", rows.getFirst().trim().split("\\s+")[1], auto.out());
    }

    @Test
    void benchRefusesVariantsOutsideLoopbackAndATuneWithoutTwoVariants() {
        CliTest.Result threads = CliTest.run("bench", "--ranks", "threads", "--variants", "ll128,simple");
        assertEquals(2, threads.exitCode(), threads.err());
        assertTrue(threads.err().contains("--variants other than ll128 are measured with --ranks loopback"),
                threads.err());
        CliTest.Result tune = CliTest.run("bench", "--variants", "ll128,auto", "--tune", "x.txt");
        assertEquals(2, tune.exitCode(), tune.err());
        assertTrue(tune.err().contains("--tune picks among the variants"), tune.err());
        CliTest.Result noLayer = CliTest.run("bench", "--modes", "eager", "--variants", "ll,simple", "--tune",
                "x.txt");
        assertEquals(2, noLayer.exitCode(), noLayer.err());
        CliTest.Result single = CliTest.run("bench", "--ranks", "threads", "--variant", "unfused");
        assertEquals(2, single.exitCode(), single.err());
        assertTrue(single.err().contains("--variants [unfused]"), single.err());
        CliTest.Result twice = CliTest.run("bench", "--variants", "ll,ll");
        assertEquals(2, twice.exitCode(), twice.err());
        assertTrue(twice.err().contains("--variants must name each variant once"), twice.err());
    }

    private static String[] concat(String[] a, String... b) {
        String[] all = new String[a.length + b.length];
        System.arraycopy(a, 0, all, 0, a.length);
        System.arraycopy(b, 0, all, a.length, b.length);
        return all;
    }
}
