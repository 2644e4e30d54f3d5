package io.github.dcp4j.cuda;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Which groups can carry LL128, against a fake topology. No GPU. */
class GpuLinksTest {
    /** A node whose GPUs a, b and c are joined by NVLink to each other, and d only over PCIe. */
    private static final Set<String> NVLINKED = Set.of("0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0");

    private static final class FakeNode implements GpuLinks.Probe {
        final List<String> asked = new ArrayList<>();

        @Override
        public boolean nvlink(String a, String b) {
            asked.add(a + "-" + b);
            return NVLINKED.contains(a) && NVLINKED.contains(b);
        }
    }

    private static GpuLinks.Gpu gpu(String bus) {
        return new GpuLinks.Gpu("boot-1", "node-1", bus);
    }

    @Test
    void ranksOnOneGpuPassWithoutAskingTheProbe() {
        GpuLinks.requireLl128Links(List.of(gpu("0000:19:00.0"), gpu("0000:19:00.0"), gpu("0000:19:00.0")),
                (a, b) -> {
                    throw new AssertionError("asked about " + a + " and " + b);
                });
    }

    @Test
    void gpusJoinedByNvLinkPassAndTheProbeIsAskedForEveryTwoRanksOnDistinctGpus() {
        FakeNode node = new FakeNode();
        GpuLinks.requireLl128Links(List.of(gpu("0000:19:00.0"), gpu("0000:3B:00.0"), gpu("0000:4c:00.0"),
                gpu("0000:19:00.0")), node);
        // ranks 0 and 3 share a GPU; the PCI address is compared regardless of case
        assertEquals(List.of("0000:19:00.0-0000:3b:00.0", "0000:19:00.0-0000:4c:00.0", "0000:3b:00.0-0000:4c:00.0",
                "0000:3b:00.0-0000:19:00.0", "0000:4c:00.0-0000:19:00.0"), node.asked);
    }

    @Test
    void aPairJoinedOnlyOverPcieIsRefusedNamingBothRanksAndTheirGpus() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> GpuLinks.requireLl128Links(
                List.of(gpu("0000:19:00.0"), gpu("0000:3b:00.0"), gpu("0000:9a:00.0")), new FakeNode()));
        assertTrue(e.getMessage().contains("ranks 0 (GPU 0000:19:00.0 on node-1) and 2 (GPU 0000:9a:00.0 on node-1)")
                && e.getMessage().contains("not joined by NVLink"), e.getMessage());
    }

    @Test
    void ranksOnTwoNodesAreRefusedNamingTheNodes() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> GpuLinks.requireLl128Links(
                List.of(gpu("0000:19:00.0"), new GpuLinks.Gpu("boot-2", "node-2", "0000:19:00.0")), new FakeNode()));
        assertTrue(e.getMessage().contains("on node-1) and 1 (GPU 0000:19:00.0 on node-2) are on different nodes"),
                e.getMessage());
    }

    @Test
    void containersOfOneMachineAreOneNodeWhateverTheirHostNames() {
        GpuLinks.requireLl128Links(List.of(new GpuLinks.Gpu("boot-1", "pod-a", "0000:19:00.0"),
                new GpuLinks.Gpu("boot-1", "pod-b", "0000:3b:00.0")), new FakeNode());
    }

    @Test
    void withoutNvmlTheProbeSaysWhyItCannotTell() {
        org.junit.jupiter.api.Assumptions.assumeFalse(Cuda.availability().available(), "a driver is present");
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> GpuLinks.nvml().nvlink("0000:19:00.0", "0000:3b:00.0"));
        assertTrue(e.getMessage().contains("cannot tell whether the group's GPUs are joined by NVLink"),
                e.getMessage());
    }
}
