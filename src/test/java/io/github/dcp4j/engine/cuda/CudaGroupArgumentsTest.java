package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.Variant;
import io.github.dcp4j.op.WorkspaceSpec;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** A group's opening refuses bad arguments, naming them, before any GPU is asked anything (no GPU needed). */
class CudaGroupArgumentsTest {
    private static final WorkspaceSpec SPEC = new WorkspaceSpec(2, 4, 3, 128, DType.BF16);

    @Test
    void aDeviceListOfAnotherSizeThanTheRanksIsRefusedNamingBoth() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> CudaGroup.open(List.of(), SPEC, CudaGroup.DEFAULT_TIMEOUT));
        assertEquals("devices must name one GPU per rank (3); got 0", e.getMessage());
    }

    @Test
    void missingDevicesAreRefusedNamingTheRank() {
        NullPointerException e = assertThrows(NullPointerException.class,
                () -> CudaGroup.open(Arrays.asList(new CudaDevice[3]), SPEC, CudaGroup.DEFAULT_TIMEOUT));
        assertEquals("devices[0]", e.getMessage());
        assertEquals("devices", assertThrows(NullPointerException.class,
                () -> CudaGroup.open((List<CudaDevice>) null, SPEC, CudaGroup.DEFAULT_TIMEOUT)).getMessage());
    }

    @Test
    void aTimeoutThatIsNotPositiveIsRefusedNamingIt() {
        for (Duration bad : List.of(Duration.ZERO, Duration.ofMillis(-1))) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> CudaGroup.open(List.of(), SPEC, bad, Variant.LL128));
            assertEquals("timeout must be positive; got " + bad, e.getMessage());
        }
    }
}
