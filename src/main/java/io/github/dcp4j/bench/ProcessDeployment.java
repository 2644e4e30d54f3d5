package io.github.dcp4j.bench;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.engine.cuda.CudaRankEngine;
import io.github.dcp4j.engine.cuda.KernelCall;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.peer.IpcWorkspaces;
import io.github.dcp4j.rendezvous.Rendezvous;

import java.lang.foreign.Arena;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * One rank per process over CUDA IPC ({@link IpcWorkspaces}, {@link CudaRankEngine}); started by {@code launch}.
 * Each process generates its own rank's inputs; up to batch {@value #ORACLE_MAX_BATCH} it generates every rank's
 * inputs too and checks its output against fp64 (beyond, the check is left to the smaller batches and to
 * {@code check}).
 */
public final class ProcessDeployment implements Deployment {
    static final int ORACLE_MAX_BATCH = 32;

    private final Rendezvous rendezvous;
    private final CudaDevice device;
    private final int ranksSharingGpu;
    private final Duration timeout;

    /**
     * This process as one rank of a group of processes, one launch each.
     *
     * @param rendezvous      the group's rendezvous
     * @param device          this process's GPU
     * @param ranksSharingGpu processes whose ranks share this process's GPU
     * @param timeout         how long a rank waits for a peer's line
     */
    public ProcessDeployment(Rendezvous rendezvous, CudaDevice device, int ranksSharingGpu, Duration timeout) {
        this.rendezvous = rendezvous;
        this.device = device;
        this.ranksSharingGpu = ranksSharingGpu;
        this.timeout = timeout;
    }

    @Override
    public String name() {
        return "processes";
    }

    @Override
    public String describe() {
        return rendezvous.worldSize() + " processes over CUDA IPC, " + ranksSharingGpu + " per GPU, rank 0 on "
                + device;
    }

    @Override
    public List<CudaDevice> devices() {
        return List.of(device);
    }

    @Override
    public int ranksPerGpu(int cp) {
        return ranksSharingGpu;
    }

    @Override
    public boolean reports() {
        return rendezvous.rank() == 0;
    }

    /**
     * Unsound where processes share a GPU: the L2 and the SMs are the GPU's, so while one process flushes, the other
     * processes' blocks wait on the SMs for its data and the flush runs slower than alone (measured: layer batch 8,
     * 152 µs per call against 17 in loopback).
     */
    @Override
    public Optional<String> flushedCasesUnsound() {
        return ranksSharingGpu > 1 ? Optional.of(ranksSharingGpu + " processes share a GPU, and the flush of one runs"
                + " beside the others' waiting blocks, slower than alone (docs/PERFORMANCE.md); one process per GPU has"
                + " sound flushed cases") : Optional.empty();
    }

    @Override
    public Prepared prepare(Benchmark.Case c, Arena arena) {
        if (c.cp() != rendezvous.worldSize()) {
            throw new IllegalArgumentException("--cp must be the number of processes (" + rendezvous.worldSize()
                    + ") with --ranks processes; got " + c.cp());
        }
        int rank = rendezvous.rank();
        boolean checked = c.batch() <= ORACLE_MAX_BATCH;
        BenchInputs in = BenchInputs.of(c, arena, r -> checked || r == rank);
        WorkspaceSpec spec = BenchInputs.spec(c);
        IpcWorkspaces ws = IpcWorkspaces.open(device, spec.bytes(), rendezvous);
        CudaRankEngine engine = null;
        CudaStream stream = null;
        try {
            engine = CudaRankEngine.open(ws, rendezvous, timeout, ranksSharingGpu);
            stream = new CudaStream(device);
            KernelCall call = engine.prepare(in.partialO().get(rank), in.partialLse().get(rank), in.out().get(rank),
                    rank, c.cp(), BenchInputs.MODE, stream);
            CudaRankEngine e = engine;
            CudaStream s = stream;
            return new Lanes(List.of(call), () -> {
                call.checkStatus();
                call.readOutputs();
                return checked ? in.maxRelativeError(new int[] {rank}) : Double.NaN;
            }, () -> {
                call.close();
                s.close();
                e.close();
                ws.close();
            });
        } catch (RuntimeException e) {
            if (stream != null) {
                stream.close();
            }
            if (engine != null) {
                engine.close();
            }
            ws.close();
            throw e;
        }
    }

    @Override
    public double maxOverProcesses(String what, double value) {
        double max = value;
        for (byte[] b : rendezvous.allGather(what, ByteBuffer.allocate(Double.BYTES).putDouble(value).array())) {
            double v = ByteBuffer.wrap(b).getDouble();
            max = Double.isNaN(max) || v > max ? v : max;
        }
        return max;
    }
}
