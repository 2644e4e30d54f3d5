package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.cuda.DeviceBuffer;
import io.github.dcp4j.cuda.KernelModule;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.layout.KernelAbi;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.layout.WorkspaceLayout;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import jcuda.driver.CUfunction;
import jcuda.driver.JCudaDriver;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/**
 * One prepared loopback call: every rank's inputs on the device (as they lie in host memory, strides kept), its
 * output buffer, the per-rank kernel arguments, and the launch arguments. {@link #launch()} queues the cooperative
 * launch on the bound stream (it can be captured into a CUDA graph); {@link #run()} launches and waits.
 */
public final class LoopbackCall implements LocalGroup.PreparedCall {
    private final CudaLoopbackEngine engine;
    private final List<ReduceCall> calls;
    private final int[] ranks;
    private final CudaStream stream;
    private final List<DeviceBuffer> buffers = new ArrayList<>();
    private final List<DeviceBuffer> outputs = new ArrayList<>();
    private final CUfunction kernel;
    private final byte[] launchArgs;
    private final int grid;
    private final int blocksPerRank;
    private boolean closed;

    LoopbackCall(CudaLoopbackEngine engine, List<ReduceCall> calls, int[] ranks, CudaStream stream) {
        this.engine = engine;
        this.calls = List.copyOf(calls);
        this.ranks = ranks.clone();
        this.stream = stream;
        ReduceCall first = calls.getFirst();
        WorkspaceLayout layout = WorkspaceLayout.forWorkspace(engine.workspaceBytes(), first.cpSize(), first.row());
        this.kernel = engine.kernel(first.dtype(), first.mode());
        int work = first.rows() * Math.max(first.cpSize(), first.row().lineGroups());
        int warpsPerBlock = Ll128.BLOCK_THREADS / 32;
        int wanted = (work + warpsPerBlock - 1) / warpsPerBlock;
        this.blocksPerRank = Math.max(1, Math.min(wanted, engine.coResidentBlocks() / ranks.length));
        this.grid = blocksPerRank * ranks.length;
        try {
            ByteBuffer rankArgs = ByteBuffer.allocate(KernelAbi.size(KernelAbi.RANK_ARGS) * ranks.length)
                    .order(ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i < ranks.length; i++) {
                writeRankArgs(rankArgs, i * KernelAbi.size(KernelAbi.RANK_ARGS), calls.get(ranks[i]));
            }
            DeviceBuffer rankArgsBuffer = upload(rankArgs.array());
            this.launchArgs = launchArgs(rankArgsBuffer.address(), first, layout);
        } catch (RuntimeException e) {
            close();
            throw e;
        }
    }

    private void writeRankArgs(ByteBuffer b, int base, ReduceCall call) {
        int elem = call.dtype().bytes();
        DeviceBuffer o = uploadView(call.partialO());
        DeviceBuffer lse = uploadView(call.partialLse());
        DeviceBuffer out = DeviceBuffer.allocate(engine.device(), call.out().numel() * elem);
        buffers.add(out);
        outputs.add(out);
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
        put(b, base, KernelAbi.RANK_ARGS, "workspace", engine.workspace(call.cpRank()).address());
        put(b, base, KernelAbi.RANK_ARGS, "peers", engine.peers().address());
        put(b, base, KernelAbi.RANK_ARGS, "rank", call.cpRank());
    }

    private byte[] launchArgs(long rankArgs, ReduceCall first, WorkspaceLayout layout) {
        ByteBuffer b = ByteBuffer.allocate(KernelAbi.size(KernelAbi.LAUNCH_ARGS)).order(ByteOrder.LITTLE_ENDIAN);
        List<KernelAbi.Field> f = KernelAbi.LAUNCH_ARGS;
        put(b, 0, f, "ranks", rankArgs);
        put(b, 0, f, "ranks_in_launch", ranks.length);
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
        put(b, 0, f, "timeout_ns", engine.timeout().toNanos());
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
        DeviceBuffer d = DeviceBuffer.allocate(engine.device(), bytes);
        buffers.add(d);
        d.copyFrom(view.memory().asSlice(first, bytes), 0);
        return d;
    }

    private DeviceBuffer upload(byte[] bytes) {
        DeviceBuffer d = DeviceBuffer.allocate(engine.device(), bytes.length);
        buffers.add(d);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(bytes.length, 8);
            host.copyFrom(MemorySegment.ofArray(bytes));
            d.copyFrom(host, 0);
        }
        return d;
    }

    /** Queues the launch on the bound stream; call on the device thread (e.g. inside a graph capture). */
    public void launch() {
        requireOpen();
        KernelModule.launchCooperative(kernel, grid, Ll128.BLOCK_THREADS, launchArgs, stream);
    }

    /** Queues the launch floor: the empty kernel with this call's grid, block and arguments (on the device thread). */
    public void launchEmpty() {
        requireOpen();
        KernelModule.launchCooperative(engine.emptyKernel(), grid, Ll128.BLOCK_THREADS, launchArgs, stream);
    }

    /** The bound stream this call runs on. */
    public CudaStream stream() {
        return stream;
    }

    /** Launches, waits, and raises a timeout any rank recorded. */
    @Override
    public void run() {
        engine.requireUsable();
        engine.device().run(() -> {
            launch();
            Cuda.check(JCudaDriver.cuStreamSynchronize(stream.handle()), "cuStreamSynchronize");
        });
        checkTimeouts();
    }

    /** Raises a timeout any launched rank recorded (after the stream has run the launch). */
    public void checkTimeouts() {
        engine.checkTimeouts(ranks);
    }

    @Override
    public void readOutputs() {
        requireOpen();
        for (int i = 0; i < ranks.length; i++) {
            TensorView out = calls.get(ranks[i]).out();
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
        for (DeviceBuffer b : buffers) {
            b.close();
        }
    }
}
