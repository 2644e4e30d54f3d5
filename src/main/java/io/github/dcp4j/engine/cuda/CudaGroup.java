package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.engine.FirstFailure;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.layout.RowLayout;
import io.github.dcp4j.layout.WorkspaceLayout;
import io.github.dcp4j.op.Crossovers;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.DeviceTensor;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.Tensor;
import io.github.dcp4j.op.Variant;
import io.github.dcp4j.op.VariantWorkspace;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.peer.PeerAccessWorkspaces;
import io.github.dcp4j.peer.PeerWorkspaces;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Every rank of a group in this JVM on the CUDA engine, rank r on {@code devices.get(r)}: loopback is the group over
 * one GPU (every rank on it), and a Java inference engine that drives every GPU of a node opens it over them. Each
 * rank has its own workspace ({@link PeerAccessWorkspaces}: peer access between every pair of distinct GPUs), inputs
 * and outputs, and the call runs the group's protocol variant (op.Variant: LL128 by default; unfused launches two
 * kernels; auto picks per call).
 *
 * <p>The ranks on one GPU are slices of one launch on that GPU's stream, never launches on several streams: streams
 * beyond the driver's hardware queues (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default) share a queue, so one rank's
 * spinning kernel could sit in front of the peer kernel it waits for (on an H200 under MPS, eight ranks as eight
 * launches on eight streams of one GPU stalled until their timeouts, measured). A call is one launch per GPU, all
 * queued before any is waited for.
 *
 * <p>Device tensors ({@link DeviceTensor}) are used in place; host inputs are copied to the device as they lie
 * (strided views keep their strides: the kernel reads them directly, no pack kernel) and host outputs copied back.
 * A call runs on the group's own streams or on the caller's ({@link CudaStream#wrap}); each GPU's workspaces serve one
 * ordered stream, so the first stream a call uses there binds them.
 */
public final class CudaGroup implements LocalGroup {
    /** The engine's name as the CLI prints it. */
    public static final String NAME = "cuda";
    /** How long a rank waits for a peer's line before it gives up, unless the group is opened with another. */
    public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(10);

    /** Rank r's GPU at index r. */
    private final List<CudaDevice> devices;
    /** The distinct GPUs, in order of first appearance: one launch each. */
    private final List<CudaDevice> gpus;
    /** The GPU the group opened by its ordinal and closes, or null where the devices are the caller's. */
    private final CudaDevice ownedDevice;
    private final Map<CudaDevice, Kernels> kernels = new IdentityHashMap<>();
    private final Map<CudaDevice, CudaStream> ownStreams = new LinkedHashMap<>();
    private final Map<CudaDevice, StreamBinding> bindings = new IdentityHashMap<>();
    private final PeerAccessWorkspaces workspaces;
    private final List<PeerWorkspaces> views = new ArrayList<>();
    private final Duration timeout;
    private final WorkspaceState state;
    private final VariantWorkspace variantWorkspace;
    /** The contract's workspace size for the group's spec: what calls are validated against. */
    private final long contractBytes;
    /** The last eager call's arguments and its prepared launches (device tensors only: they hold no memory). */
    private EagerCall lastEager;
    /** The region the last prepared call runs in (its variant's; the only one where the group has one). */
    private volatile VariantWorkspace.Region lastRegion;

    private record EagerCall(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                             List<? extends Tensor> out, LseMode mode, Map<CudaDevice, Long> streams,
                             List<KernelCall> launches) {
        boolean sameAs(List<? extends Tensor> o, List<? extends Tensor> lse, List<? extends Tensor> outs, LseMode m,
                       Map<CudaDevice, CudaStream> s) {
            return mode == m && sameStreams(s) && partialO.equals(o) && partialLse.equals(lse) && out.equals(outs);
        }

        /** Whether {@code s} names the same streams, by their CUDA handles (a stream wrapped twice is the same). */
        private boolean sameStreams(Map<CudaDevice, CudaStream> s) {
            if (s.size() != streams.size()) {
                return false;
            }
            for (Map.Entry<CudaDevice, Long> e : streams.entrySet()) {
                CudaStream given = s.get(e.getKey());
                if (given == null || given.address() != e.getValue()) {
                    return false;
                }
            }
            return true;
        }

        static Map<CudaDevice, Long> addresses(Map<CudaDevice, CudaStream> streams) {
            Map<CudaDevice, Long> a = new HashMap<>();
            streams.forEach((d, s) -> a.put(d, s.address()));
            return a;
        }
    }

    private CudaGroup(List<CudaDevice> devices, CudaDevice ownedDevice, WorkspaceSpec spec, Duration timeout,
                      VariantWorkspace variantWorkspace) {
        this.devices = List.copyOf(devices);
        this.gpus = this.devices.stream().distinct().toList();
        this.ownedDevice = ownedDevice;
        this.timeout = timeout;
        this.variantWorkspace = variantWorkspace;
        this.lastRegion = variantWorkspace.regions().getFirst();
        this.contractBytes = spec.bytes();
        PeerAccessWorkspaces allocated = null;
        WorkspaceState created = null;
        try {
            for (CudaDevice d : gpus) {
                kernels.put(d, new Kernels(d));
                bindings.put(d, new StreamBinding(d));
                ownStreams.put(d, new CudaStream(d));
            }
            allocated = PeerAccessWorkspaces.allocate(devices, variantWorkspace.bytes());
            created = new WorkspaceState(gpus.size() == 1 ? "the CUDA workspace group" : "the CUDA peer group",
                    gpus.getFirst(), WorkspaceState.newFlagKey());
        } catch (RuntimeException e) {
            List<Runnable> undo = new ArrayList<>();
            if (allocated != null) {
                undo.add(allocated::close);
            }
            ownStreams.values().forEach(s -> undo.add(s::close));
            kernels.values().forEach(k -> undo.add(k::close));
            try {
                FirstFailure.runAll(undo.toArray(Runnable[]::new));
            } catch (RuntimeException undone) {
                e.addSuppressed(undone);
            }
            throw e;
        }
        this.workspaces = allocated;
        this.state = created;
        for (int r = 0; r < this.devices.size(); r++) {
            views.add(workspaces.rank(r));
        }
    }

    /**
     * Loopback: a group of {@code spec.cpSize()} ranks on {@code device}, each with a zeroed workspace sized by
     * {@code spec}, waiting {@link #DEFAULT_TIMEOUT} for a peer's line. The device stays the caller's.
     *
     * @param device the GPU every rank runs on
     * @param spec   the largest call the group will make
     * @return the group; close it to free the workspaces
     */
    public static CudaGroup open(CudaDevice device, WorkspaceSpec spec) {
        return open(device, spec, DEFAULT_TIMEOUT);
    }

    /**
     * As {@link #open(CudaDevice, WorkspaceSpec)}, waiting {@code timeout}.
     *
     * @param device  the GPU every rank runs on
     * @param spec    the largest call the group will make
     * @param timeout how long a rank waits for a peer's line
     * @return the group; close it to free the workspaces
     */
    public static CudaGroup open(CudaDevice device, WorkspaceSpec spec, Duration timeout) {
        return open(device, spec, timeout, Variant.LL128);
    }

    /**
     * As {@link #open(CudaDevice, WorkspaceSpec, Duration)} for {@code variant}; auto picks by the crossovers shipped
     * for the device's architecture ({@link Crossovers#forArchitecture}), or the fallback rule.
     *
     * @param device  the GPU every rank runs on
     * @param spec    the largest call the group will make
     * @param timeout how long a rank waits for a peer's line
     * @param variant the protocol variant the group's calls run
     * @return the group; close it to free the workspaces
     */
    public static CudaGroup open(CudaDevice device, WorkspaceSpec spec, Duration timeout, Variant variant) {
        Objects.requireNonNull(device, "device");
        return open(device, spec, timeout, variant, Crossovers.forArchitecture(device.computeCapability()));
    }

    /**
     * As {@link #open(CudaDevice, WorkspaceSpec, Duration, Variant)}, auto picking by {@code crossovers}.
     *
     * @param device     the GPU every rank runs on
     * @param spec       the largest call the group will make
     * @param timeout    how long a rank waits for a peer's line
     * @param variant    the protocol variant the group's calls run
     * @param crossovers what auto picks by (unused for the other variants)
     * @return the group; close it to free the workspaces
     */
    public static CudaGroup open(CudaDevice device, WorkspaceSpec spec, Duration timeout, Variant variant,
                                 Crossovers crossovers) {
        Objects.requireNonNull(device, "device");
        Objects.requireNonNull(spec, "spec");
        return open(Collections.nCopies(spec.cpSize(), device), null, spec, timeout, variant, crossovers);
    }

    /**
     * As {@link #open(CudaDevice, WorkspaceSpec, Duration)} on GPU {@code ordinal}, which the group opens and closes.
     *
     * @param ordinal the GPU's ordinal
     * @param spec    the largest call the group will make
     * @param timeout how long a rank waits for a peer's line
     * @return the group; close it to free the workspaces
     */
    public static CudaGroup open(int ordinal, WorkspaceSpec spec, Duration timeout) {
        return open(ordinal, spec, timeout, Variant.LL128);
    }

    /**
     * As {@link #open(int, WorkspaceSpec, Duration)} for {@code variant} (auto: as {@link #open(CudaDevice,
     * WorkspaceSpec, Duration, Variant)}).
     *
     * @param ordinal the GPU's ordinal
     * @param spec    the largest call the group will make
     * @param timeout how long a rank waits for a peer's line
     * @param variant the protocol variant the group's calls run
     * @return the group; close it to free the workspaces
     */
    public static CudaGroup open(int ordinal, WorkspaceSpec spec, Duration timeout, Variant variant) {
        Objects.requireNonNull(spec, "spec");
        CudaDevice device = CudaDevice.open(ordinal);
        try {
            return open(Collections.nCopies(spec.cpSize(), device), device, spec, timeout, variant,
                    Crossovers.forArchitecture(device.computeCapability()));
        } catch (RuntimeException e) {
            device.close();
            throw e;
        }
    }

    /**
     * A group of {@code devices.size()} ranks, rank r on {@code devices.get(r)} (a GPU may appear several times: the
     * ranks on it share its launch), each with a zeroed workspace sized by {@code spec} (whose cp_size must be the
     * number of devices), running LL128. The devices stay the caller's.
     *
     * @param devices rank r's GPU at index r
     * @param spec    the largest call the group will make
     * @param timeout how long a rank waits for a peer's line
     * @return the group; close it to free the workspaces
     * @throws IllegalArgumentException where two GPUs have no peer access or cannot carry LL128 between them
     */
    public static CudaGroup open(List<CudaDevice> devices, WorkspaceSpec spec, Duration timeout) {
        return open(devices, spec, timeout, Variant.LL128);
    }

    /**
     * As {@link #open(List, WorkspaceSpec, Duration)} for {@code variant}; auto picks by the crossovers shipped for the
     * architecture of rank 0's GPU.
     *
     * @param devices rank r's GPU at index r
     * @param spec    the largest call the group will make
     * @param timeout how long a rank waits for a peer's line
     * @param variant the protocol variant the group's calls run
     * @return the group; close it to free the workspaces
     * @throws IllegalArgumentException where two GPUs have no peer access or cannot carry LL128 between them
     */
    public static CudaGroup open(List<CudaDevice> devices, WorkspaceSpec spec, Duration timeout, Variant variant) {
        requireArguments(devices, spec, timeout, variant);
        return open(devices, null, spec, timeout, variant,
                Crossovers.forArchitecture(devices.getFirst().computeCapability()));
    }

    private static CudaGroup open(List<CudaDevice> devices, CudaDevice ownedDevice, WorkspaceSpec spec,
                                  Duration timeout, Variant variant, Crossovers crossovers) {
        requireArguments(devices, spec, timeout, variant);
        Objects.requireNonNull(crossovers, "crossovers");
        return new CudaGroup(devices, ownedDevice, spec, timeout, VariantWorkspace.of(variant, crossovers, spec));
    }

    /** Checks the arguments of a group's opening before any GPU is asked anything. */
    private static void requireArguments(List<CudaDevice> devices, WorkspaceSpec spec, Duration timeout,
                                         Variant variant) {
        Objects.requireNonNull(devices, "devices");
        Objects.requireNonNull(spec, "spec");
        Objects.requireNonNull(variant, "variant");
        requirePositive(timeout);
        if (devices.size() != spec.cpSize()) {
            throw new IllegalArgumentException("devices must name one GPU per rank (" + spec.cpSize() + "); got "
                    + devices.size());
        }
        for (int r = 0; r < devices.size(); r++) {
            Objects.requireNonNull(devices.get(r), "devices[" + r + "]");
        }
    }

    static void requirePositive(Duration timeout) {
        Objects.requireNonNull(timeout, "timeout");
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive; got " + timeout);
        }
    }

    @Override
    public String engineName() {
        return NAME;
    }

    @Override
    public String description() {
        String where = gpus.size() == 1 ? "in one launch on " + gpus.getFirst()
                : "in this JVM on " + gpus.size() + " GPUs with peer access, one launch per GPU";
        return cpSize() + " ranks " + where + ", variant " + variantDescription() + ", kernels from "
                + kernels.get(gpus.getFirst()).source();
    }

    /** {@return the variant the group was opened for; auto names its crossovers} */
    private String variantDescription() {
        Variant v = variantWorkspace.variant();
        return v == Variant.AUTO ? "auto (" + variantWorkspace.crossovers().source() + ")" : v.spelling();
    }

    /** {@return the variant the group was opened for (auto: each call's own is its KernelCall's)} */
    public Variant variant() {
        return variantWorkspace.variant();
    }

    @Override
    public Variant variantFor(int rows, int headDim, DType dtype) {
        return variantWorkspace.choose(Crossovers.bytesPerRank(rows, cpSize(), headDim, dtype), rows,
                WorkspaceLayout.forWorkspace(contractBytes, cpSize(), RowLayout.of(headDim, dtype.bytes())));
    }

    @Override
    public String toString() {
        String where = gpus.size() == 1 ? "on " + gpus.getFirst() : "on " + gpus.size() + " GPUs";
        return "CudaGroup[" + cpSize() + " ranks " + where + ", variant " + variantDescription() + "]";
    }

    @Override
    public int cpSize() {
        return devices.size();
    }

    /** {@return the GPUs the group runs on, in order of first appearance: one launch each} */
    public List<CudaDevice> gpus() {
        return gpus;
    }

    /** {@return how long a rank waits for a peer's line before its call fails} */
    public Duration timeout() {
        return timeout;
    }

    /**
     * The device-side call counter of {@code rank} (metadata word 0): of the region the last prepared call runs in,
     * where an auto group's calls run in several (each variant's region has its own counter).
     *
     * @param rank a rank of the group
     * @return the counter its next call in that region will use
     */
    public int epoch(int rank) {
        return OwnWorkspace.epoch(RegionView.of(views, variantWorkspace, lastRegion).get(rank));
    }

    /**
     * Overwrites every rank's device-side call counter, in every region of an auto group (white-box, as upstream's
     * tests write {@code ws[:4]}).
     *
     * @param epoch the counter every rank's next call will use
     */
    public void forceEpoch(int epoch) {
        for (PeerWorkspaces v : regionsOf(views)) {
            OwnWorkspace.forceEpoch(v, epoch);
        }
    }

    /** The era of rank {@code rank}'s workspace, as {@link #epoch} (white-box, for the wrap and reset tests). */
    int era(int rank) {
        return OwnWorkspace.era(RegionView.of(views, variantWorkspace, lastRegion).get(rank));
    }

    /** The group's key of its LL128 data flags (white-box, for the tests that read the workspaces). */
    long flagKey() {
        return state.flagKey();
    }

    /** Whether rank {@code rank}'s workspace is marked poisoned on the device (white-box, for the fault tests). */
    boolean poisoned(int rank) {
        return regionsOf(List.of(views.get(rank))).stream().anyMatch(OwnWorkspace::poisoned);
    }

    /** Copies rank {@code rank}'s workspace (its first {@code into.byteSize()} bytes) into {@code into}. */
    void copyWorkspace(int rank, MemorySegment into) {
        devices.get(rank).copyToHost(views.get(rank).workspaceAddress(rank), into);
    }

    /** The call on the group's own streams: one launch per GPU. */
    @Override
    public Prepared prepare(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                            List<? extends Tensor> out, LseMode mode) {
        return prepare(partialO, partialLse, out, mode, ownStreams);
    }

    /**
     * As {@link #prepare(List, List, List, LseMode)}, each GPU's launch on the stream {@code onStreams} gives for
     * that GPU (the caller's, see {@link CudaStream#wrap}; one for every GPU of the group): {@link Prepared#launch()}
     * then queues them there without waiting, also inside captures the caller began on those streams.
     *
     * @param partialO   every rank's partial outputs, in rank order (host views or device tensors)
     * @param partialLse every rank's log-sum-exps, in rank order
     * @param out        every rank's output, in rank order
     * @param mode       the LSEs' base
     * @param onStreams  the stream for each GPU of the group
     * @return the prepared call, one launch per GPU
     * @throws IllegalArgumentException naming the rank and the first argument refused
     */
    public Prepared prepare(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                            List<? extends Tensor> out, LseMode mode, Map<CudaDevice, CudaStream> onStreams) {
        requireStreams(onStreams);
        state.requireUsable();
        List<ReduceCall> calls = LocalGroup.validateAll(partialO, partialLse, out, cpSize(), contractBytes, mode);
        return new Prepared(newLaunches(calls, allRanks(), onStreams));
    }

    /**
     * As {@link #prepare(List, List, List, LseMode)} for a group on one GPU (loopback), to run on {@code stream}:
     * {@link KernelCall#launch()} queues its one launch there without waiting, also inside a capture the caller began
     * on that stream.
     *
     * @param partialO   every rank's partial outputs, in rank order (host views or device tensors)
     * @param partialLse every rank's log-sum-exps, in rank order
     * @param out        every rank's output, in rank order
     * @param mode       the LSEs' base
     * @param stream     the stream the call runs on (the group's workspaces serve one stream)
     * @return the prepared call
     * @throws IllegalArgumentException naming the rank and the first argument refused, or where the group spans
     *                                  several GPUs (give a stream per GPU)
     */
    public KernelCall prepare(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                              List<? extends Tensor> out, LseMode mode, CudaStream stream) {
        return prepare(partialO, partialLse, out, mode, oneStream(stream)).launches().getFirst();
    }

    /**
     * One call with device tensors only ({@link DeviceTensor}), queued on each GPU's stream of {@code onStreams}
     * after whatever it holds and not waited for: no host synchronisation and no copy. Every argument is checked
     * (pointers with the driver) before anything is queued. A timeout is reported by {@link #checkStatus()} once the
     * caller has synchronised with the streams; until then, outputs may still be being written.
     *
     * <p>A call with the same arguments as the previous one (equal tensors, mode and streams: what a model's decode
     * step passes layer after layer) relaunches its prepared launches; their pointers are checked again whenever an
     * allocation was forgotten since, so memory freed through {@code DeviceBuffer} or forgotten with
     * {@code CudaDevice.forgetAllocation} is still refused.
     *
     * @param partialO   every rank's partial outputs, device tensors, in rank order
     * @param partialLse every rank's log-sum-exps, device tensors, in rank order
     * @param out        every rank's output, device tensors, in rank order
     * @param mode       the LSEs' base
     * @param onStreams  the stream for each GPU of the group
     * @throws IllegalArgumentException naming the rank and the first argument refused (nothing is queued)
     */
    public void enqueue(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                        List<? extends Tensor> out, LseMode mode, Map<CudaDevice, CudaStream> onStreams) {
        Objects.requireNonNull(mode, "lse_mode must be 'base2' or 'basee'; got null");
        requireStreams(onStreams);
        requireDevice("partial_o", partialO);
        requireDevice("partial_lse", partialLse);
        requireDevice("out", out);
        gpus.getFirst().run(() -> launchEager(partialO, partialLse, out, mode, onStreams));
    }

    /**
     * As {@link #enqueue(List, List, List, LseMode, Map)} for a group on one GPU (loopback), on {@code stream}.
     *
     * @param partialO   every rank's partial outputs, device tensors, in rank order
     * @param partialLse every rank's log-sum-exps, device tensors, in rank order
     * @param out        every rank's output, device tensors, in rank order
     * @param mode       the LSEs' base
     * @param stream     the stream the call is queued on
     * @throws IllegalArgumentException naming the rank and the first argument refused (nothing is queued), or where
     *                                  the group spans several GPUs
     */
    public void enqueue(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                        List<? extends Tensor> out, LseMode mode, CudaStream stream) {
        enqueue(partialO, partialLse, out, mode, oneStream(stream));
    }

    /**
     * Launches an eager call (on rank 0's GPU thread, which serialises eager calls): the last one's launches again
     * where the arguments are equal (their launch structures kept), else a fresh call launched once with structures
     * that live for this launch only.
     */
    private void launchEager(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                             List<? extends Tensor> out, LseMode mode, Map<CudaDevice, CudaStream> onStreams) {
        EagerCall last = lastEager;
        if (last != null && last.sameAs(partialO, partialLse, out, mode, onStreams)) {
            state.requireUsable();
            last.launches().forEach(KernelCall::recheckDevicePointers);
            last.launches().forEach(KernelCall::launch);
            return;
        }
        List<KernelCall> launches = prepare(partialO, partialLse, out, mode, onStreams).launches();
        if (last != null) {
            last.launches().forEach(KernelCall::close);
        }
        lastEager = new EagerCall(List.copyOf(partialO), List.copyOf(partialLse), List.copyOf(out), mode,
                EagerCall.addresses(onStreams), launches);
        for (KernelCall k : launches) {
            k.device().run(k::launchOnce);
        }
    }

    private static void requireDevice(String name, List<? extends Tensor> tensors) {
        Objects.requireNonNull(tensors, name);
        for (int r = 0; r < tensors.size(); r++) {
            if (!(tensors.get(r) instanceof DeviceTensor)) {
                throw new IllegalArgumentException(name + " of rank " + r + " must be a DeviceTensor for enqueue;"
                        + " host views are copied, which needs a call that waits (reduceAll or prepare); got "
                        + tensors.get(r));
            }
        }
    }

    /** Throws unless {@code onStreams} holds a stream for every GPU of the group. */
    private void requireStreams(Map<CudaDevice, CudaStream> onStreams) {
        Objects.requireNonNull(onStreams, "streams");
        for (CudaDevice d : gpus) {
            if (onStreams.get(d) == null) {
                throw new IllegalArgumentException("streams must hold a stream for each GPU of the group; none for "
                        + d);
            }
        }
    }

    /** {@code stream} as the stream of the group's one GPU; refused where the group spans several. */
    private Map<CudaDevice, CudaStream> oneStream(CudaStream stream) {
        Objects.requireNonNull(stream, "stream");
        if (gpus.size() != 1) {
            throw new IllegalArgumentException("the group spans " + gpus.size() + " GPUs: give a stream for each"
                    + " (a map from GPU to stream); got one stream");
        }
        return Map.of(gpus.getFirst(), stream);
    }

    /**
     * One read of the group's status word, after the caller has synchronised with the streams its calls ran on
     * (eager or in graph replays): if a wait gave up, the ranks' records are read and the first is raised, and the
     * group stays poisoned until {@link #reset()}.
     *
     * @throws PeerTimeoutException naming the rank, source rank, row and line of the first wait that gave up
     */
    public void checkStatus() {
        state.requireOpen();
        state.check(regionsOf(views), timeout);
    }

    /** A call on {@code stream} in which only {@code ranks} take part (the others never send): the fault tests'. */
    KernelCall prepareRanks(List<ReduceCall> calls, int[] ranks, CudaStream stream) {
        state.requireUsable();
        return newLaunches(calls, ranks, oneStream(stream)).getFirst();
    }

    /** As {@link #prepareRanks(List, int[], CudaStream)} on the group's own stream. */
    KernelCall prepareRanks(List<ReduceCall> calls, int[] ranks) {
        return prepareRanks(calls, ranks, ownStreams.get(gpus.getFirst()));
    }

    /**
     * One launch per GPU for the calls of {@code ranks}, in the variant these calls run, on its region of each
     * workspace; the streams bind their GPUs' workspaces only once every launch passed every check.
     */
    private List<KernelCall> newLaunches(List<ReduceCall> calls, int[] ranks, Map<CudaDevice, CudaStream> onStreams) {
        ReduceCall first = calls.get(ranks[0]);
        Variant v = variantWorkspace.choose(Crossovers.bytesPerRank(first.rows(), cpSize(), first.headDim(),
                first.dtype()), first.rows(), first.layout());
        VariantWorkspace.Region region = variantWorkspace.region(v);
        List<KernelCall> launches = new ArrayList<>();
        try {
            for (CudaDevice d : gpus) {
                List<ReduceCall> onDevice = new ArrayList<>();
                List<PeerWorkspaces> viewsOnDevice = new ArrayList<>();
                for (int r : ranks) {
                    if (devices.get(r) == d) {
                        onDevice.add(calls.get(r));
                        viewsOnDevice.add(views.get(r));
                    }
                }
                if (onDevice.isEmpty()) {
                    continue;
                }
                CudaStream stream = onStreams.get(d);
                bindings.get(d).requireAllowed(stream);
                Kernels k = kernels.get(d);
                launches.add(new KernelCall(k, onDevice, RegionView.of(viewsOnDevice, variantWorkspace, region),
                        stream, k.coResidentBlocks(), timeout, state, v, regionsOf(viewsOnDevice)));
            }
        } catch (RuntimeException e) {
            launches.forEach(KernelCall::close);
            throw e;
        }
        for (KernelCall k : launches) {
            bindings.get(k.device()).bind(k.stream());
        }
        lastRegion = region;
        return launches;
    }

    private int[] allRanks() {
        int[] all = new int[cpSize()];
        for (int r = 0; r < all.length; r++) {
            all[r] = r;
        }
        return all;
    }

    /** Each of {@code of} narrowed to every region of its workspace: where a timeout of any variant's call is recorded. */
    private List<PeerWorkspaces> regionsOf(List<PeerWorkspaces> of) {
        List<PeerWorkspaces> all = new ArrayList<>();
        for (VariantWorkspace.Region region : variantWorkspace.regions()) {
            all.addAll(RegionView.of(of, variantWorkspace, region));
        }
        return all;
    }

    /** One prepared call: a launch per GPU. */
    public final class Prepared implements PreparedCall {
        private final List<KernelCall> launches;

        Prepared(List<KernelCall> launches) {
            this.launches = List.copyOf(launches);
        }

        /** {@return one launch per GPU (in order of first appearance), each covering the ranks on that GPU} */
        public List<KernelCall> launches() {
            return launches;
        }

        /** Queues every GPU's launch on its stream, without waiting (also inside the caller's captures). */
        public void launch() {
            launches.forEach(KernelCall::launch);
        }

        @Override
        public void run() {
            state.requireUsable();
            launch();
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
            FirstFailure.runAll(launches.stream().<Runnable>map(k -> k::close).toArray(Runnable[]::new));
        }
    }

    /** Re-zeroes every workspace (epochs, flags and timeout records) and clears the status word and the poison. */
    @Override
    public void reset() {
        state.requireOpen();
        gpus.forEach(CudaDevice::synchronize);
        for (PeerWorkspaces v : views) {
            OwnWorkspace.zero(v);
        }
        state.clearPoison();
    }

    /** Frees every workspace, stream and module, and the GPU if the group opened it. */
    @Override
    public void close() {
        if (!state.beginClose()) {
            return;
        }
        List<Runnable> steps = new ArrayList<>();
        for (CudaDevice d : gpus) {
            steps.add(d::synchronize);  // calls queued on callers' streams too, before anything they use is freed
        }
        steps.add(() -> {
            if (lastEager != null) {
                lastEager.launches().forEach(KernelCall::close);
            }
        });
        ownStreams.values().forEach(s -> steps.add(s::close));
        steps.add(workspaces::close);
        kernels.values().forEach(k -> steps.add(k::close));
        steps.add(state::free);
        if (ownedDevice != null) {
            steps.add(ownedDevice::close);
        }
        FirstFailure.runAll(steps.toArray(Runnable[]::new));
    }
}
