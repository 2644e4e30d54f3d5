package io.github.dcp4j.cli;

import io.github.dcp4j.bench.Deployment;
import io.github.dcp4j.bench.LoopbackDeployment;
import io.github.dcp4j.bench.ProcessDeployment;
import io.github.dcp4j.bench.ThreadDeployment;
import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.engine.cuda.RankSetup;

import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/** The benchmark's deployment chosen by {@code --ranks}, with the devices and rendezvous it holds. */
final class Ranks implements AutoCloseable {
    /** The values of {@code --ranks}. */
    static final List<String> KINDS = List.of("loopback", "threads", "processes");

    private final Deployment deployment;
    private final List<CudaDevice> devices;
    private final RankSetup setup;

    private Ranks(Deployment deployment, List<CudaDevice> devices, RankSetup setup) {
        this.deployment = deployment;
        this.devices = devices;
        this.setup = setup;
    }

    static Ranks open(String ranks, int cp, Duration timeout, PrintWriter err) {
        Cuda.Availability a = Cuda.availability();
        switch (ranks) {
            case "loopback" -> {
                requireGpu(a);
                CudaDevice d = CudaDevice.open(0);
                return new Ranks(new LoopbackDeployment(d, timeout), List.of(d), null);
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
                return new Ranks(new ThreadDeployment(gpus, timeout), gpus, null);
            }
            case "processes" -> {
                if (!RankSetup.inEnvironment()) {
                    throw new IllegalArgumentException("--ranks processes runs one rank per process: start it with"
                            + " `dcp4j launch --nproc " + cp + " -- bench --ranks processes`");
                }
                RankSetup setup = RankSetup.fromEnvironment(timeout, Log.to(err));
                return new Ranks(new ProcessDeployment(setup.rendezvous(), setup.device(), setup.ranksSharingGpu(),
                        timeout), List.of(), setup);
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

    Deployment deployment() {
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
