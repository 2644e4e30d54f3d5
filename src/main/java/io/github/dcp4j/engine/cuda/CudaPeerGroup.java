package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.engine.FirstFailure;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.Tensor;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.peer.PeerAccessWorkspaces;
import io.github.dcp4j.peer.PeerWorkspaces;

import java.time.Duration;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * One JVM driving a group whose rank r runs on {@code devices.get(r)}: workspaces from {@link PeerAccessWorkspaces}
 * (peer access between every pair of GPUs), one launch per GPU on that GPU's own stream covering the ranks it runs,
 * all queued before any is waited for. The natural embedding for a Java inference engine that drives every GPU of a
 * node.
 *
 * <p>Ranks that share a GPU go into one launch (as in loopback), never into launches on several streams:
 * streams beyond the driver's hardware queues (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default) share a queue, so one
 * rank's spinning kernel could sit in front of the peer kernel it waits for. On an H200 under MPS, eight ranks as
 * eight launches on eight streams of one GPU (plus the benchmark's stream) stall until their timeouts (measured).
 */
public final class CudaPeerGroup implements LocalGroup {
    private final List<CudaDevice> devices;
    private final PeerAccessWorkspaces workspaces;
    private final Map<CudaDevice, Kernels> kernels = new IdentityHashMap<>();
    private final List<PeerWorkspaces> views = new ArrayList<>();
    /** One stream per distinct GPU, in order of first appearance. */
    private final Map<CudaDevice, CudaStream> streams = new IdentityHashMap<>();
    /** Each GPU's workspaces serve one ordered stream: the first a call uses there binds them. */
    private final Map<CudaDevice, StreamBinding> bindings = new IdentityHashMap<>();
    private final Duration timeout;
    private final WorkspaceState state;

    private CudaPeerGroup(List<CudaDevice> devices, long workspaceBytes, Duration timeout) {
        this.devices = List.copyOf(devices);
        this.timeout = timeout;
        this.workspaces = PeerAccessWorkspaces.allocate(devices, workspaceBytes);
        this.state = new WorkspaceState("the CUDA peer group", devices.getFirst(), WorkspaceState.newFlagKey());
        try {
            for (int r = 0; r < devices.size(); r++) {
                CudaDevice d = devices.get(r);
                if (!kernels.containsKey(d)) {
                    kernels.put(d, new Kernels(d));
                    streams.put(d, new CudaStream(d));
                    bindings.put(d, new StreamBinding(d));
                }
                views.add(workspaces.rank(r));
            }
        } catch (RuntimeException e) {
            close();
            throw e;
        }
    }

    /**
     * A group of {@code devices.size()} ranks, rank r on {@code devices.get(r)} (a GPU may appear several times), each
     * with a zeroed workspace sized by {@code spec} (whose cp_size must be the number of devices). The devices stay
     * the caller's.
     *
     * @param devices rank r's GPU at index r
     * @param spec    the largest call the group will make
     * @param timeout how long a rank waits for a peer's line
     * @return the group; close it to free the workspaces
     * @throws IllegalArgumentException where two GPUs have no peer access or cannot carry LL128 between them
     */
    public static CudaPeerGroup open(List<CudaDevice> devices, WorkspaceSpec spec, Duration timeout) {
        Objects.requireNonNull(devices, "devices");
        Objects.requireNonNull(spec, "spec");
        CudaLoopbackEngine.requirePositive(timeout);
        if (devices.size() != spec.cpSize()) {
            throw new IllegalArgumentException("devices must name one GPU per rank (" + spec.cpSize() + "); got "
                    + devices.size());
        }
        return new CudaPeerGroup(devices, spec.bytes(), timeout);
    }

    @Override
    public String engineName() {
        return CudaLoopbackEngine.NAME;
    }

    @Override
    public String description() {
        long gpus = devices.stream().distinct().count();
        return cpSize() + " ranks in this JVM on " + gpus + " GPU(s) with peer access, one launch per GPU";
    }

    @Override
    public int cpSize() {
        return devices.size();
    }

    @Override
    public Prepared prepare(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                            List<? extends Tensor> out, LseMode mode) {
        return prepare(partialO, partialLse, out, mode, streams);
    }

    /**
     * As {@link #prepare(List, List, List, LseMode)}, each GPU's launch on the stream {@code onStreams} gives for
     * that GPU (the caller's, see {@link CudaStream#wrap}; one for every GPU of the group): {@code launches()} then
     * queue there without waiting, also inside captures the caller began on those streams.
     *
     * @param partialO   every rank's partial outputs, in rank order
     * @param partialLse every rank's log-sum-exps, in rank order
     * @param out        every rank's output, in rank order
     * @param mode       the LSEs' base
     * @param onStreams  the stream for each GPU of the group
     * @return the prepared call, one launch per GPU
     * @throws IllegalArgumentException naming the rank and the first argument refused
     */
    public Prepared prepare(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                            List<? extends Tensor> out, LseMode mode, Map<CudaDevice, CudaStream> onStreams) {
        Objects.requireNonNull(onStreams, "streams");
        for (CudaDevice d : kernels.keySet()) {
            if (onStreams.get(d) == null) {
                throw new IllegalArgumentException("streams must hold a stream for each GPU of the group; none for "
                        + d);
            }
        }
        state.requireUsable();
        List<ReduceCall> calls = LocalGroup.validateAll(partialO, partialLse, out, cpSize(),
                views.getFirst().workspaceBytes(), mode);
        List<KernelCall> launches = new ArrayList<>();
        try {
            for (CudaDevice d : devices.stream().distinct().toList()) {
                List<ReduceCall> onDevice = new ArrayList<>();
                List<PeerWorkspaces> viewsOnDevice = new ArrayList<>();
                for (int r = 0; r < cpSize(); r++) {
                    if (devices.get(r) == d) {
                        onDevice.add(calls.get(r));
                        viewsOnDevice.add(views.get(r));
                    }
                }
                Kernels k = kernels.get(d);
                bindings.get(d).requireAllowed(onStreams.get(d));
                launches.add(new KernelCall(k, onDevice, viewsOnDevice, onStreams.get(d), k.coResidentBlocks(),
                        timeout, state));
            }
        } catch (RuntimeException e) {
            launches.forEach(KernelCall::close);
            throw e;
        }
        for (KernelCall k : launches) {  // only once every launch passed every check: a refused call binds nothing
            bindings.get(k.device()).bind(k.stream());
        }
        return new Prepared(launches);
    }

    /** One prepared call: a launch per GPU. */
    public final class Prepared implements PreparedCall {
        private final List<KernelCall> launches;

        Prepared(List<KernelCall> launches) {
            this.launches = launches;
        }

        /** {@return one launch per GPU (in order of first appearance), each covering the ranks on that GPU} */
        public List<KernelCall> launches() {
            return launches;
        }

        @Override
        public void run() {
            state.requireUsable();
            for (KernelCall k : launches) {
                k.launch();
            }
            for (KernelCall k : launches) {
                k.stream().synchronize();
            }
            FirstFailure<PeerTimeoutException> failure = new FirstFailure<>();
            for (KernelCall k : launches) {
                try {
                    k.checkStatus();
                } catch (PeerTimeoutException e) {
                    failure.add(e);
                }
            }
            failure.throwIfAny();
        }

        @Override
        public void readOutputs() {
            launches.forEach(KernelCall::readOutputs);
        }

        @Override
        public void close() {
            launches.forEach(KernelCall::close);
        }
    }

    @Override
    public void reset() {
        state.requireOpen();
        for (CudaDevice d : kernels.keySet()) {
            d.synchronize();
        }
        for (PeerWorkspaces v : views) {
            OwnWorkspace.zero(v);
        }
        state.clearPoison();
    }

    @Override
    public void close() {
        if (!state.beginClose()) {
            return;
        }
        List<Runnable> steps = new ArrayList<>();
        for (CudaDevice d : kernels.keySet()) {
            steps.add(d::synchronize);  // calls queued on callers' streams too, before anything they use is freed
        }
        for (CudaStream s : streams.values()) {
            steps.add(s::close);
        }
        steps.add(workspaces::close);
        for (Kernels k : kernels.values()) {
            steps.add(k::close);
        }
        steps.add(state::free);
        FirstFailure.runAll(steps.toArray(Runnable[]::new));
    }
}
