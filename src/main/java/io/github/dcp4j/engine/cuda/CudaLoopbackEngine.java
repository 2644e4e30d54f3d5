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
import io.github.dcp4j.peer.LoopbackWorkspaces;
import io.github.dcp4j.peer.PeerWorkspaces;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The CUDA engine in loopback: all cp ranks of a group on one GPU, in one launch of the variant's kernel (op.Variant:
 * LL128 by default; unfused launches two kernels; auto picks per call),
 * each rank a slice of the grid with its own workspace ({@link LoopbackWorkspaces}), inputs and outputs. This runs the
 * whole protocol on a single GPU, peer writes included (to other ranks' workspaces on the same device).
 *
 * <p>Device tensors ({@link DeviceTensor}) are used in place; host inputs are copied to the device as they lie
 * (strided views keep their strides: the kernel reads them directly, no pack kernel) and host outputs copied back.
 * A call runs on the group's own stream or on one the caller gives ({@link CudaStream#wrap}); the workspaces serve
 * one ordered stream, so the first stream a call uses binds them.
 */
public final class CudaLoopbackEngine implements LocalGroup {
    /** The engine's name as the CLI prints it. */
    public static final String NAME = "cuda";
    /** How long a rank waits for a peer's line before it gives up, unless the group is opened with another. */
    public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(10);

    private final CudaDevice device;
    private final Kernels kernels;
    private final LoopbackWorkspaces workspaces;
    private final List<PeerWorkspaces> views = new ArrayList<>();
    private final Duration timeout;
    private final CudaStream ownStream;
    private final boolean ownsDevice;
    private final StreamBinding binding;
    private final WorkspaceState state;
    private final VariantWorkspace variantWorkspace;
    /** The contract's workspace size for the group's spec: what calls are validated against. */
    private final long contractBytes;
    /** The last eager call's arguments and its prepared launch (device tensors only: it holds no memory). */
    private EagerCall lastEager;
    /** The region the last prepared call runs in (its variant's; the only one where the group has one). */
    private volatile VariantWorkspace.Region lastRegion;

    private record EagerCall(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                             List<? extends Tensor> out, LseMode mode, long stream, KernelCall call) {
        boolean sameAs(List<? extends Tensor> o, List<? extends Tensor> lse, List<? extends Tensor> outs, LseMode m,
                       CudaStream s) {
            return mode == m && stream == s.address() && partialO.equals(o) && partialLse.equals(lse)
                    && out.equals(outs);
        }
    }

    private CudaLoopbackEngine(CudaDevice device, boolean ownsDevice, WorkspaceSpec spec, Duration timeout,
                               VariantWorkspace variantWorkspace) {
        int cpSize = spec.cpSize();
        long workspaceBytes = variantWorkspace.bytes();
        this.variantWorkspace = variantWorkspace;
        this.lastRegion = variantWorkspace.regions().getFirst();
        this.contractBytes = spec.bytes();
        this.device = device;
        this.binding = new StreamBinding(device);
        this.ownsDevice = ownsDevice;
        this.timeout = timeout;
        this.kernels = new Kernels(device);
        LoopbackWorkspaces allocated = null;
        WorkspaceState created = null;
        try {
            allocated = LoopbackWorkspaces.allocate(device, cpSize, workspaceBytes);
            created = new WorkspaceState("the CUDA workspace group", device, WorkspaceState.newFlagKey());
            this.ownStream = new CudaStream(device);
        } catch (RuntimeException e) {
            if (created != null) {
                created.free();
            }
            if (allocated != null) {
                allocated.close();
            }
            kernels.close();
            throw e;
        }
        this.state = created;
        this.workspaces = allocated;
        for (int r = 0; r < cpSize; r++) {
            views.add(workspaces.rank(r));
        }
    }

    /**
     * A group of {@code spec.cpSize()} ranks on {@code device}, each with a zeroed workspace of {@code spec.bytes()}.
     * The device stays the caller's.
     *
     * @param device  the GPU every rank runs on
     * @param spec    the largest call the group will make
     * @param timeout how long a rank waits for a peer's line
     * @return the group; close it to free the workspaces
     */
    public static CudaLoopbackEngine open(CudaDevice device, WorkspaceSpec spec, Duration timeout) {
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
    public static CudaLoopbackEngine open(CudaDevice device, WorkspaceSpec spec, Duration timeout, Variant variant) {
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
    public static CudaLoopbackEngine open(CudaDevice device, WorkspaceSpec spec, Duration timeout, Variant variant,
                                          Crossovers crossovers) {
        Objects.requireNonNull(device, "device");
        return open(device, false, spec, timeout, variant, crossovers);
    }

    /**
     * As {@link #open(CudaDevice, WorkspaceSpec, Duration)} on GPU {@code ordinal}, which the group opens and closes.
     *
     * @param ordinal the GPU's ordinal
     * @param spec    the largest call the group will make
     * @param timeout how long a rank waits for a peer's line
     * @return the group; close it to free the workspaces
     */
    public static CudaLoopbackEngine open(int ordinal, WorkspaceSpec spec, Duration timeout) {
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
    public static CudaLoopbackEngine open(int ordinal, WorkspaceSpec spec, Duration timeout, Variant variant) {
        CudaDevice device = CudaDevice.open(ordinal);
        try {
            return open(device, true, spec, timeout, variant, Crossovers.forArchitecture(device.computeCapability()));
        } catch (RuntimeException e) {
            device.close();
            throw e;
        }
    }

    private static CudaLoopbackEngine open(CudaDevice device, boolean ownsDevice, WorkspaceSpec spec,
                                           Duration timeout, Variant variant, Crossovers crossovers) {
        Objects.requireNonNull(spec, "spec");
        Objects.requireNonNull(variant, "variant");
        Objects.requireNonNull(crossovers, "crossovers");
        requirePositive(timeout);
        return new CudaLoopbackEngine(device, ownsDevice, spec, timeout,
                VariantWorkspace.of(variant, crossovers, spec));
    }

    static void requirePositive(Duration timeout) {
        Objects.requireNonNull(timeout, "timeout");
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive; got " + timeout);
        }
    }

    /**
     * As {@link #open(CudaDevice, WorkspaceSpec, Duration)} with the default 10 s timeout.
     *
     * @param device the GPU every rank runs on
     * @param spec   the largest call the group will make
     * @return the group
     */
    public static CudaLoopbackEngine open(CudaDevice device, WorkspaceSpec spec) {
        return open(device, spec, DEFAULT_TIMEOUT);
    }

    @Override
    public String engineName() {
        return NAME;
    }

    @Override
    public String description() {
        return cpSize() + " ranks in one launch on " + device + ", variant " + variantDescription() + ", kernels from "
                + kernels.source();
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
        return "CudaLoopbackEngine[" + cpSize() + " ranks on " + device + ", variant " + variantDescription() + "]";
    }

    @Override
    public int cpSize() {
        return views.size();
    }

    /** {@return the GPU the group runs on} */
    public CudaDevice device() {
        return device;
    }

    /** {@return how long a rank waits for a peer's line before its call fails} */
    public Duration timeout() {
        return timeout;
    }

    /** {@return the most blocks of the kernel resident at once on this GPU: the grid of one launch never exceeds it} */
    public int coResidentBlocks() {
        return kernels.coResidentBlocks();
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
        for (PeerWorkspaces v : allRegions()) {
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
        return allRegions().stream().filter(v -> v.rank() == rank).anyMatch(OwnWorkspace::poisoned);
    }

    /** Copies rank {@code rank}'s workspace (its first {@code into.byteSize()} bytes) into {@code into}. */
    void copyWorkspace(int rank, MemorySegment into) {
        device.copyToHost(views.get(rank).workspaceAddress(rank), into);
    }

    @Override
    public PreparedCall prepare(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                                List<? extends Tensor> out, LseMode mode) {
        return prepare(partialO, partialLse, out, mode, ownStream);
    }

    /**
     * As {@link #prepare(List, List, List, LseMode)}, to run on {@code stream}: {@link KernelCall#launch()} queues it
     * there without waiting, also inside a capture the caller began on that stream.
     *
     * @param partialO   every rank's partial outputs, in rank order (host views or device tensors)
     * @param partialLse every rank's log-sum-exps, in rank order
     * @param out        every rank's output, in rank order
     * @param mode       the LSEs' base
     * @param stream     the stream the call runs on (the group's workspaces serve one stream)
     * @return the prepared call; close it when done
     * @throws IllegalArgumentException naming the rank and the first argument refused
     */
    public KernelCall prepare(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                              List<? extends Tensor> out, LseMode mode, CudaStream stream) {
        state.requireUsable();
        List<ReduceCall> calls = LocalGroup.validateAll(partialO, partialLse, out, cpSize(), contractBytes, mode);
        binding.requireAllowed(stream);
        KernelCall call = newCall(calls, views, stream);
        binding.bind(stream);  // only once the call passed every check: a refused call binds nothing
        return call;
    }

    /**
     * One call with device tensors only ({@link DeviceTensor}), queued on {@code stream} after whatever it holds and
     * not waited for: no host synchronisation and no copy. Every argument is checked (pointers with the driver)
     * before anything is queued. A timeout is reported by {@link #checkStatus()} once the caller has synchronised
     * with the stream; until then, outputs may still be being written.
     *
     * <p>A call with the same arguments as the previous one (equal tensors, mode and stream: what a model's decode
     * step passes layer after layer) relaunches its prepared launch; its pointers are checked again whenever an
     * allocation was forgotten since, so memory freed through {@code DeviceBuffer} or forgotten with
     * {@code CudaDevice.forgetAllocation} is still refused.
     *
     * @param partialO   every rank's partial outputs, device tensors, in rank order
     * @param partialLse every rank's log-sum-exps, device tensors, in rank order
     * @param out        every rank's output, device tensors, in rank order
     * @param mode       the LSEs' base
     * @param stream     the stream the call is queued on
     * @throws IllegalArgumentException naming the rank and the first argument refused (nothing is queued)
     */
    public void enqueue(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                        List<? extends Tensor> out, LseMode mode, CudaStream stream) {
        Objects.requireNonNull(mode, "lse_mode must be 'base2' or 'basee'; got null");
        Objects.requireNonNull(stream, "stream");
        requireDevice("partial_o", partialO);
        requireDevice("partial_lse", partialLse);
        requireDevice("out", out);
        device.run(() -> launchEager(partialO, partialLse, out, mode, stream));
    }

    /**
     * Launches an eager call (on the device thread): the last one's launch again where the arguments are equal
     * (its launch structures kept), else a fresh call launched once with structures that live for this launch only.
     */
    private void launchEager(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                             List<? extends Tensor> out, LseMode mode, CudaStream stream) {
        EagerCall last = lastEager;
        if (last != null && last.sameAs(partialO, partialLse, out, mode, stream)) {
            state.requireUsable();
            last.call().recheckDevicePointers();
            last.call().launch();
            return;
        }
        KernelCall call = prepare(partialO, partialLse, out, mode, stream);
        if (last != null) {
            last.call().close();
        }
        lastEager = new EagerCall(List.copyOf(partialO), List.copyOf(partialLse), List.copyOf(out), mode,
                stream.address(), call);
        call.launchOnce();
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

    /**
     * One read of the group's status word, after the caller has synchronised with the stream its calls ran on
     * (eager or in graph replays): if a wait gave up, the ranks' records are read and the first is raised, and the
     * group stays poisoned until {@link #reset()}.
     *
     * @throws PeerTimeoutException naming the rank, source rank, row and line of the first wait that gave up
     */
    public void checkStatus() {
        state.requireOpen();
        state.check(allRegions(), timeout);
    }

    /** A call on {@code stream} in which only {@code ranks} take part (the others never send): the fault tests'. */
    KernelCall prepareRanks(List<ReduceCall> calls, int[] ranks, CudaStream stream) {
        state.requireUsable();
        binding.requireAllowed(stream);
        List<ReduceCall> launched = new ArrayList<>();
        List<PeerWorkspaces> launchedViews = new ArrayList<>();
        for (int r : ranks) {
            launched.add(calls.get(r));
            launchedViews.add(views.get(r));
        }
        KernelCall call = newCall(launched, launchedViews, stream);
        binding.bind(stream);
        return call;
    }

    /** A kernel call of the variant these calls run, on its region of each workspace. */
    private KernelCall newCall(List<ReduceCall> calls, List<PeerWorkspaces> launchedViews, CudaStream stream) {
        ReduceCall first = calls.getFirst();
        Variant v = variantWorkspace.choose(Crossovers.bytesPerRank(first.rows(), cpSize(), first.headDim(),
                first.dtype()), first.rows(), first.layout());
        List<PeerWorkspaces> region = RegionView.of(launchedViews, variantWorkspace, variantWorkspace.region(v));
        KernelCall call = new KernelCall(kernels, calls, region, stream, kernels.coResidentBlocks(), timeout, state,
                v, allRegions());
        lastRegion = variantWorkspace.region(v);
        return call;
    }

    /** Every rank's view of every region of its workspace: where a timeout of any variant's call is recorded. */
    private List<PeerWorkspaces> allRegions() {
        List<PeerWorkspaces> all = new ArrayList<>();
        for (VariantWorkspace.Region region : variantWorkspace.regions()) {
            all.addAll(RegionView.of(views, variantWorkspace, region));
        }
        return all;
    }

    /** As {@link #prepareRanks(List, int[], CudaStream)} on the group's own stream. */
    KernelCall prepareRanks(List<ReduceCall> calls, int[] ranks) {
        return prepareRanks(calls, ranks, ownStream);
    }

    /** Re-zeroes every workspace (epochs, flags and timeout records) and clears the status word and the poison. */
    @Override
    public void reset() {
        state.requireOpen();
        device.synchronize();
        for (PeerWorkspaces v : views) {
            OwnWorkspace.zero(v);
        }
        state.clearPoison();
    }

    /** Frees every workspace, the stream and the module, and the device if the group opened it. */
    @Override
    public void close() {
        if (!state.beginClose()) {
            return;
        }
        FirstFailure.runAll(
                device::synchronize,  // calls queued on callers' streams too, before anything they use is freed
                () -> {
                    if (lastEager != null) {
                        lastEager.call().close();
                    }
                },
                ownStream::close, workspaces::close, kernels::close, state::free,
                () -> {
                    if (ownsDevice) {
                        device.close();
                    }
                });
    }
}
