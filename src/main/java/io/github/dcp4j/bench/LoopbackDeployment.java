package io.github.dcp4j.bench;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.engine.cuda.CudaLoopbackEngine;
import io.github.dcp4j.engine.cuda.KernelCall;
import io.github.dcp4j.op.WorkspaceSpec;

import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.List;

/** Every rank in one launch on one GPU ({@link CudaLoopbackEngine}). */
public final class LoopbackDeployment implements Deployment {
    private final CudaDevice device;
    private final Duration timeout;

    /** Loopback groups on {@code device}, which stays the caller's. */
    public LoopbackDeployment(CudaDevice device, Duration timeout) {
        this.device = device;
        this.timeout = timeout;
    }

    @Override
    public String name() {
        return "loopback";
    }

    @Override
    public String describe() {
        return "cp ranks in one launch on " + device;
    }

    @Override
    public List<CudaDevice> devices() {
        return List.of(device);
    }

    @Override
    public int ranksPerGpu(int cp) {
        return cp;
    }

    @Override
    public Prepared prepare(Benchmark.Case c, Arena arena) {
        BenchInputs in = BenchInputs.all(c, arena);
        WorkspaceSpec spec = BenchInputs.spec(c);
        CudaLoopbackEngine engine = CudaLoopbackEngine.open(device, spec, timeout);
        try {
            KernelCall call = engine.prepare(in.partialO(), in.partialLse(), in.out(), BenchInputs.MODE,
                    new CudaStream(device));
            return new Lanes(List.of(call), () -> {
                call.checkStatus();
                call.readOutputs();
                return in.maxRelativeError(allRanks(c.cp()));
            }, () -> {
                call.close();
                call.stream().close();
                engine.close();
            });
        } catch (RuntimeException e) {
            engine.close();
            throw e;
        }
    }

    static int[] allRanks(int cp) {
        int[] r = new int[cp];
        for (int i = 0; i < cp; i++) {
            r[i] = i;
        }
        return r;
    }
}
