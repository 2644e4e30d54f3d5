package io.github.dcp4j.layout;

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
    }

    @Test
    void declaresTheArgumentStructsInJavaOrderWithCheckedOffsets() {
        for (List<KernelAbi.Field> fields : List.of(KernelAbi.RANK_ARGS, KernelAbi.LAUNCH_ARGS)) {
            int previous = -1;
            for (KernelAbi.Field f : fields) {
                int at = header.indexOf("    " + f.cType() + " " + f.name() + ";");
                assertTrue(at > previous, f.name() + " declared in order");
                previous = at;
                assertTrue(header.contains(", " + f.name() + ") == " + KernelAbi.offset(fields, f.name())),
                        "offset of " + f.name() + " is asserted");
            }
        }
        assertTrue(header.contains("static_assert(sizeof(RankArgs) == 104"));
        assertEquals(128, KernelAbi.size(KernelAbi.LAUNCH_ARGS));
    }
}
