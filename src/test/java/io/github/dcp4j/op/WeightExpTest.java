package io.github.dcp4j.op;

import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The merge weights' exponential: exact where it must be, within a few ulps of the true value everywhere else. */
class WeightExpTest {

    @Test
    void exactAtZeroAndAtIntegersOfBaseTwoAndZeroBelowTheCut() {
        assertEquals(1f, WeightExp.exp(LseMode.BASE2, 0f));
        assertEquals(1f, WeightExp.exp(LseMode.BASEE, 0f));
        for (int n = -126; n <= 0; n++) {
            assertEquals(Math.scalb(1f, n), WeightExp.exp(LseMode.BASE2, n), "2^" + n);
        }
        assertEquals(0f, WeightExp.exp(LseMode.BASE2, Float.NEGATIVE_INFINITY));
        assertEquals(0f, WeightExp.exp(LseMode.BASEE, Float.NEGATIVE_INFINITY));
        assertEquals(0f, WeightExp.exp(LseMode.BASE2, Math.nextDown(WeightExp.ZERO_BELOW)));
        assertEquals(0f, WeightExp.exp(LseMode.BASEE, -90f), "e^-90 < 2^-126");
    }

    /**
     * Base 2: within 4 ulps. Base e: the scaled exponent is an fp32 product with an fp32 log2(e), whose two roundings
     * move the result by up to |y| ln 2 x 2^-23 relative; within that plus 4 ulps.
     */
    @Test
    void withinAFewUlpsOfTheTrueValueOnFreshRandomArguments() {
        SplittableRandom random = new SplittableRandom(7);
        for (int i = 0; i < 200_000; i++) {
            float x2 = (float) (-random.nextDouble() * (i % 2 == 0 ? 30 : 125));
            assertWithin(Math.pow(2, x2), WeightExp.exp(LseMode.BASE2, x2), 4, 0, x2);
            float xe = (float) (-random.nextDouble() * (i % 2 == 0 ? 20 : 87));
            double y = -xe * WeightExp.LOG2_E;
            assertWithin(Math.exp(xe), WeightExp.exp(LseMode.BASEE, xe), 4, y * Math.log(2) * 0x1p-23, xe);
        }
    }

    private static void assertWithin(double expected, float got, int ulps, double relative, float x) {
        double bound = ulps * Math.ulp((float) expected) + relative * expected;
        assertTrue(Math.abs(got - expected) <= bound, "x = " + x + ": " + got + " vs " + expected);
    }
}
