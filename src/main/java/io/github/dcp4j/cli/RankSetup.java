package io.github.dcp4j.cli;

import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.engine.cuda.CudaRankEngine;
import io.github.dcp4j.peer.IpcWorkspaces;
import io.github.dcp4j.rendezvous.Rendezvous;

import java.io.PrintWriter;
import java.time.Duration;
import java.util.Map;

/**
 * This process as one rank of a group started by {@code launch} (or torchrun, or a batch scheduler): the rendezvous
 * from the environment, the GPU {@code LOCAL_RANK mod GPUs}, and how many ranks share that GPU. Opens CUDA IPC
 * workspaces and the rank engine on them.
 */
final class RankSetup implements AutoCloseable {
    /** Ranks of this node (torchrun's name); with LOCAL_RANK it picks the GPU. */
    static final String LOCAL_WORLD_SIZE = "LOCAL_WORLD_SIZE";
    static final String LOCAL_RANK = "LOCAL_RANK";

    private final Rendezvous rendezvous;
    private final CudaDevice device;
    private final int ranksSharingGpu;

    private RankSetup(Rendezvous rendezvous, CudaDevice device, int ranksSharingGpu) {
        this.rendezvous = rendezvous;
        this.device = device;
        this.ranksSharingGpu = ranksSharingGpu;
    }

    /** Whether this process was started as a rank of a multi-process group. */
    static boolean inEnvironment() {
        return Rendezvous.inEnvironment(System.getenv());
    }

    /**
     * How long a rank waits at the rendezvous when its peers' kernels wait {@code kernelTimeout}: long enough for a
     * peer whose kernel is timing out (on a GPU it shares in time slices) to arrive.
     */
    static Duration rendezvousTimeout(Duration kernelTimeout) {
        return kernelTimeout.multipliedBy(3).plusSeconds(10);
    }

    /** This rank, from the environment; {@code timeout} is the kernel's (see {@link #rendezvousTimeout}). */
    static RankSetup fromEnvironment(Duration timeout, PrintWriter err) {
        Map<String, String> env = System.getenv();
        Rendezvous rendezvous = Rendezvous.fromEnvironment(env, rendezvousTimeout(timeout));
        try {
            Cuda.Availability a = Cuda.availability();
            if (!a.available()) {
                throw new IllegalStateException("rank " + rendezvous.rank() + " needs a GPU: " + a.reason());
            }
            int world = rendezvous.worldSize();
            int local = Integer.parseInt(env.getOrDefault(LOCAL_RANK, "" + rendezvous.rank()));
            int localWorld = Integer.parseInt(env.getOrDefault(LOCAL_WORLD_SIZE, "" + world));
            int gpus = a.deviceCount();
            int sharing = (localWorld + gpus - 1) / gpus;
            CudaDevice device = CudaDevice.open(local % gpus);
            err.printf("rank %d of %d (pid %d): %s, %d rank(s) per GPU, rendezvous %s%n", rendezvous.rank(), world,
                    ProcessHandle.current().pid(), device, sharing, rendezvous.describe());
            err.flush();
            return new RankSetup(rendezvous, device, sharing);
        } catch (RuntimeException e) {
            rendezvous.close();
            throw e;
        }
    }

    Rendezvous rendezvous() {
        return rendezvous;
    }

    int rank() {
        return rendezvous.rank();
    }

    int worldSize() {
        return rendezvous.worldSize();
    }

    CudaDevice device() {
        return device;
    }

    int ranksSharingGpu() {
        return ranksSharingGpu;
    }

    /** This rank's CUDA IPC workspaces of {@code bytes} (collective). */
    IpcWorkspaces openWorkspaces(long bytes) {
        return IpcWorkspaces.open(device, bytes, rendezvous);
    }

    /** The rank engine over {@code workspaces} (collective). */
    CudaRankEngine openEngine(IpcWorkspaces workspaces, Duration timeout) {
        return CudaRankEngine.open(workspaces, rendezvous, timeout, ranksSharingGpu);
    }

    @Override
    public void close() {
        try {
            device.close();
        } finally {
            rendezvous.close();
        }
    }
}
