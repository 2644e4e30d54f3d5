package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.cuda.DeviceBuffer;
import io.github.dcp4j.cuda.KernelLaunch;
import io.github.dcp4j.engine.FirstFailure;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.layout.FencedLayout;
import io.github.dcp4j.layout.KernelAbi;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.layout.LlLayout;
import io.github.dcp4j.layout.WorkspaceLayout;
import io.github.dcp4j.op.DeviceTensor;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.Tensor;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.Variant;
import io.github.dcp4j.peer.PeerWorkspaces;
import jcuda.driver.CUfunction;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * One prepared call of one protocol variant (op.Variant: the LL128 kernel by default; ll, simple, or unfused's two
 * kernels) on one GPU, for one or more ranks (all of a loopback group, or the one rank
 * of this process), and the launch parameter, which carries everything by value (KernelAbi). Device tensors
 * ({@link DeviceTensor}) are read and written in place, after the driver has confirmed that each is device memory
 * of this GPU and lies inside one allocation; host views ({@link TensorView}, the convenience path) are copied
 * to the device here as they lie (strides kept) and their outputs copied back by {@link #readOutputs()}.
 * {@link #launch()} queues the launch on the call's stream, after whatever the stream holds, with no host
 * synchronisation (inside a capture it lands in the caller's graph, which then reads the device tensors' contents
 * at each replay); {@link #run()} launches, waits and checks.
 *
 * <p>The launch allows programmatic dependent launch (KernelLaunch): the kernel waits for the stream's earlier work
 * before it reads anything, and the next kernel on the stream may be scheduled before this one ends, so a kernel
 * queued after it that itself uses programmatic dependent launch must execute {@code griddepcontrol.wait}
 * ({@code cudaGridDependencySynchronize}) before it reads this call's outputs; a kernel launched without the
 * attribute is ordered after this one as usual.
 *
 * <p>Every block of the protocol must be resident at once, and the launch is not cooperative (docs/CUDA.md): the grid
 * is kept within the block budget it is given, the same bound a cooperative launch would check.
 */
public final class KernelCall implements LocalGroup.PreparedCall {
    private final Kernels kernels;
    private final List<ReduceCall> calls;
    private final List<PeerWorkspaces> views;
    /** Where a failure of any launch that shares the status word is recorded: every region of the ranks' workspaces. */
    private final List<PeerWorkspaces> statusViews;
    private final CudaStream stream;
    private final Duration timeout;
    private final WorkspaceState state;
    /** Device copies of host views, freed on close. */
    private final List<DeviceBuffer> buffers = new ArrayList<>();
    /** {@link CudaDevice#forgottenAllocations()} when the device tensors were last found vouched for. */
    private long checkedAtForgotten;
    /** Host outputs and the device buffers the kernel writes them into. */
    private final List<HostOutput> hostOutputs = new ArrayList<>();
    private final GridPlan plan;
    private final boolean earlyDependents;
    private final boolean streamInputs;
    private final int slotMask;
    private final Variant variant;
    /** Rows per source and slot of the variant's region at this call's row (max_rows; {@link Variant#rowsHeld}). */
    private final int regionRows;
    /** The launch parameter's rank capacity (KernelAbi.RANK_CAPACITIES) of this call's kernels. */
    private final int capacity;
    private final KernelLaunch.Shape shape;
    private final byte[] args;
    /** The variant's launches, in order (unfused: copy, then merge), made at the first launch. */
    private List<KernelLaunch> launches;
    /** As many empty launches as the variant has kernels: its launch floor. */
    private List<KernelLaunch> launchesEmpty;
    private boolean closed;

    private record HostOutput(TensorView view, DeviceBuffer buffer) {
    }

    /**
     * @param calls       the launched ranks' calls, validated
     * @param views       each launched rank's view of the group's workspaces (same order as {@code calls}); all of
     *                    them must see every rank's workspace at the same address (one process)
     * @param blockBudget blocks this launch may occupy at most (the co-resident blocks of the kernel, divided among
     *                    the launches that share the GPU at the same time)
     * @param state       the workspaces' state (checked before each run, poisoned by a failure) and status word
     */
    KernelCall(Kernels kernels, List<ReduceCall> calls, List<PeerWorkspaces> views, CudaStream stream,
               int blockBudget, Duration timeout, WorkspaceState state) {
        this(kernels, calls, views, stream, blockBudget, timeout, state, Variant.LL128, views);
    }

    /**
     * As above, for {@code variant}'s kernels; {@code views} see the variant's region of each workspace
     * (op.VariantWorkspace) as the workspace, and {@code statusViews} every region of the workspaces whose launches
     * share {@code state}'s status word (an auto group's calls of other variants write it too), read by {@link
     * #checkStatus()}.
     */
    KernelCall(Kernels kernels, List<ReduceCall> calls, List<PeerWorkspaces> views, CudaStream stream,
               int blockBudget, Duration timeout, WorkspaceState state, Variant variant,
               List<PeerWorkspaces> statusViews) {
        if (variant == Variant.AUTO) {
            throw new IllegalArgumentException("a kernel call runs the variant auto picked; got auto");
        }
        this.variant = variant;
        this.capacity = Kernels.capacity(variant, calls.size());
        this.kernels = kernels;
        this.calls = List.copyOf(calls);
        this.views = List.copyOf(views);
        this.statusViews = List.copyOf(statusViews);
        this.stream = stream;
        this.timeout = timeout;
        this.state = state;
        ReduceCall first = calls.getFirst();
        WorkspaceLayout layout = first.layout();
        GridPlan.Tuning tuning = GridPlan.Tuning.fromSystemProperty();
        this.plan = variant == Variant.LL128
                ? GridPlan.of(first.rows(), first.cpSize(), first.row().dataLines(), blockBudget / calls.size(), tuning,
                        GridPlan.teams(tuning, blockBudget, kernels.coResidentBlocks(), kernels.maxRowTeams()))
                : GridPlan.forVariant(first.rows(), blockBudget / calls.size(), tuning);
        long inputBytes = (long) calls.size() * first.rows() * first.cpSize() * first.row().dataBytes();
        this.streamInputs = GridPlan.streamInputs(inputBytes, kernels.device().l2Bytes(), tuning);
        int blocks = plan.blocksPerRank() * calls.size();
        this.shape = new KernelLaunch.Shape(blocks / plan.teams(), plan.teams() * Ll128.BLOCK_THREADS,
                plan.rowKernel() ? plan.teams() * Ll128.ROW_SHARED_BYTES : 0);
        this.slotMask = GridPlan.slotMask(calls.size(), first.cpSize(), tuning);
        // The next call's blocks may start early only where they fit beside this call's within the budget: the
        // budget is this launch's share of the GPU, so early blocks of every launch sharing the GPU never take the
        // slots a launch that has not started yet needs (its peers would wait for it until their timeouts).
        this.earlyDependents = 2 * blocks <= blockBudget;
        this.checkedAtForgotten = CudaDevice.forgottenAllocations();  // read before the pointers are checked
        calls.forEach(c -> requireLocalChecks(kernels.device(), c));
        long regionBytes = this.views.getFirst().workspaceBytes();
        requireFitsRegion(variant, first, regionBytes);
        this.regionRows = variant.rowsHeld(layout, regionBytes);
        try {
            this.args = launchArgs(capacity, first, layout);
        } catch (RuntimeException e) {
            closeBuffers();
            throw e;
        }
    }

    /** {@return the GPU this call runs on} */
    public CudaDevice device() {
        return kernels.device();
    }

    /** {@return the blocks of each launched rank} */
    public int blocksPerRank() {
        return plan.blocksPerRank();
    }

    /**
     * {@return the row kernel's teams in one hardware block (GridPlan.teams; 1 for the other kernels): {@link
     * #blocksPerRank()} counts teams}
     */
    public int teamsPerBlock() {
        return plan.teams();
    }

    /** {@return the variant this call runs} */
    public Variant variant() {
        return variant;
    }

    @Override
    public String toString() {
        return "KernelCall[variant " + variant + ", " + calls.size() + " rank(s) on " + device() + ", "
                + plan.blocksPerRank() + " block(s) per rank" + (plan.rowKernel() ? ", row kernel" : "")
                + (plan.teams() > 1 ? " in blocks of " + plan.teams() + " teams" : "") + "]";
    }

    /** {@return whether this call runs the row kernel (docs/CUDA.md), else the tiled one} */
    public boolean rowKernel() {
        return plan.rowKernel();
    }

    private byte[] launchArgs(int capacity, ReduceCall first, WorkspaceLayout layout) {
        ByteBuffer b = ByteBuffer.allocate(KernelAbi.launchArgsBytes(capacity)).order(ByteOrder.LITTLE_ENDIAN);
        List<KernelAbi.Field> f = KernelAbi.LAUNCH_FIELDS;
        int cp = first.cpSize();
        put(b, 0, f, "status", state.statusAddress());
        put(b, 0, f, "ranks_in_launch", calls.size());
        put(b, 0, f, "blocks_per_rank", plan.blocksPerRank());
        put(b, 0, f, "cp", cp);
        put(b, 0, f, "rows", first.rows());
        put(b, 0, f, "heads", first.heads());
        put(b, 0, f, "heads_magic", KernelAbi.divisorMagic(first.heads()));
        put(b, 0, f, "max_rows", regionRows);
        put(b, 0, f, "data_words", first.row().dataWords());
        put(b, 0, f, "data_lines", first.row().dataLines());
        put(b, 0, f, "line_groups", first.row().lineGroups());
        put(b, 0, f, "groups_magic", KernelAbi.divisorMagic(first.row().lineGroups()));
        put(b, 0, f, "peers_magic", KernelAbi.divisorMagic(Math.max(1, cp - 1)));
        long[] regions = regionSizes(variant, layout, regionRows);
        put(b, 0, f, "data_slot_bytes", regions[0]);
        put(b, 0, f, "lse_region_offset", regions[1]);
        put(b, 0, f, "lse_slot_bytes", regions[2]);
        put(b, 0, f, "timeout_ns", timeout.toNanos());
        put(b, 0, f, "early_dependents", earlyDependents ? 1 : 0);
        put(b, 0, f, "tile_rows", plan.tileRows());
        put(b, 0, f, "send_window", plan.sendWindow());
        put(b, 0, f, "reload_lines", plan.reloadLines() ? 1 : 0);
        put(b, 0, f, "stream_inputs", streamInputs ? 1 : 0);
        PeerWorkspaces firstView = views.getFirst();
        for (int d = 0; d < cp; d++) {
            long address = firstView.workspaceAddress(d);
            for (PeerWorkspaces v : views) {
                if (v.workspaceAddress(d) != address) {
                    throw new IllegalArgumentException("the ranks of one launch must see every workspace at one"
                            + " address; rank " + v.rank() + " sees rank " + d + "'s at 0x"
                            + Long.toHexString(v.workspaceAddress(d)) + ", rank " + firstView.rank() + " at 0x"
                            + Long.toHexString(address));
                }
            }
            b.putLong(KernelAbi.workspacesOffset() + d * KernelAbi.FIELD_BYTES, address);
        }
        boolean vector16 = true;
        for (int i = 0; i < calls.size(); i++) {
            vector16 &= writeRankArgs(b, KernelAbi.ranksOffset() + i * KernelAbi.size(KernelAbi.RANK_ARGS),
                    calls.get(i));
        }
        put(b, 0, f, "vector16", vector16 ? 1 : 0);
        put(b, 0, f, "slot_mask", slotMask);
        put(b, 0, f, "flag_key", state.flagKey());
        return b.array();
    }

    /**
     * Refuses a call whose rows the variant's region of {@code regionBytes} does not hold ({@link Variant#rowsHeld}),
     * and any call, an empty one too, on a region that holds no row at its head_dim (the kernels' layout needs one):
     * checked before a rank engine's group agrees on the call, so that it is refused on every rank.
     *
     * @param variant     the variant the call runs
     * @param call        the validated call
     * @param regionBytes the size of the variant's region of each workspace
     * @throws IllegalArgumentException naming the rows, the region and what it holds
     */
    static void requireFitsRegion(Variant variant, ReduceCall call, long regionBytes) {
        int held = variant.rowsHeld(call.layout(), regionBytes);
        if (held < Math.max(1, call.rows())) {
            throw new IllegalArgumentException("a call of " + call.rows() + " rows at head_dim " + call.headDim()
                    + " does not fit the " + variant + " region of " + regionBytes + " bytes, which holds " + held
                    + " rows at that head_dim (it was sized for the workspace spec's head_dim); open the group with a"
                    + " spec of this head_dim");
        }
    }

    /**
     * The variant's data slot bytes, LSE region offset and LSE slot bytes (the launch parameter's fields of those
     * names) for {@code rows} rows per source and slot: WorkspaceLayout's for ll128, LlLayout's for ll,
     * FencedLayout's for simple and unfused (whose kernels find the flags after the LSE values).
     */
    static long[] regionSizes(Variant variant, WorkspaceLayout layout, int rows) {
        return switch (variant) {
            case LL128 -> {
                WorkspaceLayout ll128 = new WorkspaceLayout(layout.cpSize(), rows, layout.row());
                yield new long[] {ll128.dataSlotBytes(), ll128.lseRegionOffset(), ll128.lseSlotBytes()};
            }
            case LL -> {
                LlLayout ll = new LlLayout(layout.cpSize(), rows, layout.row());
                yield new long[] {ll.dataSlotBytes(), ll.lseRegionOffset(), ll.lseSlotBytes()};
            }
            case SIMPLE, UNFUSED -> {
                FencedLayout fenced = new FencedLayout(layout.cpSize(), rows, layout.row());
                yield new long[] {fenced.dataSlotBytes(), fenced.lseRegionOffset(), fenced.lseSlotBytes()};
            }
            case AUTO -> throw new IllegalArgumentException("auto has no layout of its own");
        };
    }

    /** Writes one rank's arguments; returns whether all its rows start 16-byte aligned. */
    private boolean writeRankArgs(ByteBuffer b, int base, ReduceCall call) {
        int elem = call.dtype().bytes();
        long o = inputAddress(call.partialO());
        long lse = inputAddress(call.partialLse());
        long out = outputAddress(call.out());
        long[] os = call.oStrides();
        long[] ls = call.lseStrides();
        List<KernelAbi.Field> f = KernelAbi.RANK_ARGS;
        put(b, base, f, "partial_o", o);
        put(b, base, f, "partial_lse", lse);
        put(b, base, f, "out", out);
        put(b, base, f, "o_stride_token", os[0]);
        put(b, base, f, "o_stride_head", os[1]);
        put(b, base, f, "o_stride_peer", os[2]);
        put(b, base, f, "lse_stride_token", ls[0]);
        put(b, base, f, "lse_stride_head", ls[1]);
        put(b, base, f, "lse_stride_peer", ls[2]);
        put(b, base, f, "rank", call.cpRank());
        boolean aligned = (o | out) % 16 == 0;
        for (long s : os) {
            aligned &= s * elem % 16 == 0;
        }
        return aligned;
    }

    private static void put(ByteBuffer b, int base, List<KernelAbi.Field> fields, String name, long value) {
        b.putLong(base + KernelAbi.offset(fields, name), value);
    }

    /** The device address of an input's first element: a device tensor's own (checked), or a host view's copy. */
    private long inputAddress(Tensor tensor) {
        return switch (tensor) {
            case DeviceTensor d -> d.firstByte();
            case TensorView v -> uploadView(v).address();
        };
    }

    /** The device address the kernel writes an output to: a device tensor's own (checked), or a buffer read back. */
    private long outputAddress(Tensor tensor) {
        return switch (tensor) {
            case DeviceTensor d -> d.firstByte();
            case TensorView v -> {
                DeviceBuffer buffer = DeviceBuffer.allocate(device(), v.numel() * v.dtype().bytes());
                buffers.add(buffer);
                hostOutputs.add(new HostOutput(v, buffer));
                yield buffer.address();
            }
        };
    }

    /**
     * The driver's checks of a call's device tensors on {@code device}, before anything is copied or launched (a rank
     * engine also makes them before the group agrees on the call, so that a bad pointer on one rank is refused on
     * all).
     */
    static void requireDeviceTensors(CudaDevice device, ReduceCall call) {
        requireDevice(device, call.partialO(), "partial_o", call.cpRank());
        requireDevice(device, call.partialLse(), "partial_lse", call.cpRank());
        requireDevice(device, call.out(), "out", call.cpRank());
    }

    /**
     * The driver's checks of a call's device tensors and, of its host views, that their memory is not freed: every
     * check a rank can make alone, made before the group agrees on the call (a rank engine) or before anything is
     * copied (the others).
     */
    static void requireLocalChecks(CudaDevice device, ReduceCall call) {
        requireDeviceTensors(device, call);
        requireAlive(call.partialO(), "partial_o", call.cpRank());
        requireAlive(call.partialLse(), "partial_lse", call.cpRank());
        requireAlive(call.out(), "out", call.cpRank());
    }

    private static void requireDevice(CudaDevice device, Tensor tensor, String argument, int rank) {
        if (tensor instanceof DeviceTensor d && !device.vouchedFor(d.firstByte(), d.spanBytes(), d.device())) {
            device.requireDeviceSpan(argument + " of rank " + rank, d.firstByte(), d.spanBytes(), d.device());
        }
    }

    private static void requireAlive(Tensor tensor, String argument, int rank) {
        if (tensor instanceof TensorView v) {
            v.requireAlive(argument + " of rank " + rank);
        }
    }

    /** Copies the elements a view spans (from its first to its last element) to the device; strides are kept. */
    private DeviceBuffer uploadView(TensorView view) {
        int elem = view.dtype().bytes();
        long first = view.offset() * elem;
        long bytes = (view.lastElement() + 1) * elem - first;
        DeviceBuffer d = DeviceBuffer.allocate(device(), bytes);
        buffers.add(d);
        d.copyFrom(view.memory().asSlice(first, bytes), 0);
        return d;
    }

    /**
     * Queues the launch on the call's stream, from any thread, without waiting (inside a capture the caller began on
     * that stream, the launch becomes a node of the caller's graph). After the stream has run it, {@link
     * #checkStatus()} says whether it completed.
     */
    public void launch() {
        requireOpen();
        device().run(() -> {
            if (launches == null) {
                launches = new ArrayList<>();
                for (CUfunction k : opKernels()) {
                    launches.add(new KernelLaunch(k, shape, args, stream));
                }
            }
            launches.forEach(KernelLaunch::queue);
        });
    }

    /**
     * Queues the launch floor: the empty kernel with this call's grid, blocks, shared memory and arguments, once per
     * kernel.
     */
    public void launchEmpty() {
        requireOpen();
        device().run(() -> {
            if (launchesEmpty == null) {
                launchesEmpty = new ArrayList<>();
                for (int i = 0; i < opKernels().size(); i++) {
                    launchesEmpty.add(new KernelLaunch(kernels.empty(capacity), shape, args, stream));
                }
            }
            launchesEmpty.forEach(KernelLaunch::queue);
        });
    }

    /**
     * Queues the launch once, on the device thread, with launch structures that live only for this call (no shared
     * memory arena to set up and tear down): the eager path of device tensors.
     */
    void launchOnce() {
        requireOpen();
        for (CUfunction k : opKernels()) {
            KernelLaunch.queueOnce(k, shape, args, stream);
        }
    }

    private List<CUfunction> opKernels() {
        return kernels.kernels(variant, calls.getFirst().dtype(), calls.getFirst().mode(),
                capacity, plan.rowKernel());
    }

    /**
     * Checks every device tensor of the call again where a remembered allocation was forgotten since the last check
     * (the driver is asked only about spans no longer vouched for), before a prepared eager call is launched once
     * more.
     */
    void recheckDevicePointers() {
        long now = CudaDevice.forgottenAllocations();
        if (now != checkedAtForgotten) {
            calls.forEach(c -> requireDeviceTensors(device(), c));
            checkedAtForgotten = now;
        }
    }

    /** {@return the stream this call runs on} */
    public CudaStream stream() {
        return stream;
    }

    /** Launches, waits, and checks the engine's status word. */
    @Override
    public void run() {
        state.requireUsable();
        launch();
        stream.synchronize();
        checkStatus();
    }

    /**
     * After the stream has run this call's launches (eagerly or in graph replays): one read of the engine's status
     * word; if a launch of the engine reported a failure, this call's ranks' records are read and the first one is
     * raised (the others suppressed in it), and the group is poisoned until its reset. (A group whose launches span
     * several GPUs shares one status word: a launch whose own ranks recorded nothing returns.)
     *
     * @throws PeerTimeoutException naming the rank, source rank, row and line of the first wait that gave up
     */
    public void checkStatus() {
        state.check(statusViews, timeout);
    }

    /** Copies the host outputs back (after a run, or after the stream has run the launches); device outputs are. */
    @Override
    public void readOutputs() {
        requireOpen();
        for (HostOutput h : hostOutputs) {
            TensorView out = h.view();
            long bytes = out.numel() * out.dtype().bytes();
            h.buffer().copyTo(0, out.memory().asSlice(out.offset() * out.dtype().bytes(), bytes));
        }
    }

    private void requireOpen() {
        if (closed) {
            throw new IllegalStateException("the prepared call is closed");
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        FirstFailure.runAll(
                () -> {
                    if (!buffers.isEmpty()) {
                        stream.synchronize();  // the copies are freed: no launch that uses them may still run
                    }
                },
                () -> {
                    if (launches != null) {
                        closeAll(launches);
                    }
                },
                () -> {
                    if (launchesEmpty != null) {
                        closeAll(launchesEmpty);
                    }
                },
                this::closeBuffers);
    }

    private static void closeAll(List<KernelLaunch> launches) {
        FirstFailure.runAll(launches.stream().<Runnable>map(l -> l::close).toArray(Runnable[]::new));
    }

    private void closeBuffers() {
        for (DeviceBuffer b : buffers) {
            b.close();
        }
    }
}
