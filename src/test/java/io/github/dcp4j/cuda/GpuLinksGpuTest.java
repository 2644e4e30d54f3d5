package io.github.dcp4j.cuda;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertTrue;

/** The driver's PCI address of this GPU and NVML's answer for it, on real hardware. */
@Tag("gpu")
class GpuLinksGpuTest {
    @Test
    void theDriverNamesThisGpusPciAddressAndNvmlAnswersForIt() {
        Cuda.Availability a = Cuda.availability();
        Assumptions.assumeTrue(a.available(), () -> "no CUDA device: " + a.reason());
        try (CudaDevice device = CudaDevice.open(0)) {
            String bus = device.pciBusId();
            assertTrue(bus.matches("[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\\.[0-9A-Fa-f]"), bus);
            // NVML finds the GPU by the driver's address and answers the NVLink query (either way) without an error
            GpuLinks.nvml().nvlink(bus, bus);
            // a group of ranks on this one GPU passes with the real probe
            GpuLinks.Gpu here = new GpuLinks.Gpu("this machine", "here", bus);
            GpuLinks.requireLl128Links(List.of(here, here), GpuLinks.nvml());
        }
    }
}
