package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.peer.LoopbackWorkspaces;
import io.github.dcp4j.peer.PeerWorkspaces;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The CUDA engine in loopback: all cp ranks of a group on one GPU, in one launch of the LL128 kernel,
 * each rank a slice of the grid with its own workspace ({@link LoopbackWorkspaces}), inputs and outputs. This runs the
 * whole protocol on a single GPU, peer writes included (to other ranks' workspaces on the same device).
 *
 * <p>Host inputs are copied to the device as they lie (strided views keep their strides: the kernel reads them
 * directly, no pack kernel). The workspaces serve one ordered stream: the first stream used binds them.
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
    private final StreamBinding binding = new StreamBinding();
    private final WorkspaceState state;

    private CudaLoopbackEngine(CudaDevice device, boolean ownsDevice, int cpSize, long workspaceBytes,
                               Duration timeout) {
        this.device = device;
        this.ownsDevice = ownsDevice;
        this.timeout = timeout;
        this.kernels = new Kernels(device);
        LoopbackWorkspaces allocated = null;
        try {
            allocated = LoopbackWorkspaces.allocate(device, cpSize, workspaceBytes);
            this.state = new WorkspaceState("the CUDA workspace group", device);
        } catch (RuntimeException e) {
            if (allocated != null) {
                allocated.close();
            }
            kernels.close();
            throw e;
        }
        this.workspaces = allocated;
        for (int r = 0; r < cpSize; r++) {
            views.add(workspaces.rank(r));
        }
        this.ownStream = new CudaStream(device);
    }

    /**
     * A group of {@code spec.cpSize()} ranks on {@code device}, each with a zeroed workspace of {@code spec.bytes()}.
     * The device stays the caller's.
     */
    public static CudaLoopbackEngine open(CudaDevice device, WorkspaceSpec spec, Duration timeout) {
        Objects.requireNonNull(device, "device");
        return open(device, false, spec, timeout);
    }

    /** As {@link #open(CudaDevice, WorkspaceSpec, Duration)} on GPU {@code ordinal}, which the group opens and closes. */
    public static CudaLoopbackEngine open(int ordinal, WorkspaceSpec spec, Duration timeout) {
        CudaDevice device = CudaDevice.open(ordinal);
        try {
            return open(device, true, spec, timeout);
        } catch (RuntimeException e) {
            device.close();
            throw e;
        }
    }

    private static CudaLoopbackEngine open(CudaDevice device, boolean ownsDevice, WorkspaceSpec spec,
                                           Duration timeout) {
        Objects.requireNonNull(spec, "spec");
        requirePositive(timeout);
        return new CudaLoopbackEngine(device, ownsDevice, spec.cpSize(), spec.bytes(), timeout);
    }

    static void requirePositive(Duration timeout) {
        Objects.requireNonNull(timeout, "timeout");
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive; got " + timeout);
        }
    }

    /** As {@link #open(CudaDevice, WorkspaceSpec, Duration)} with the default 10 s timeout. */
    public static CudaLoopbackEngine open(CudaDevice device, WorkspaceSpec spec) {
        return open(device, spec, DEFAULT_TIMEOUT);
    }

    @Override
    public String engineName() {
        return NAME;
    }

    @Override
    public String description() {
        return cpSize() + " ranks in one launch on " + device + ", kernels from " + kernels.source();
    }

    @Override
    public int cpSize() {
        return views.size();
    }

    public CudaDevice device() {
        return device;
    }

    public Duration timeout() {
        return timeout;
    }

    /** Most blocks of the kernel resident at once on this GPU: the grid of one launch never exceeds it. */
    public int coResidentBlocks() {
        return kernels.coResidentBlocks();
    }

    /** The device-side call counter of {@code rank} (metadata word 0). */
    public int epoch(int rank) {
        return OwnWorkspace.epoch(views.get(rank));
    }

    /** Overwrites every rank's device-side call counter (white-box, as upstream's tests write {@code ws[:4]}). */
    public void forceEpoch(int epoch) {
        for (PeerWorkspaces v : views) {
            OwnWorkspace.forceEpoch(v, epoch);
        }
    }

    /** Whether rank {@code rank}'s workspace is marked poisoned on the device (white-box, for the fault tests). */
    boolean poisoned(int rank) {
        return OwnWorkspace.poisoned(views.get(rank));
    }

    /** Copies rank {@code rank}'s workspace (its first {@code into.byteSize()} bytes) into {@code into}. */
    void copyWorkspace(int rank, MemorySegment into) {
        device.copyToHost(views.get(rank).workspaceAddress(rank), into);
    }

    @Override
    public PreparedCall prepare(List<TensorView> partialO, List<TensorView> partialLse, List<TensorView> out,
                                LseMode mode) {
        return prepare(partialO, partialLse, out, mode, ownStream);
    }

    /** As {@link #prepare(List, List, List, LseMode)}, to run on {@code stream}. */
    public KernelCall prepare(List<TensorView> partialO, List<TensorView> partialLse, List<TensorView> out,
                              LseMode mode, CudaStream stream) {
        state.requireUsable();
        List<ReduceCall> calls = LocalGroup.validateAll(partialO, partialLse, out, cpSize(),
                workspaces.rank(0).workspaceBytes(), mode);
        binding.bind(stream);
        return new KernelCall(kernels, calls, views, stream, kernels.coResidentBlocks(), timeout, state);
    }

    /** A call on {@code stream} in which only {@code ranks} take part (the others never send): the fault tests'. */
    KernelCall prepareRanks(List<ReduceCall> calls, int[] ranks, CudaStream stream) {
        state.requireUsable();
        binding.bind(stream);
        List<ReduceCall> launched = new ArrayList<>();
        List<PeerWorkspaces> launchedViews = new ArrayList<>();
        for (int r : ranks) {
            launched.add(calls.get(r));
            launchedViews.add(views.get(r));
        }
        return new KernelCall(kernels, launched, launchedViews, stream, kernels.coResidentBlocks(), timeout, state);
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
        if (!state.close()) {
            return;
        }
        ownStream.synchronize();
        ownStream.close();
        workspaces.close();
        kernels.close();
        if (ownsDevice) {
            device.close();
        }
    }
}
