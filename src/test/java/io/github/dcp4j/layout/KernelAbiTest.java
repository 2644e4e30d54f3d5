package io.github.dcp4j.layout;

import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** The launch parameter's sizes and the kernel's division by launch constants. No GPU. */
class KernelAbiTest {

    @Test
    void theMultiplyHighDivisionIsExactForEveryDividendBelowTwoToThe31() {
        SplittableRandom random = new SplittableRandom(31);
        for (int d = 1; d <= 2100; d++) {
            long magic = KernelAbi.divisorMagic(d);
            for (int n : new int[] {0, 1, d - 1, d, d + 1, 2 * d - 1, Integer.MAX_VALUE, Integer.MAX_VALUE - 1}) {
                assertEquals(n / d, KernelAbi.divide(n, d, magic), n + " / " + d);
            }
            for (int i = 0; i < 200; i++) {
                int n = random.nextInt(Integer.MAX_VALUE);
                assertEquals(n / d, KernelAbi.divide(n, d, magic), n + " / " + d);
            }
        }
        for (int d : new int[] {65_535, 65_536, 1 << 30, Integer.MAX_VALUE}) {
            long magic = KernelAbi.divisorMagic(d);
            for (int i = 0; i < 2000; i++) {
                int n = random.nextInt(Integer.MAX_VALUE);
                assertEquals(n / d, KernelAbi.divide(n, d, magic), n + " / " + d);
            }
        }
        assertThrows(IllegalArgumentException.class, () -> KernelAbi.divisorMagic(0));
    }

    @Test
    void aLaunchTakesTheSmallestCapacityThatHoldsItsRanks() {
        assertEquals(8, KernelAbi.capacityFor(1));
        assertEquals(8, KernelAbi.capacityFor(8));
        assertEquals(64, KernelAbi.capacityFor(9));
        assertEquals(64, KernelAbi.capacityFor(64));
        assertThrows(IllegalArgumentException.class, () -> KernelAbi.capacityFor(65));
        assertEquals(KernelAbi.ranksOffset() + 8 * KernelAbi.size(KernelAbi.RANK_ARGS), KernelAbi.launchArgsBytes(8));
    }
}
