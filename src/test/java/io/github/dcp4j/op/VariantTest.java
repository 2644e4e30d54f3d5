package io.github.dcp4j.op;

import io.github.dcp4j.layout.LlLayout;
import io.github.dcp4j.layout.RowLayout;
import io.github.dcp4j.layout.WorkspaceLayout;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.util.List;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class VariantTest {

    @ParameterizedTest
    @EnumSource(Variant.class)
    void everyVariantParsesFromItsSpelling(Variant v) {
        assertEquals(v, Variant.parse(v.spelling()));
        assertEquals(v.spelling(), v.toString());
    }

    @Test
    void anUnknownVariantIsRefusedListingTheOthers() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Variant.parse("ll16"));
        assertEquals("variant must be one of ll128, ll, simple, unfused, auto; got 'll16'", e.getMessage());
    }

    @Test
    void workspaceSizes() {
        WorkspaceSpec spec = new WorkspaceSpec(8, 2, 4, 128, DType.BF16);
        assertEquals(51328, Variant.LL128.workspaceBytes(spec));
        assertEquals(51328, Variant.SIMPLE.workspaceBytes(spec));
        assertEquals(51328, Variant.UNFUSED.workspaceBytes(spec));
        assertEquals(128 + 2 * 4 * 16 * (64 * 8 + 8), Variant.LL.workspaceBytes(spec));
        assertThrows(IllegalArgumentException.class, () -> Variant.AUTO.workspaceBytes(spec));
    }

    @Test
    void fallbackPicksLl128AtEverySize() {
        Crossovers c = Crossovers.fallback();
        // the layer shape: 16 heads x cp 8 x 1024 bytes = 128 KiB per token
        long perToken = Crossovers.bytesPerRank(16, 8, 512, DType.BF16);
        assertEquals(128 << 10, perToken);
        for (long bytes : new long[] {0, perToken, 32 * perToken, 256 * perToken, Long.MAX_VALUE}) {
            assertEquals(Variant.LL128, c.choose(bytes), bytes + " bytes per rank");
        }
    }

    @Test
    void noCrossoversAreShippedForAnUnknownArchitecture() {
        assertEquals(Crossovers.fallback(), Crossovers.forArchitecture(12345));
        assertEquals("crossovers-sm_90.txt", Crossovers.resourceName(90));
    }

    /** The loader reads the resource of an architecture where there is one (a made-up one, on the test class path). */
    @Test
    void crossoversAreLoadedFromTheArchitecturesResource() {
        Crossovers c = Crossovers.forArchitecture(1);
        assertEquals("resource crossovers-sm_1.txt", c.source());
        assertEquals(List.of(new Crossovers.Step(Variant.LL, 0), new Crossovers.Step(Variant.LL128, 8192),
                new Crossovers.Step(Variant.UNFUSED, 1048576)), c.steps());
    }

    @Test
    void chooseTakesTheLastStepAtOrBelowTheCall() {
        SplittableRandom random = new SplittableRandom();
        long a = 1 + random.nextLong(1 << 20);
        long b = a + 1 + random.nextLong(1 << 20);
        Crossovers c = new Crossovers(List.of(new Crossovers.Step(Variant.LL, 0),
                new Crossovers.Step(Variant.LL128, a), new Crossovers.Step(Variant.UNFUSED, b)), "test");
        assertEquals(Variant.LL, c.choose(a - 1));
        assertEquals(Variant.LL128, c.choose(a));
        assertEquals(Variant.LL128, c.choose(b - 1));
        assertEquals(Variant.UNFUSED, c.choose(b));
    }

    @Test
    void fileFormatRoundTrips() {
        Crossovers c = new Crossovers(List.of(new Crossovers.Step(Variant.LL, 0),
                new Crossovers.Step(Variant.LL128, 4096), new Crossovers.Step(Variant.SIMPLE, 1 << 22)), "test");
        String text = c.format("H200, bench --tune");
        assertTrue(text.contains("\n# H200, bench --tune\n"), text);
        assertEquals(c.steps(), Crossovers.parse(text, "round trip").steps());
    }

    @Test
    void parseRefusesMalformedFilesNamingTheLine() {
        assertEquals("f line 2: expected 'VARIANT FROM_BYTES_PER_RANK'; got 'll128'",
                assertThrows(IllegalArgumentException.class, () -> Crossovers.parse("ll 0\nll128\n", "f"))
                        .getMessage());
        assertEquals("f line 1: bytes per rank must be an integer; got 'x'",
                assertThrows(IllegalArgumentException.class, () -> Crossovers.parse("ll x", "f")).getMessage());
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Crossovers.parse("ll16 0", "f"))
                .getMessage().startsWith("f line 1: variant must be one of"));
        assertEquals("f line 1: a crossover step must name a variant other than auto; got auto",
                assertThrows(IllegalArgumentException.class, () -> Crossovers.parse("auto 0", "f")).getMessage());
        assertEquals("f: the first crossover step must start at 0 bytes per rank; got 10",
                assertThrows(IllegalArgumentException.class, () -> Crossovers.parse("ll 10", "f")).getMessage());
        assertEquals("f: crossover steps must have strictly increasing bytes per rank; got 100 then 100",
                assertThrows(IllegalArgumentException.class,
                        () -> Crossovers.parse("ll 0\nll128 100\nsimple 100", "f")).getMessage());
        assertEquals("f: crossovers need at least one step; got none",
                assertThrows(IllegalArgumentException.class, () -> Crossovers.parse("# nothing\n", "f"))
                        .getMessage());
    }

    @Test
    void fromFastestMergesAgreeingSizesAndStartsAtZero() {
        Crossovers c = Crossovers.fromFastest(List.of(new Crossovers.Step(Variant.LL, 131072),
                new Crossovers.Step(Variant.LL, 262144), new Crossovers.Step(Variant.LL128, 524288),
                new Crossovers.Step(Variant.SIMPLE, 4194304), new Crossovers.Step(Variant.SIMPLE, 8388608)), "t");
        assertEquals(List.of(new Crossovers.Step(Variant.LL, 0), new Crossovers.Step(Variant.LL128, 524288),
                new Crossovers.Step(Variant.SIMPLE, 4194304)), c.steps());
    }

    @Test
    void aSingleVariantHasItsOwnWorkspaceAtOffsetZero() {
        WorkspaceSpec spec = new WorkspaceSpec(4, 16, 8, 512, DType.BF16);
        for (Variant v : List.of(Variant.LL128, Variant.LL, Variant.SIMPLE, Variant.UNFUSED)) {
            VariantWorkspace w = VariantWorkspace.of(v, Crossovers.fallback(), spec);
            assertEquals(List.of(new VariantWorkspace.Region(v.layoutName(), 0, v.workspaceBytes(spec))), w.regions());
            assertEquals(v.workspaceBytes(spec), w.bytes());
            assertEquals(v, w.choose(Long.MAX_VALUE, spec.maxRows(), spec.layout()));
        }
    }

    /** Layouts never share bytes under auto; simple and unfused share one (the same flags and regions). */
    @Test
    void autoGivesEachLayoutItsOwnAlignedRegion() {
        WorkspaceSpec spec = new WorkspaceSpec(3, 5, 4, 64, DType.FP16);
        Crossovers c = new Crossovers(List.of(new Crossovers.Step(Variant.LL, 0),
                new Crossovers.Step(Variant.LL128, 100), new Crossovers.Step(Variant.SIMPLE, 200),
                new Crossovers.Step(Variant.UNFUSED, 300)), "t");
        VariantWorkspace w = VariantWorkspace.of(Variant.AUTO, c, spec);
        assertEquals(List.of("ll", "ll128", "fenced"), w.regions().stream().map(VariantWorkspace.Region::layout)
                .toList());
        long ll = new LlLayout(4, 15, spec.rowLayout()).bytes();
        assertEquals(0, w.region(Variant.LL).offset());
        assertEquals(ll, w.region(Variant.LL).bytes());
        long second = (ll + 127) / 128 * 128;
        assertEquals(second, w.region(Variant.LL128).offset());
        long third = second + (spec.bytes() + 127) / 128 * 128;
        assertEquals(third, w.region(Variant.SIMPLE).offset());
        assertEquals(w.region(Variant.SIMPLE), w.region(Variant.UNFUSED));
        assertEquals(third + spec.bytes(), w.bytes());
        assertEquals(Variant.LL128, w.choose(150, 1, spec.layout()));
        assertEquals(Variant.UNFUSED, w.choose(300, 1, spec.layout()));
        assertThrows(IllegalArgumentException.class,
                () -> VariantWorkspace.of(Variant.AUTO, Crossovers.fallback(), spec).region(Variant.LL));
    }

    /**
     * The edge case: auto's pick is ll, whose region holds fewer rows of a call whose head_dim is not the spec's; the
     * call runs in the first of the crossovers' variants whose region holds it, and in ll where it fits.
     */
    @Test
    void autoFallsBackToAVariantWhoseRegionHoldsTheCall() {
        WorkspaceSpec spec = new WorkspaceSpec(4, 4, 4, 64, DType.BF16);
        Crossovers c = new Crossovers(List.of(new Crossovers.Step(Variant.LL, 0),
                new Crossovers.Step(Variant.SIMPLE, 1L << 40)), "t");
        VariantWorkspace w = VariantWorkspace.of(Variant.AUTO, c, spec);
        WorkspaceLayout wider = WorkspaceLayout.forWorkspace(spec.bytes(), 4, RowLayout.of(120, DType.BF16.bytes()));
        int held = Variant.LL.rowsHeld(wider, w.region(Variant.LL).bytes());
        assertTrue(held < wider.maxRows(), held + " of " + wider.maxRows());
        assertEquals(Variant.SIMPLE, w.choose(1, held + 1, wider));
        assertEquals(Variant.LL, w.choose(1, held, wider));
        VariantWorkspace llOnly = VariantWorkspace.of(Variant.AUTO,
                new Crossovers(List.of(new Crossovers.Step(Variant.LL, 0)), "t"), spec);
        assertEquals(Variant.LL, llOnly.choose(1, held + 1, wider), "no region holds it: the pick, refused later");
    }

    private static VariantWorkspace.Region region(String layout, long offset, long bytes) {
        return new VariantWorkspace.Region(layout, offset, bytes);
    }

    private static String refusal(Variant variant, Crossovers crossovers, VariantWorkspace.Region... regions) {
        return assertThrows(IllegalArgumentException.class,
                () -> new VariantWorkspace(variant, crossovers, List.of(regions))).getMessage();
    }

    /** Region lists that would let two layouts share bytes, or a call run where its layout has no region. */
    @Test
    void aVariantWorkspaceRefusesRegionsThatOverlapMisalignOrMissALayout() {
        long bytes = 128 * (2 + new SplittableRandom().nextInt(100));
        Crossovers two = new Crossovers(List.of(new Crossovers.Step(Variant.LL, 0),
                new Crossovers.Step(Variant.LL128, 4096)), "t");
        assertEquals("the ll128 region's offset must be a multiple of 128 from 0; got 64",
                assertThrows(IllegalArgumentException.class, () -> region("ll128", 64, bytes)).getMessage());
        assertEquals("the ll region must have at least 128 bytes; got 0",
                assertThrows(IllegalArgumentException.class, () -> region("ll", 0, 0)).getMessage());
        assertEquals("a region's layout must be ll128, ll or fenced; got 'simple'",
                assertThrows(IllegalArgumentException.class, () -> region("simple", 0, bytes)).getMessage());
        assertEquals("the first region must start at offset 0; got " + region("ll128", 128, bytes),
                refusal(Variant.LL128, Crossovers.fallback(), region("ll128", 128, bytes)));
        assertTrue(refusal(Variant.AUTO, two, region("ll", 0, bytes), region("ll128", bytes - 128, bytes))
                .startsWith("regions must follow one another without overlapping;"));
        assertTrue(refusal(Variant.AUTO, two, region("ll", 0, bytes), region("ll", bytes, bytes))
                .startsWith("one region per layout; got two of ll"));
        assertTrue(refusal(Variant.AUTO, two, region("ll", 0, bytes))
                .startsWith("a workspace of auto needs a region of the ll128 layout, for ll128;"));
        assertTrue(refusal(Variant.SIMPLE, Crossovers.fallback(), region("ll128", 0, bytes))
                .startsWith("a workspace of simple needs a region of the fenced layout, for simple;"));
        assertTrue(refusal(Variant.LL128, Crossovers.fallback(), region("ll128", 0, bytes), region("ll", bytes, bytes))
                .startsWith("a workspace of ll128 has its one region;"));
        VariantWorkspace fine = new VariantWorkspace(Variant.AUTO, two, List.of(region("ll", 0, bytes),
                region("ll128", bytes, bytes)));
        assertEquals(2 * bytes, fine.bytes());
    }
}
