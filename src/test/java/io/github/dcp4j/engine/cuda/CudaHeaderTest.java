package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.layout.KernelAbi;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.op.WeightExp;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The kernel's header is generated from the Java definition; the build compiles it with nvcc, whose static_asserts
 * check every struct offset. Here: the generated text carries the Java values and the structs in Java's order.
 */
class CudaHeaderTest {
    private final String header = CudaHeader.generate();

    @Test
    void carriesEveryProtocolConstantWithItsJavaValue() {
        assertTrue(header.contains("constexpr int kLineBytes = 128;"), header);
        assertTrue(header.contains("constexpr int kLineDataWords = 15;"));
        assertTrue(header.contains("constexpr int kPayloadOffset = 128;"));
        assertTrue(header.contains("constexpr int kMaxGroups = 32;"));
        assertTrue(header.contains("constexpr int kTimeoutLseLine = " + Ll128.TIMEOUT_LSE_LINE + ";"));
        assertTrue(header.contains("constexpr unsigned long long kFlagTag = 0x4c4c313200000000ULL;"));
        assertTrue(header.contains("constexpr unsigned long long kPoisonedBit = 0x80000000ULL;"));
    }

    @Test
    void carriesTheWeightExponentialsConstantsBitForBit() {
        assertTrue(header.contains("constexpr float kLog2E = " + Float.toHexString(WeightExp.LOG2_E) + "f;"));
        assertTrue(header.contains("constexpr float kZeroBelow = " + Float.toHexString(WeightExp.ZERO_BELOW) + "f;"));
        float[] taylor = WeightExp.taylorCoefficients();
        assertEquals(WeightExp.TAYLOR_DEGREE + 1, taylor.length);
        for (int k = 0; k < taylor.length; k++) {
            assertTrue(header.contains("struct Taylor<" + k + "> {\n    static constexpr float kValue = "
                    + Float.toHexString(taylor[k]) + "f;"), "coefficient " + k);
        }
    }

    @Test
    void declaresTheArgumentStructsInJavaOrderWithCheckedOffsets() {
        for (List<KernelAbi.Field> fields : List.of(KernelAbi.RANK_ARGS, KernelAbi.LAUNCH_FIELDS)) {
            int previous = -1;
            for (KernelAbi.Field f : fields) {
                int at = header.indexOf("    " + f.cType() + " " + f.name() + ";");
                assertTrue(at > previous, f.name() + " declared in order");
                previous = at;
                assertTrue(header.contains(", " + f.name() + ") == " + KernelAbi.offset(fields, f.name())),
                        "offset of " + f.name() + " is asserted");
            }
        }
        assertTrue(header.contains("static_assert(sizeof(RankArgs) == 80"));
        for (int capacity : KernelAbi.RANK_CAPACITIES) {
            assertTrue(header.contains("static_assert(sizeof(LaunchArgs<" + capacity + ">) == "
                    + KernelAbi.launchArgsBytes(capacity)));
            assertTrue(header.contains("static_assert(__builtin_offsetof(LaunchArgs<" + capacity + ">, ranks) == "
                    + KernelAbi.ranksOffset()));
        }
        assertEquals(KernelAbi.workspacesOffset() + Ll128.MAX_RANKS * 8, KernelAbi.ranksOffset());
    }
}
