package io.github.dcp4j.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * Whether the GPUs of a group can carry the LL128 protocol between them: every two ranks on one GPU, or on two GPUs
 * of one node joined by NVLink. A line must reach its reader whole, which NVLink (and one GPU's own memory) provides
 * and PCIe peer-to-peer does not (docs/PROTOCOL.md, "What the protocol assumes"), so a group with any other pair is
 * refused before a workspace is opened, naming the pair.
 */
public final class GpuLinks {
    /**
     * Where a rank's GPU is: its node (an identity every process of one machine shares, containers included, such as
     * the kernel's boot id), the node's name for messages, and the GPU's PCI address there.
     *
     * @param node     the node's identity
     * @param host     the node's name, for messages
     * @param pciBusId the GPU's PCI address (compared regardless of case)
     */
    public record Gpu(String node, String host, String pciBusId) {
        /** A rank's GPU, its PCI address in lower case. */
        public Gpu {
            Objects.requireNonNull(node, "node");
            Objects.requireNonNull(host, "host");
            Objects.requireNonNull(pciBusId, "pciBusId");
            pciBusId = pciBusId.toLowerCase(Locale.ROOT);
        }

        @Override
        public String toString() {
            return "GPU " + pciBusId + " on " + host;
        }
    }

    /** Whether two distinct GPUs of this node, by PCI address, are joined by NVLink. */
    @FunctionalInterface
    public interface Probe {
        /**
         * Whether two GPUs are joined by NVLink.
         *
         * @param pciBusIdA one GPU's PCI address
         * @param pciBusIdB the other's
         * @return true where NVLink joins them
         */
        boolean nvlink(String pciBusIdA, String pciBusIdB);
    }

    private GpuLinks() {
    }

    /**
     * Refuses a group whose rank r runs on {@code gpus.get(r)} where two ranks are on different nodes, or on two GPUs
     * that {@code probe} does not report joined by NVLink. Ranks on one GPU need no probe: a group on a single GPU
     * never asks it.
     *
     * @param gpus  rank r's GPU at index r
     * @param probe what says whether two GPUs of one node are joined by NVLink
     * @throws IllegalArgumentException naming the first pair that cannot carry LL128
     */
    public static void requireLl128Links(List<Gpu> gpus, Probe probe) {
        Objects.requireNonNull(gpus, "gpus");
        Objects.requireNonNull(probe, "probe");
        for (int a = 0; a < gpus.size(); a++) {
            for (int b = a + 1; b < gpus.size(); b++) {
                Gpu x = gpus.get(a);
                Gpu y = gpus.get(b);
                if (!x.node().equals(y.node())) {
                    throw new IllegalArgumentException("ranks " + a + " (" + x + ") and " + b + " (" + y + ") are on"
                            + " different nodes: a group's ranks share one node (CUDA IPC, docs/DEPLOYMENT.md)");
                }
                if (!x.pciBusId().equals(y.pciBusId()) && !probe.nvlink(x.pciBusId(), y.pciBusId())) {
                    throw new IllegalArgumentException("ranks " + a + " (" + x + ") and " + b + " (" + y + ") are"
                            + " not joined by NVLink: the LL128 protocol needs NVLink between every two GPUs of a group"
                            + " (over PCIe a line may arrive in pieces; docs/PROTOCOL.md)");
                }
            }
        }
    }

    /**
     * The driver's management library (NVML, {@code libnvidia-ml.so.1}) as the probe: {@code nvmlDeviceGetP2PStatus}
     * with the NVLink capability. Loaded on first use of the probe, and refused with the reason where it cannot be.
     *
     * @return the probe
     */
    public static Probe nvml() {
        return (a, b) -> Nvml.get().nvlink(a, b);
    }

    /** NVML's few calls this needs, through FFM. */
    private static final class Nvml {
        static final int SUCCESS = 0;
        static final int P2P_CAPS_INDEX_NVLINK = 2;  // nvmlGpuP2PCapsIndex_t
        static final int P2P_STATUS_OK = 0;          // nvmlGpuP2PStatus_t

        private static Nvml loaded;
        private static IllegalStateException failed;

        private final MethodHandle handleByBusId;
        private final MethodHandle p2pStatus;

        /** The library, loaded and initialised once; where that failed, the same reason at every call. */
        static synchronized Nvml get() {
            if (loaded == null && failed == null) {
                try {
                    loaded = new Nvml();
                } catch (IllegalStateException e) {
                    failed = e;
                }
            }
            if (failed != null) {
                throw new IllegalStateException(failed.getMessage(), failed);
            }
            return loaded;
        }

        private Nvml() {
            SymbolLookup lib;
            try {
                lib = SymbolLookup.libraryLookup("libnvidia-ml.so.1", Arena.global());
            } catch (IllegalArgumentException e) {
                throw new IllegalStateException("cannot tell whether the group's GPUs are joined by NVLink: NVML"
                        + " (libnvidia-ml.so.1, part of the NVIDIA driver) does not load here", e);
            }
            Linker linker = Linker.nativeLinker();
            MethodHandle init = linker.downcallHandle(find(lib, "nvmlInit_v2"), FunctionDescriptor.of(JAVA_INT));
            handleByBusId = linker.downcallHandle(find(lib, "nvmlDeviceGetHandleByPciBusId_v2"),
                    FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
            p2pStatus = linker.downcallHandle(find(lib, "nvmlDeviceGetP2PStatus"),
                    FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT, ADDRESS));
            int rc;
            try {
                rc = (int) init.invokeExact();
            } catch (Throwable t) {
                throw new IllegalStateException("nvmlInit_v2 failed", t);
            }
            if (rc != SUCCESS) {
                throw new IllegalStateException("cannot tell whether the group's GPUs are joined by NVLink:"
                        + " nvmlInit_v2 returned " + rc);
            }
        }

        private static MemorySegment find(SymbolLookup lib, String name) {
            return lib.find(name).orElseThrow(() -> new IllegalStateException("NVML has no " + name));
        }

        boolean nvlink(String a, String b) {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment status = arena.allocate(JAVA_INT);
                int rc = (int) p2pStatus.invokeExact(handle(arena, a), handle(arena, b), P2P_CAPS_INDEX_NVLINK,
                        status);
                if (rc != SUCCESS) {
                    throw new IllegalStateException("nvmlDeviceGetP2PStatus(" + a + ", " + b + ", NVLink) returned "
                            + rc);
                }
                return status.get(JAVA_INT, 0) == P2P_STATUS_OK;
            } catch (RuntimeException e) {
                throw e;
            } catch (Throwable t) {
                throw new IllegalStateException("nvmlDeviceGetP2PStatus(" + a + ", " + b + ") failed", t);
            }
        }

        private MemorySegment handle(Arena arena, String busId) throws Throwable {
            MemorySegment device = arena.allocate(ADDRESS);
            int rc = (int) handleByBusId.invokeExact(arena.allocateFrom(busId), device);
            if (rc != SUCCESS) {
                throw new IllegalStateException("NVML knows no GPU at PCI address " + busId + " (nvmlDeviceGetHandle"
                        + "ByPciBusId_v2 returned " + rc + ")");
            }
            return device.get(ADDRESS, 0);
        }
    }
}
