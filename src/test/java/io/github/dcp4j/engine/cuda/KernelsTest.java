package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.layout.KernelAbi;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.Variant;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Which kernels a call of each variant launches, against the kernels the build compiled (no GPU needed). */
class KernelsTest {

    @Test
    void eachVariantLaunchesItsKernelsInOrder() {
        assertEquals(List.of("dcp4j_ll128row_bf16_base2_r8"),
                Kernels.kernelNames(Variant.LL128, DType.BF16, LseMode.BASE2, 8, true));
        assertEquals(List.of("dcp4j_ll_fp16_basee_r64"),
                Kernels.kernelNames(Variant.LL, DType.FP16, LseMode.BASEE, 64, false));
        assertEquals(List.of("dcp4j_unfusedcopy_bf16_r64", "dcp4j_unfusedmerge_bf16_basee_r64"),
                Kernels.kernelNames(Variant.UNFUSED, DType.BF16, LseMode.BASEE, 64, false));
        assertThrows(IllegalArgumentException.class,
                () -> Kernels.kernelNames(Variant.AUTO, DType.BF16, LseMode.BASE2, 64, false));
        assertEquals(8, Kernels.capacity(Variant.LL128, 8));
        assertEquals(64, Kernels.capacity(Variant.SIMPLE, 1));
    }

    /** Every kernel a call can ask for is an entry of the PTX the build compiled (skipped where built without it). */
    @Test
    void everyKernelAskedForIsCompiled() throws IOException {
        Set<String> entries;
        // the PTX that cuda.KernelModule loads where no SASS is built for the GPU
        try (InputStream in = KernelsTest.class.getResourceAsStream(
                "/io/github/dcp4j/cuda/kernels/dcp_lse_reduce.compute_90.ptx")) {
            Assumptions.assumeTrue(in != null, "built with -Dkernels.skip: no kernels in the jar");
            Matcher m = Pattern.compile("\\.entry (\\w+)").matcher(new String(in.readAllBytes(),
                    StandardCharsets.UTF_8));
            entries = m.results().map(r -> r.group(1)).collect(Collectors.toSet());
        }
        for (Variant v : List.of(Variant.LL128, Variant.LL, Variant.SIMPLE, Variant.UNFUSED)) {
            for (int ranks : List.of(1, 8, 9, 64)) {
                for (DType dtype : List.of(DType.BF16, DType.FP16)) {
                    for (LseMode mode : LseMode.values()) {
                        for (boolean row : new boolean[] {false, true}) {
                            for (String name : Kernels.kernelNames(v, dtype, mode, Kernels.capacity(v, ranks), row)) {
                                assertTrue(entries.contains(name), name + " is not compiled");
                            }
                        }
                    }
                }
            }
            assertTrue(entries.contains(Kernels.EMPTY_KERNEL + "_r" + Kernels.capacity(v, 1)));
        }
        assertTrue(KernelAbi.RANK_CAPACITIES.contains(64));
    }
}
