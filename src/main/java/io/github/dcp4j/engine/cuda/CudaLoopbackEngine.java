package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.cuda.DeviceBuffer;
import io.github.dcp4j.cuda.KernelModule;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import jcuda.driver.CUfunction;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The CUDA engine in loopback: all cp ranks of a group on one GPU, in one cooperative launch of the LL128 kernel,
 * each rank a slice of the grid with its own workspace allocation, inputs and outputs. This runs the whole protocol
 * on a single GPU, peer writes included (to other ranks' workspaces on the same device).
 *
 * <p>Host inputs are copied to the device as they lie (strided views keep their strides: the kernel reads them
 * directly, no pack kernel). The workspaces serve one ordered stream: the first stream used binds them.
 */
public final class CudaLoopbackEngine implements LocalGroup {
    /** The engine's name as the CLI prints it. */
    public static final String NAME = "cuda";
    /** How long a rank waits for a peer's line before it gives up, unless the group is opened with another. */
    public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(10);
    /** The launch floor's kernel: empty, launched exactly as the op's. */
    static final String EMPTY_KERNEL = "dcp4j_empty";
    /** Metadata bytes the host reads back: epoch, finished count and the timeout record. */
    static final int METADATA_BYTES = Ll128.TIMEOUT_LINE_OFFSET + Integer.BYTES;
    static final ValueLayout.OfLong LE_LONG = ValueLayout.JAVA_LONG.withOrder(ByteOrder.LITTLE_ENDIAN);

    private final CudaDevice device;
    private final KernelModule module;
    private final Map<DType, Map<LseMode, CUfunction>> kernels = new EnumMap<>(DType.class);
    private final CUfunction empty;
    private final List<DeviceBuffer> workspaces = new ArrayList<>();
    private final DeviceBuffer peers;
    private final long workspaceBytes;
    private final Duration timeout;
    private final int coResidentBlocks;
    private final CudaStream ownStream;
    private final boolean ownsDevice;
    private CudaStream boundStream;
    private volatile PeerTimeoutException poison;
    private boolean closed;

    private CudaLoopbackEngine(CudaDevice device, boolean ownsDevice, int cpSize, long workspaceBytes,
                               Duration timeout) {
        this.device = device;
        this.ownsDevice = ownsDevice;
        this.workspaceBytes = workspaceBytes;
        this.timeout = timeout;
        this.module = KernelModule.load(device);
        for (DType dtype : new DType[] {DType.FP16, DType.BF16}) {
            Map<LseMode, CUfunction> byMode = new EnumMap<>(LseMode.class);
            for (LseMode mode : LseMode.values()) {
                byMode.put(mode, module.function(kernelName(dtype, mode)));
            }
            kernels.put(dtype, byMode);
        }
        this.empty = module.function(EMPTY_KERNEL);
        this.coResidentBlocks = module.coResidentBlocks(kernels.get(DType.BF16).get(LseMode.BASE2),
                Ll128.BLOCK_THREADS);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment addresses = arena.allocate((long) cpSize * Long.BYTES, Long.BYTES);
            for (int r = 0; r < cpSize; r++) {
                DeviceBuffer w = DeviceBuffer.allocate(device, workspaceBytes);
                w.zero();
                workspaces.add(w);
                addresses.setAtIndex(LE_LONG, r, w.address());
            }
            this.peers = DeviceBuffer.allocate(device, addresses.byteSize());
            peers.copyFrom(addresses, 0);
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
        Objects.requireNonNull(timeout, "timeout");
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive; got " + timeout);
        }
        return new CudaLoopbackEngine(device, ownsDevice, spec.cpSize(), spec.bytes(), timeout);
    }

    /** As {@link #open(CudaDevice, WorkspaceSpec, Duration)} with the default 10 s timeout. */
    public static CudaLoopbackEngine open(CudaDevice device, WorkspaceSpec spec) {
        return open(device, spec, DEFAULT_TIMEOUT);
    }

    static String kernelName(DType dtype, LseMode mode) {
        return "dcp4j_ll128_" + dtype.name().toLowerCase() + "_" + mode.spelling();
    }

    @Override
    public String engineName() {
        return NAME;
    }

    @Override
    public String description() {
        return cpSize() + " ranks in one cooperative launch on " + device + ", kernels from " + module.source();
    }

    @Override
    public int cpSize() {
        return workspaces.size();
    }

    public CudaDevice device() {
        return device;
    }

    public Duration timeout() {
        return timeout;
    }

    /** Most blocks of the kernel resident at once on this GPU: the grid of one launch never exceeds it. */
    public int coResidentBlocks() {
        return coResidentBlocks;
    }

    CUfunction emptyKernel() {
        return empty;
    }

    CUfunction kernel(DType dtype, LseMode mode) {
        return kernels.get(dtype).get(mode);
    }

    DeviceBuffer workspace(int rank) {
        return workspaces.get(rank);
    }

    DeviceBuffer peers() {
        return peers;
    }

    long workspaceBytes() {
        return workspaceBytes;
    }

    /** The device-side call counter of {@code rank} (metadata word 0). */
    public int epoch(int rank) {
        return metadataWord(metadata(rank), Ll128.EPOCH_OFFSET);
    }

    /** Overwrites every rank's device-side call counter (white-box, as upstream's tests write {@code ws[:4]}). */
    public void forceEpoch(int epoch) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment word = arena.allocate(Integer.BYTES, Integer.BYTES);
            word.set(ValueLayout.JAVA_INT.withOrder(ByteOrder.LITTLE_ENDIAN), 0, epoch);
            for (DeviceBuffer w : workspaces) {
                w.copyFrom(word, Ll128.EPOCH_OFFSET);
            }
        }
    }

    /** The u32 metadata word at byte {@code offset}, from words read by {@link #metadata}. */
    private static int metadataWord(int[] words, int offset) {
        return words[offset / Integer.BYTES];
    }

    /** The first metadata words of {@code rank}: epoch, finished, timeout kind, source, row, line. */
    int[] metadata(int rank) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment m = arena.allocate(METADATA_BYTES, Integer.BYTES);
            workspaces.get(rank).copyTo(0, m);
            return m.toArray(ValueLayout.JAVA_INT.withOrder(ByteOrder.LITTLE_ENDIAN));
        }
    }

    /** Binds the workspaces to {@code stream} on first use; any other stream is refused. */
    void bind(CudaStream stream) {
        synchronized (this) {
            if (boundStream == null) {
                boundStream = stream;
            } else if (boundStream != stream) {
                throw new IllegalStateException("a workspace may only be used from one ordered CUDA stream; this"
                        + " group is bound to its first stream: allocate a workspace group per concurrent stream");
            }
        }
    }

    @Override
    public PreparedCall prepare(List<TensorView> partialO, List<TensorView> partialLse, List<TensorView> out,
                                LseMode mode) {
        return prepare(partialO, partialLse, out, mode, ownStream);
    }

    /** As {@link #prepare(List, List, List, LseMode)}, to run on {@code stream}. */
    public LoopbackCall prepare(List<TensorView> partialO, List<TensorView> partialLse, List<TensorView> out,
                                LseMode mode, CudaStream stream) {
        requireUsable();
        int cp = cpSize();
        List<ReduceCall> calls = LocalGroup.validateAll(partialO, partialLse, out, cp, workspaceBytes, mode);
        bind(stream);
        int[] allRanks = new int[cp];
        for (int r = 0; r < cp; r++) {
            allRanks[r] = r;
        }
        return new LoopbackCall(this, calls, allRanks, stream);
    }

    /** A call in which only {@code ranks} take part (the others never send): the fault tests' launch. */
    LoopbackCall prepareRanks(List<ReduceCall> calls, int[] ranks) {
        requireUsable();
        bind(ownStream);
        return new LoopbackCall(this, calls, ranks, ownStream);
    }

    void requireUsable() {
        if (closed) {
            throw new IllegalStateException("the CUDA workspace group is closed");
        }
        PeerTimeoutException p = poison;
        if (p != null) {
            throw new IllegalStateException("the workspace group is poisoned by an earlier timeout (" + p.getMessage()
                    + "); call reset()", p);
        }
    }

    /** Reads every launched rank's timeout record; throws the lowest rank's (others suppressed) and poisons. */
    void checkTimeouts(int[] launchedRanks) {
        PeerTimeoutException failure = null;
        for (int rank : launchedRanks) {
            int[] m = metadata(rank);
            int kind = metadataWord(m, Ll128.TIMEOUT_OFFSET);
            if (kind != 0) {
                PeerTimeoutException e = new PeerTimeoutException(rank, metadataWord(m, Ll128.TIMEOUT_SOURCE_OFFSET),
                        metadataWord(m, Ll128.TIMEOUT_ROW_OFFSET), metadataWord(m, Ll128.TIMEOUT_LINE_OFFSET),
                        kind == Ll128.TIMEOUT_LSE_LINE, timeout, metadataWord(m, Ll128.EPOCH_OFFSET) - 1);
                if (failure == null) {
                    failure = e;
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        if (failure != null) {
            poison = failure;
            throw failure;
        }
    }

    /** Re-zeroes every workspace (epochs, flags and timeout records) and clears the poison. */
    @Override
    public void reset() {
        if (closed) {
            throw new IllegalStateException("the CUDA workspace group is closed");
        }
        device.synchronize();
        for (DeviceBuffer w : workspaces) {
            w.zero();
        }
        poison = null;
    }

    /** Frees every workspace, the stream and the module, and the device if the group opened it. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        ownStream.synchronize();
        ownStream.close();
        for (DeviceBuffer w : workspaces) {
            w.close();
        }
        peers.close();
        module.close();
        if (ownsDevice) {
            device.close();
        }
    }
}
