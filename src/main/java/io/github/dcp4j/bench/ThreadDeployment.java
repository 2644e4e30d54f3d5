package io.github.dcp4j.bench;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.engine.cuda.CudaGroup;
import io.github.dcp4j.engine.cuda.KernelCall;
import io.github.dcp4j.op.WorkspaceSpec;

import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/** Every rank in this JVM, rank r on GPU r mod the GPU count, one launch per GPU ({@link CudaGroup}). */
public final class ThreadDeployment implements Deployment {
    private final List<CudaDevice> gpus;
    private final Duration timeout;

    /**
     * Ranks over {@code gpus} (rank r on {@code gpus.get(r % gpus.size())}); the devices stay the caller's.
     *
     * @param gpus    the GPUs
     * @param timeout how long a rank waits for a peer's line
     */
    public ThreadDeployment(List<CudaDevice> gpus, Duration timeout) {
        this.gpus = List.copyOf(gpus);
        this.timeout = timeout;
    }

    private List<CudaDevice> rankDevices(int cp) {
        List<CudaDevice> d = new ArrayList<>();
        for (int r = 0; r < cp; r++) {
            d.add(gpus.get(r % gpus.size()));
        }
        return d;
    }

    @Override
    public String name() {
        return "threads";
    }

    @Override
    public String describe() {
        return "this JVM, one launch per GPU over " + gpus.size() + " GPU(s) with peer access";
    }

    @Override
    public List<CudaDevice> devices() {
        return gpus;
    }

    @Override
    public int ranksPerGpu(int cp) {
        List<CudaDevice> d = rankDevices(cp);
        return Collections.frequency(d, d.getFirst());
    }

    @Override
    public Prepared prepare(Benchmark.Case c, Arena arena) {
        BenchInputs in = BenchInputs.all(c, arena);
        WorkspaceSpec spec = BenchInputs.spec(c);
        CudaGroup group = CudaGroup.open(rankDevices(c.cp()), spec, timeout);
        try {
            CudaGroup.Prepared call = group.prepare(in.partialO(), in.partialLse(), in.out(), BenchInputs.MODE);
            return new Lanes(call.launches(), () -> {
                call.launches().forEach(KernelCall::checkStatus);
                call.readOutputs();
                return in.maxRelativeError(LoopbackDeployment.allRanks(c.cp()));
            }, () -> {
                call.close();
                group.close();
            });
        } catch (RuntimeException e) {
            group.close();
            throw e;
        }
    }
}
