package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.GpuLinks;
import io.github.dcp4j.engine.FirstFailure;
import io.github.dcp4j.op.Crossovers;
import io.github.dcp4j.op.Variant;
import io.github.dcp4j.op.VariantWorkspace;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.peer.IpcWorkspaces;
import io.github.dcp4j.rendezvous.LauncherEnvironment;
import io.github.dcp4j.rendezvous.Rendezvous;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * This process as one rank of a group started by {@code dcp4j launch}, torchrun, mpirun or srun: the rendezvous
 * from the environment ({@link Rendezvous#fromEnvironment}), the GPU {@code local rank mod GPUs}, and how many ranks
 * share that GPU ({@code ceil(ranks on this node / GPUs)}), the local rank and node size as the launcher gives them
 * ({@link LauncherEnvironment}). {@link #openRank} is the whole bootstrap in one call; the parts are open
 * for callers that size several workspaces on one rendezvous.
 */
public final class RankSetup implements AutoCloseable {
    /** The kernel's id of this boot of the machine: the same in every process and container on it. */
    private static final Path BOOT_ID = Path.of("/proc/sys/kernel/random/boot_id");
    /** The machine's name, read without a name lookup (which can stall where DNS is slow). */
    private static final Path HOST_NAME = Path.of("/proc/sys/kernel/hostname");

    private final Rendezvous rendezvous;
    private final CudaDevice device;
    private final int ranksSharingGpu;

    private RankSetup(Rendezvous rendezvous, CudaDevice device, int ranksSharingGpu) {
        this.rendezvous = rendezvous;
        this.device = device;
        this.ranksSharingGpu = ranksSharingGpu;
    }

    /** {@return whether this process was started as a rank of a multi-process group} */
    public static boolean inEnvironment() {
        return Rendezvous.inEnvironment(System.getenv());
    }

    /**
     * How long a rank waits at the rendezvous when its peers' kernels wait {@code kernelTimeout}: long enough for a
     * peer whose kernel is timing out (on a GPU it shares in time slices) to arrive.
     *
     * @param kernelTimeout the kernel's wait for a peer's line
     * @return three times it, plus 10 s
     */
    public static Duration rendezvousTimeout(Duration kernelTimeout) {
        return kernelTimeout.multipliedBy(3).plusSeconds(10);
    }

    /**
     * This rank, from the environment (collective: joins the rendezvous); {@code timeout} is the kernel's (see
     * {@link #rendezvousTimeout}). {@code log} receives one line naming the rank, its GPU and the rendezvous.
     *
     * @param timeout the kernel's wait for a peer's line
     * @param log     receives the line describing this rank
     * @return this rank; close it to leave the rendezvous and release the GPU
     * @throws IllegalStateException where no GPU can be used (with the driver's reason)
     * @throws IllegalArgumentException where two ranks are on different nodes or on two GPUs not joined by NVLink
     *         ({@link GpuLinks}; every rank refuses alike)
     * @throws io.github.dcp4j.rendezvous.EnvironmentException where a variable of the launcher or the rendezvous is
     *         missing or malformed, DCP4J_JOB_SECRET among them (naming it, its value and what it may be; before
     *         anything is opened)
     */
    public static RankSetup fromEnvironment(Duration timeout, Consumer<String> log) {
        Objects.requireNonNull(log, "log");
        Map<String, String> env = System.getenv();
        Rendezvous rendezvous = Rendezvous.fromEnvironment(env, rendezvousTimeout(timeout));
        try {
            Cuda.Availability a = Cuda.availability();
            if (!a.available()) {
                throw new IllegalStateException("rank " + rendezvous.rank() + " needs a GPU: " + a.reason());
            }
            int world = rendezvous.worldSize();
            LauncherEnvironment launch = LauncherEnvironment.of(env);
            int local = launch.localRank();
            int localWorld = launch.localWorldSize();
            int gpus = a.deviceCount();
            int sharing = (localWorld + gpus - 1) / gpus;
            CudaDevice device = CudaDevice.open(local % gpus);
            try {
                requireLl128Links(rendezvous, device);
            } catch (RuntimeException e) {
                device.close();
                throw e;
            }
            log.accept(String.format("rank %d of %d (pid %d): %s, %d rank(s) per GPU, rendezvous %s",
                    rendezvous.rank(), world, ProcessHandle.current().pid(), device, sharing, rendezvous.describe()));
            return new RankSetup(rendezvous, device, sharing);
        } catch (RuntimeException e) {
            rendezvous.close();
            throw e;
        }
    }

    /**
     * Every rank's node and GPU (collective), refused where two ranks cannot carry LL128 between them
     * ({@link GpuLinks}). Every rank gathers the same list and probes it; the verdicts are gathered too, so that a rank
     * whose probe fails alone (NVML missing there) fails every rank alike, with the lowest refusing rank's reason.
     */
    private static void requireLl128Links(Rendezvous rendezvous, CudaDevice device) {
        String host = firstLine(HOST_NAME).orElse("unknown host");
        String mine = firstLine(BOOT_ID).orElse(host) + "\n" + host + "\n" + device.pciBusId();
        List<GpuLinks.Gpu> gpus = new ArrayList<>();
        for (byte[] part : rendezvous.allGather("gpu-links", mine.getBytes(StandardCharsets.UTF_8))) {
            String[] where = new String(part, StandardCharsets.UTF_8).split("\n", 3);
            if (where.length != 3) {
                throw new IllegalStateException("a rank's GPU entry in the rendezvous is malformed");
            }
            gpus.add(new GpuLinks.Gpu(where[0], where[1], where[2]));
        }
        String verdict = "";
        try {
            GpuLinks.requireLl128Links(gpus, GpuLinks.nvml());
        } catch (IllegalArgumentException | IllegalStateException e) {
            verdict = e.getMessage();
        }
        List<byte[]> verdicts = rendezvous.allGather("gpu-links-verdict", verdict.getBytes(StandardCharsets.UTF_8));
        for (int r = 0; r < verdicts.size(); r++) {
            String refusal = new String(verdicts.get(r), StandardCharsets.UTF_8);
            if (!refusal.isEmpty()) {
                throw new IllegalArgumentException("rank " + r + " refuses the group: " + refusal);
            }
        }
    }

    private static Optional<String> firstLine(Path file) {
        try {
            return Files.readAllLines(file).stream().findFirst().map(String::strip).filter(l -> !l.isEmpty());
        } catch (IOException e) {
            return Optional.empty();
        }
    }

    /**
     * The whole bootstrap (collective): this rank from the environment, CUDA IPC workspaces sized by {@code spec},
     * and the rank engine on them, which closes the workspaces, the GPU and the rendezvous after itself.
     *
     * @param spec    the workspaces' size, the same on every rank
     * @param timeout the kernel's wait for a peer's line
     * @param log     receives the line describing this rank
     * @return this rank's engine
     */
    public static CudaRankEngine openRank(WorkspaceSpec spec, Duration timeout, Consumer<String> log) {
        return openRank(spec, Variant.LL128, timeout, log);
    }

    /**
     * As {@link #openRank(WorkspaceSpec, Duration, Consumer)}, every rank running {@code variant}'s protocol (the same
     * on every rank, checked), on workspaces of that variant's size ({@link #variantWorkspace}).
     *
     * @param spec    the largest call the group will make, the same on every rank
     * @param variant the protocol variant
     * @param timeout the kernel's wait for a peer's line
     * @param log     receives the line describing this rank
     * @return this rank's engine
     */
    public static CudaRankEngine openRank(WorkspaceSpec spec, Variant variant, Duration timeout,
                                          Consumer<String> log) {
        Objects.requireNonNull(spec, "spec");
        Objects.requireNonNull(variant, "variant");
        RankSetup setup = fromEnvironment(timeout, log);
        IpcWorkspaces workspaces = null;
        try {
            VariantWorkspace variants = setup.variantWorkspace(variant, spec);
            workspaces = setup.openWorkspaces(variants.bytes());
            IpcWorkspaces opened = workspaces;
            return CudaRankEngine.open(workspaces, setup.rendezvous, timeout, setup.ranksSharingGpu,
                    () -> FirstFailure.runAll(opened::close, setup::close), variants, spec.bytes());
        } catch (RuntimeException e) {
            if (workspaces != null) {
                workspaces.close();
            }
            setup.close();
            throw e;
        }
    }

    /** {@return the group's rendezvous} */
    public Rendezvous rendezvous() {
        return rendezvous;
    }

    /** {@return this rank} */
    public int rank() {
        return rendezvous.rank();
    }

    /** {@return the ranks in the group} */
    public int worldSize() {
        return rendezvous.worldSize();
    }

    /** {@return the GPU this rank runs on} */
    public CudaDevice device() {
        return device;
    }

    /** {@return the ranks whose kernels share this rank's GPU} */
    public int ranksSharingGpu() {
        return ranksSharingGpu;
    }

    /**
     * This rank's CUDA IPC workspaces of {@code bytes} (collective).
     *
     * @param bytes each rank's workspace size
     * @return every rank's workspace as mapped here; close it after the engine on it
     */
    public IpcWorkspaces openWorkspaces(long bytes) {
        return IpcWorkspaces.open(device, bytes, rendezvous);
    }

    /**
     * The rank engine over {@code workspaces} (collective); close it before the workspaces.
     *
     * @param workspaces the group's workspaces from {@link #openWorkspaces}
     * @param timeout    the kernel's wait for a peer's line
     * @return this rank's engine
     */
    public CudaRankEngine openEngine(IpcWorkspaces workspaces, Duration timeout) {
        return CudaRankEngine.open(workspaces, rendezvous, timeout, ranksSharingGpu);
    }

    /**
     * The regions a group of {@code variant} needs for {@code spec} on this rank's GPU (auto picks by the crossovers
     * of its architecture); open the workspaces with their {@link VariantWorkspace#bytes()}.
     *
     * @param variant the protocol variant
     * @param spec    the largest call the group will make
     * @return the variant's workspace
     */
    public VariantWorkspace variantWorkspace(Variant variant, WorkspaceSpec spec) {
        return VariantWorkspace.of(variant, Crossovers.forArchitecture(device.computeCapability()), spec);
    }

    /**
     * The rank engine of {@code variants}' variant over {@code workspaces} (collective; every rank names the same
     * variant); close it before the workspaces.
     *
     * @param workspaces the group's workspaces from {@link #openWorkspaces}, of {@code variants.bytes()}
     * @param timeout    the kernel's wait for a peer's line
     * @param variants   the variant's workspace ({@link #variantWorkspace})
     * @param spec       the spec the workspaces were sized for: calls are validated against its contract size
     * @return this rank's engine
     */
    public CudaRankEngine openEngine(IpcWorkspaces workspaces, Duration timeout, VariantWorkspace variants,
                                     WorkspaceSpec spec) {
        return CudaRankEngine.open(workspaces, rendezvous, timeout, ranksSharingGpu, () -> { }, variants,
                spec.bytes());
    }

    /** Closes the GPU and leaves the rendezvous. */
    @Override
    public void close() {
        try {
            device.close();
        } finally {
            rendezvous.close();
        }
    }
}
