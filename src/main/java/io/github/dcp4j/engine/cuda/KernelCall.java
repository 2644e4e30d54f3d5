package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.cuda.DeviceBuffer;
import io.github.dcp4j.cuda.KernelLaunch;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.layout.KernelAbi;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.layout.WorkspaceLayout;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.peer.PeerWorkspaces;
import jcuda.driver.JCudaDriver;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * One prepared launch of the LL128 kernel on one GPU, for one or more ranks (all of a loopback group, or the one rank
 * of this process): every launched rank's inputs on the device (as they lie in host memory, strides kept), its output
 * buffer, and the launch parameter, which carries everything by value (KernelAbi). {@link #launch()} queues the
 * launch on the call's stream (it can be captured into a CUDA graph); {@link #run()} launches, waits and checks.
 *
 * <p>Every block of the protocol must be resident at once, and the launch is not cooperative (docs/CUDA.md): the grid
 * is kept within the block budget it is given, the same bound a cooperative launch would check.
 */
public final class KernelCall implements LocalGroup.PreparedCall {
    private final Kernels kernels;
    private final List<ReduceCall> calls;
    private final List<PeerWorkspaces> views;
    private final CudaStream stream;
    private final Duration timeout;
    private final WorkspaceState state;
    private final List<DeviceBuffer> buffers = new ArrayList<>();
    private final List<DeviceBuffer> outputs = new ArrayList<>();
    private final GridPlan plan;
    private final boolean earlyDependents;
    private final boolean streamInputs;
    private final KernelLaunch launch;
    private final KernelLaunch launchEmpty;
    private boolean closed;

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
        this.kernels = kernels;
        this.calls = List.copyOf(calls);
        this.views = List.copyOf(views);
        this.stream = stream;
        this.timeout = timeout;
        this.state = state;
        ReduceCall first = calls.getFirst();
        WorkspaceLayout layout = WorkspaceLayout.forWorkspace(views.getFirst().workspaceBytes(), first.cpSize(),
                first.row());
        GridPlan.Tuning tuning = GridPlan.Tuning.fromSystemProperty();
        this.plan = GridPlan.of(first.rows(), blockBudget / calls.size(), tuning);
        long inputBytes = (long) calls.size() * first.rows() * first.cpSize() * first.row().dataBytes();
        this.streamInputs = GridPlan.streamInputs(inputBytes, kernels.device().l2Bytes(), tuning);
        int grid = plan.blocksPerRank() * calls.size();
        // The next call's blocks may start early only where they fit beside this call's within the budget: the
        // budget is this launch's share of the GPU, so early blocks of every launch sharing the GPU never take the
        // slots a launch that has not started yet needs (its peers would wait for it until their timeouts).
        this.earlyDependents = 2 * grid <= blockBudget;
        int capacity = KernelAbi.capacityFor(calls.size());
        KernelLaunch op = null;
        try {
            byte[] args = launchArgs(capacity, first, layout);
            op = new KernelLaunch(kernels.kernel(first.dtype(), first.mode(), capacity), grid, Ll128.BLOCK_THREADS,
                    args, stream);
            this.launchEmpty = new KernelLaunch(kernels.empty(capacity), grid, Ll128.BLOCK_THREADS, args, stream);
            this.launch = op;
        } catch (RuntimeException e) {
            if (op != null) {
                op.close();
            }
            closeBuffers();
            throw e;
        }
    }

    /** The GPU this call runs on. */
    public CudaDevice device() {
        return kernels.device();
    }

    /** Blocks of each launched rank. */
    public int blocksPerRank() {
        return plan.blocksPerRank();
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
        put(b, 0, f, "max_rows", layout.maxRows());
        put(b, 0, f, "data_words", first.row().dataWords());
        put(b, 0, f, "data_lines", first.row().dataLines());
        put(b, 0, f, "line_groups", first.row().lineGroups());
        put(b, 0, f, "groups_magic", KernelAbi.divisorMagic(first.row().lineGroups()));
        put(b, 0, f, "peers_magic", KernelAbi.divisorMagic(Math.max(1, cp - 1)));
        put(b, 0, f, "data_slot_bytes", layout.dataSlotBytes());
        put(b, 0, f, "lse_region_offset", layout.lseRegionOffset());
        put(b, 0, f, "lse_slot_bytes", layout.lseSlotBytes());
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
        return b.array();
    }

    /** Writes one rank's arguments; returns whether all its rows start 16-byte aligned. */
    private boolean writeRankArgs(ByteBuffer b, int base, ReduceCall call) {
        int elem = call.dtype().bytes();
        DeviceBuffer o = uploadView(call.partialO());
        DeviceBuffer lse = uploadView(call.partialLse());
        DeviceBuffer out = DeviceBuffer.allocate(device(), call.out().numel() * elem);
        buffers.add(out);
        outputs.add(out);
        long[] os = call.oStrides();
        long[] ls = call.lseStrides();
        List<KernelAbi.Field> f = KernelAbi.RANK_ARGS;
        put(b, base, f, "partial_o", o.address());
        put(b, base, f, "partial_lse", lse.address());
        put(b, base, f, "out", out.address());
        put(b, base, f, "o_stride_token", os[0]);
        put(b, base, f, "o_stride_head", os[1]);
        put(b, base, f, "o_stride_peer", os[2]);
        put(b, base, f, "lse_stride_token", ls[0]);
        put(b, base, f, "lse_stride_head", ls[1]);
        put(b, base, f, "lse_stride_peer", ls[2]);
        put(b, base, f, "rank", call.cpRank());
        boolean aligned = (o.address() | out.address()) % 16 == 0;
        for (long s : os) {
            aligned &= s * elem % 16 == 0;
        }
        return aligned;
    }

    private static void put(ByteBuffer b, int base, List<KernelAbi.Field> fields, String name, long value) {
        b.putLong(base + KernelAbi.offset(fields, name), value);
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

    /** Queues the launch on the call's stream; call on the device thread (e.g. inside a graph capture). */
    public void launch() {
        requireOpen();
        launch.queue();
    }

    /** Queues the launch floor: the empty kernel with this call's grid, block and arguments (on the device thread). */
    public void launchEmpty() {
        requireOpen();
        launchEmpty.queue();
    }

    /** The stream this call runs on. */
    public CudaStream stream() {
        return stream;
    }

    /** Launches, waits, and checks the engine's status word. */
    @Override
    public void run() {
        state.requireUsable();
        device().run(() -> {
            launch();
            Cuda.check(JCudaDriver.cuStreamSynchronize(stream.handle()), "cuStreamSynchronize");
        });
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
        if (!state.statusFailed()) {
            return;
        }
        PeerTimeoutException failure = null;
        for (PeerWorkspaces view : views) {
            PeerTimeoutException e = OwnWorkspace.timeoutRecord(view, timeout);
            if (e != null) {
                if (failure == null) {
                    failure = e;
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        if (failure != null) {
            state.poison(failure);
            throw failure;
        }
    }

    @Override
    public void readOutputs() {
        requireOpen();
        for (int i = 0; i < calls.size(); i++) {
            TensorView out = calls.get(i).out();
            long bytes = out.numel() * out.dtype().bytes();
            outputs.get(i).copyTo(0, out.memory().asSlice(out.offset() * out.dtype().bytes(), bytes));
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
        stream.synchronize();
        launch.close();
        launchEmpty.close();
        closeBuffers();
    }

    private void closeBuffers() {
        for (DeviceBuffer b : buffers) {
            b.close();
        }
    }
}
