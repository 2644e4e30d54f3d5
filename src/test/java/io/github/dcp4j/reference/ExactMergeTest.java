package io.github.dcp4j.reference;

import io.github.dcp4j.Tensors;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.TensorView;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.lang.foreign.Arena;
import java.util.SplittableRandom;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The exact merge against the fp64 oracle, and the contract's edge rows. */
class ExactMergeTest {

    static Stream<Arguments> dtypesAndModes() {
        return Stream.of(DType.FP16, DType.BF16).flatMap(d -> Stream.of(LseMode.values()).map(m -> Arguments.of(d, m)));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("dtypesAndModes")
    void singleRankIsTheIdentity(DType dtype, LseMode mode) {
        try (Arena arena = Arena.ofConfined()) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(5), 3, 4, 1, 64, dtype, 5.0);
            short[] out = Tensors.exact(arena, g, 0, mode);
            short[] in = Tensors.bits(g.partialO().getFirst());
            assertArrayEquals(in, out, "cp = 1: weight 1, output = input bit for bit");
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("dtypesAndModes")
    void matchesTheFp64OracleWithinHalfPrecision(DType dtype, LseMode mode) {
        try (Arena arena = Arena.ofConfined()) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(6), 4, 3, 5, 96, dtype, 4.0);
            for (int dest = 0; dest < 5; dest++) {
                TensorView out = TensorView.allocate(arena, dtype, 12, 96);
                ExactMerge.reduce(g.partialO(), g.partialLse(), dest, mode, out);
                double err = Fp64Oracle.relativeError(out, Fp64Oracle.reduce(g.partialO(), g.partialLse(), dest, mode));
                double bound = dtype == DType.BF16 ? 8e-3 : 1e-3;
                assertTrue(err < bound, "relative error " + err + " for dest " + dest);
            }
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("dtypesAndModes")
    void rowsWhoseLseIsMinusInfEverywhereAreExactlyZero(DType dtype, LseMode mode) {
        try (Arena arena = Arena.ofConfined()) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(8), 2, 2, 4, 64, dtype, 3.0);
            for (int r = 0; r < 4; r++) {
                Tensors.setLseRow(g, r, 0, 1, Float.NEGATIVE_INFINITY);
            }
            short[] out = Tensors.exact(arena, g, 2, mode);
            for (int i = 64; i < 128; i++) { // row t=0, h=1
                assertEquals(0, out[i], "all-empty row gives +0, not NaN");
            }
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("dtypesAndModes")
    void nanAndPlusInfLsesGiveNoWeight(DType dtype, LseMode mode) {
        try (Arena arena = Arena.ofConfined()) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(9), 2, 2, 3, 64, dtype, 3.0);
            Tensors.setLseRow(g, 0, 1, 0, Float.NaN);
            Tensors.setLseRow(g, 1, 1, 1, Float.POSITIVE_INFINITY);
            Tensors.Group withoutSource = Tensors.packedCopy(arena, g);
            Tensors.setLseRow(withoutSource, 0, 1, 0, Float.NEGATIVE_INFINITY);
            Tensors.setLseRow(withoutSource, 1, 1, 1, Float.NEGATIVE_INFINITY);
            for (int dest = 0; dest < 3; dest++) {
                assertArrayEquals(Tensors.exact(arena, withoutSource, dest, mode), Tensors.exact(arena, g, dest, mode),
                        "NaN / +inf count as -inf for dest " + dest);
                double[] ref = Fp64Oracle.reduce(g.partialO(), g.partialLse(), dest, mode);
                for (double v : ref) {
                    assertTrue(Double.isFinite(v));
                }
            }
        }
    }

    /** The documented definition, spelled out here step by step, bit for bit on random rows with edge LSEs. */
    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("dtypesAndModes")
    void followsTheDocumentedDefinitionBitForBit(DType dtype, LseMode mode) {
        int cp = 6;
        int d = 32;
        try (Arena arena = Arena.ofConfined()) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(10), 5, 1, cp, d, dtype, 6.0);
            Tensors.setLseRow(g, 2, 1, 0, Float.NaN);
            Tensors.setLseRow(g, 4, 3, 0, Float.POSITIVE_INFINITY);
            Tensors.setLseRow(g, 0, 3, 0, Float.NEGATIVE_INFINITY);
            for (int dest = 0; dest < cp; dest++) {
                short[] got = Tensors.exact(arena, g, dest, mode);
                for (int row = 0; row < 5; row++) {
                    float[] l = new float[cp];
                    float m = Float.NEGATIVE_INFINITY;
                    for (int r = 0; r < cp; r++) {
                        float v = g.partialLse().get(r).getFloat(row, 0, dest);
                        l[r] = Float.isNaN(v) || v == Float.POSITIVE_INFINITY ? Float.NEGATIVE_INFINITY : v;
                        m = Math.max(m, l[r]);
                    }
                    m = m == Float.NEGATIVE_INFINITY ? 0f : m;
                    float[] e = new float[cp];
                    float denom = 0f;
                    for (int r = 0; r < cp; r++) {
                        float diff = l[r] - m;
                        e[r] = (float) (mode == LseMode.BASE2 ? Math.pow(2, diff) : Math.exp(diff));
                        denom += e[r];
                    }
                    float inv = denom == 0f ? 0f : 1f / denom;
                    for (int i = 0; i < d; i++) {
                        float acc = 0f;
                        for (int r = 0; r < cp; r++) {
                            acc = Math.fma(e[r] * inv, g.partialO().get(r).getFloat(row, 0, dest, i), acc);
                        }
                        assertEquals(io.github.dcp4j.op.Halves.fromFloat(dtype, acc), got[row * d + i],
                                "dest " + dest + " row " + row + " element " + i);
                    }
                }
            }
        }
    }
}
