package io.github.dcp4j.bench;

import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.engine.cuda.RankSetup;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * The benchmark's {@link Deployment} opened by the name {@code bench --ranks} gives it, with the devices and the
 * rendezvous it runs on, which closing releases (the deployments themselves leave them to their caller).
 */
public final class OpenedDeployment implements AutoCloseable {
    /** The deployments' names, as {@code --ranks} takes them. */
    public static final List<String> KINDS = List.of("loopback", "threads", "processes");

    private final Deployment deployment;
    private final List<CudaDevice> devices;
    private final RankSetup setup;

    private OpenedDeployment(Deployment deployment, List<CudaDevice> devices, RankSetup setup) {
        this.deployment = deployment;
        this.devices = devices;
        this.setup = setup;
    }

    /**
     * Opens the deployment {@code ranks} names: loopback on GPU 0, threads on GPUs 0 to min(cp, GPUs) - 1, or
     * processes as this process's rank of the group in the environment (collective: joins the rendezvous).
     *
     * @param ranks   loopback, threads or processes ({@link #KINDS})
     * @param cp      ranks in the group
     * @param timeout how long a rank waits for a peer's line
     * @param log     receives the line describing this rank, for processes
     * @return the deployment; close it to release its devices and rendezvous
     * @throws IllegalArgumentException for another name, or processes where this process is not a rank of a group
     * @throws IllegalStateException    for loopback or threads where no GPU can be used (with the reason)
     */
    public static OpenedDeployment open(String ranks, int cp, Duration timeout, Consumer<String> log) {
        Cuda.Availability a = Cuda.availability();
        switch (ranks) {
            case "loopback" -> {
                requireGpu(a);
                CudaDevice d = CudaDevice.open(0);
                return new OpenedDeployment(new LoopbackDeployment(d, timeout), List.of(d), null);
            }
            case "threads" -> {
                requireGpu(a);
                List<CudaDevice> gpus = new ArrayList<>();
                try {
                    for (int i = 0; i < Math.min(cp, a.deviceCount()); i++) {
                        gpus.add(CudaDevice.open(i));
                    }
                } catch (RuntimeException e) {
                    gpus.forEach(CudaDevice::close);
                    throw e;
                }
                return new OpenedDeployment(new ThreadDeployment(gpus, timeout), gpus, null);
            }
            case "processes" -> {
                if (!RankSetup.inEnvironment()) {
                    throw new IllegalArgumentException("--ranks processes runs one rank per process: start it with"
                            + " `dcp4j launch --nproc " + cp + " -- bench --ranks processes`");
                }
                RankSetup setup = RankSetup.fromEnvironment(timeout, log);
                return new OpenedDeployment(new ProcessDeployment(setup.rendezvous(), setup.device(),
                        setup.ranksSharingGpu(), timeout), List.of(), setup);
            }
            default -> throw new IllegalArgumentException("--ranks must be one of " + String.join(", ", KINDS)
                    + "; got '" + ranks + "'");
        }
    }

    private static void requireGpu(Cuda.Availability a) {
        if (!a.available()) {
            throw new IllegalStateException("bench needs a GPU: " + a.reason());
        }
    }

    /** {@return the deployment} */
    public Deployment deployment() {
        return deployment;
    }

    @Override
    public void close() {
        devices.forEach(CudaDevice::close);
        if (setup != null) {
            setup.close();
        }
    }
}
