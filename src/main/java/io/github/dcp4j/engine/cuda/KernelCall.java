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

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * One prepared launch of the LL128 kernel on one GPU, for one or more ranks (all of a loopback group, or the one rank
 * of this process): every launched rank's inputs on the device (as they lie in host memory, strides kept), its output
 * buffer, its peer-address array and kernel arguments, and the launch arguments. {@link #launch()} queues the
 * launch on the call's stream (it can be captured into a CUDA graph); {@link #run()} launches and waits.
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
    private final int grid;
    private final int blocksPerRank;
    private final boolean earlyDependents;
    private final KernelLaunch launch;
    private final KernelLaunch launchEmpty;
    private boolean closed;

    /**
     * @param calls       the launched ranks' calls, validated
     * @param views       each launched rank's view of the group's workspaces (same order as {@code calls})
     * @param blockBudget blocks this launch may occupy at most (the co-resident blocks of the kernel, divided among
     *                    the launches that share the GPU at the same time)
     * @param state       the workspaces' state (checked before each run, poisoned by a timeout)
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
        this.blocksPerRank = blocksPerRank(first.rows(), first.cpSize(), first.row().lineGroups(),
                blockBudget / calls.size());
        this.grid = blocksPerRank * calls.size();
        // The next call's blocks may start early only where they fit beside this call's within the budget: the
        // budget is this launch's share of the GPU, so early blocks of every launch sharing the GPU never take the
        // slots a launch that has not started yet needs (its peers would wait for it until their timeouts).
        this.earlyDependents = 2 * grid <= blockBudget;
        KernelLaunch op = null;
        try {
            ByteBuffer rankArgs = ByteBuffer.allocate(KernelAbi.size(KernelAbi.RANK_ARGS) * calls.size())
                    .order(ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i < calls.size(); i++) {
                writeRankArgs(rankArgs, i * KernelAbi.size(KernelAbi.RANK_ARGS), calls.get(i), views.get(i));
            }
            DeviceBuffer rankArgsBuffer = upload(rankArgs.array());
            byte[] args = launchArgs(rankArgsBuffer.address(), first, layout);
            op = new KernelLaunch(kernels.kernel(first.dtype(), first.mode()), grid, Ll128.BLOCK_THREADS, args,
                    stream);
            this.launchEmpty = new KernelLaunch(kernels.empty(), grid, Ll128.BLOCK_THREADS, args, stream);
            this.launch = op;
        } catch (RuntimeException e) {
            if (op != null) {
                op.close();
            }
            closeBuffers();
            throw e;
        }
    }

    /**
     * Blocks of one rank: enough for the send (a block per group of {@link Ll128#BLOCK_THREADS} / 32 rows and
     * destination) and for the receive (a warp per row and group of lines), at most {@code budget}, at least one.
     */
    static int blocksPerRank(int rows, int cpSize, int lineGroups, int budget) {
        int warpsPerBlock = Ll128.BLOCK_THREADS / 32;
        int sendBlocks = Math.ceilDiv(rows, warpsPerBlock) * cpSize;
        int receiveBlocks = Math.ceilDiv(rows * lineGroups, warpsPerBlock);
        return Math.max(1, Math.min(Math.max(sendBlocks, receiveBlocks), budget));
    }

    /** The GPU this call runs on. */
    public CudaDevice device() {
        return kernels.device();
    }

    private void writeRankArgs(ByteBuffer b, int base, ReduceCall call, PeerWorkspaces view) {
        int elem = call.dtype().bytes();
        DeviceBuffer o = uploadView(call.partialO());
        DeviceBuffer lse = uploadView(call.partialLse());
        DeviceBuffer out = DeviceBuffer.allocate(device(), call.out().numel() * elem);
        buffers.add(out);
        outputs.add(out);
        ByteBuffer peers = ByteBuffer.allocate(view.cpSize() * Long.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        for (int r = 0; r < view.cpSize(); r++) {
            peers.putLong(view.baseAddress(r));
        }
        DeviceBuffer peerArray = upload(peers.array());
        long[] os = call.oStrides();
        long[] ls = call.lseStrides();
        put(b, base, KernelAbi.RANK_ARGS, "partial_o", o.address());
        put(b, base, KernelAbi.RANK_ARGS, "partial_lse", lse.address());
        put(b, base, KernelAbi.RANK_ARGS, "out", out.address());
        put(b, base, KernelAbi.RANK_ARGS, "o_stride_token", os[0]);
        put(b, base, KernelAbi.RANK_ARGS, "o_stride_head", os[1]);
        put(b, base, KernelAbi.RANK_ARGS, "o_stride_peer", os[2]);
        put(b, base, KernelAbi.RANK_ARGS, "lse_stride_token", ls[0]);
        put(b, base, KernelAbi.RANK_ARGS, "lse_stride_head", ls[1]);
        put(b, base, KernelAbi.RANK_ARGS, "lse_stride_peer", ls[2]);
        put(b, base, KernelAbi.RANK_ARGS, "workspace", view.workspaceAddress(view.rank()));
        put(b, base, KernelAbi.RANK_ARGS, "peers", peerArray.address());
        put(b, base, KernelAbi.RANK_ARGS, "peer_offset", view.offset());
        put(b, base, KernelAbi.RANK_ARGS, "rank", call.cpRank());
    }

    private byte[] launchArgs(long rankArgs, ReduceCall first, WorkspaceLayout layout) {
        ByteBuffer b = ByteBuffer.allocate(KernelAbi.size(KernelAbi.LAUNCH_ARGS)).order(ByteOrder.LITTLE_ENDIAN);
        List<KernelAbi.Field> f = KernelAbi.LAUNCH_ARGS;
        put(b, 0, f, "ranks", rankArgs);
        put(b, 0, f, "ranks_in_launch", calls.size());
        put(b, 0, f, "blocks_per_rank", blocksPerRank);
        put(b, 0, f, "cp", first.cpSize());
        put(b, 0, f, "rows", first.rows());
        put(b, 0, f, "heads", first.heads());
        put(b, 0, f, "max_rows", layout.maxRows());
        put(b, 0, f, "head_dim", first.headDim());
        put(b, 0, f, "data_words", first.row().dataWords());
        put(b, 0, f, "data_lines", first.row().dataLines());
        put(b, 0, f, "line_groups", first.row().lineGroups());
        put(b, 0, f, "data_slot_bytes", layout.dataSlotBytes());
        put(b, 0, f, "lse_region_offset", layout.lseRegionOffset());
        put(b, 0, f, "lse_slot_bytes", layout.lseSlotBytes());
        put(b, 0, f, "timeout_ns", timeout.toNanos());
        put(b, 0, f, "early_dependents", earlyDependents ? 1 : 0);
        return b.array();
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

    private DeviceBuffer upload(byte[] bytes) {
        DeviceBuffer d = DeviceBuffer.allocate(device(), bytes.length);
        buffers.add(d);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(bytes.length, 8);
            host.copyFrom(MemorySegment.ofArray(bytes));
            d.copyFrom(host, 0);
        }
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

    /** Launches, waits, and raises a timeout any launched rank recorded. */
    @Override
    public void run() {
        state.requireUsable();
        device().run(() -> {
            launch();
            Cuda.check(JCudaDriver.cuStreamSynchronize(stream.handle()), "cuStreamSynchronize");
        });
        checkTimeouts();
    }

    /** Raises a timeout any launched rank recorded (after the stream has run the launch); the owner is poisoned. */
    public void checkTimeouts() {
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
