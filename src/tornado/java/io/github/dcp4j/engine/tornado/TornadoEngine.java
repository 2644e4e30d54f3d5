package io.github.dcp4j.engine.tornado;

import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.layout.RowLayout;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.Tensor;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import uk.ac.manchester.tornado.api.AccessorParameters;
import uk.ac.manchester.tornado.api.GridScheduler;
import uk.ac.manchester.tornado.api.TaskGraph;
import uk.ac.manchester.tornado.api.TornadoExecutionPlan;
import uk.ac.manchester.tornado.api.TornadoExecutionResult;
import uk.ac.manchester.tornado.api.WorkerGrid1D;
import uk.ac.manchester.tornado.api.common.Access;
import uk.ac.manchester.tornado.api.enums.DataTransferMode;
import uk.ac.manchester.tornado.api.enums.ProfilerMode;
import uk.ac.manchester.tornado.api.exceptions.TornadoExecutionPlanException;
import uk.ac.manchester.tornado.api.runtime.TornadoRuntimeProvider;
import uk.ac.manchester.tornado.api.types.arrays.FloatArray;
import uk.ac.manchester.tornado.api.types.arrays.IntArray;
import uk.ac.manchester.tornado.api.types.arrays.LongArray;
import uk.ac.manchester.tornado.api.types.arrays.ShortArray;
import uk.ac.manchester.tornado.api.types.arrays.TornadoNativeArray;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.function.Function;

/**
 * The TornadoVM engine in loopback: every cp rank of a group on one GPU, their workspaces, inputs and outputs in
 * TornadoVM arrays ({@link GraphArrays}), one call one {@code execute()} of a task graph built once for the group's
 * workspace spec. The graph's tasks, in stream order: {@code exchange} (prebuilt PTX from
 * src/tornado/cuda/tornado_tasks.cu: the call's ticket, the LL128 line stores, then the bounded polls, which zero
 * every flag they saw and leave the LSEs received), then {@code weights} and {@code merge} (the engine's own or a
 * {@link MergeVariant}; {@link MergeTasks}, Java compiled by TornadoVM). Every launch has a fixed grid that strides
 * over the call's rows, so one graph (and one CUDA graph, with {@link Options#cudaGraph()}) serves calls of every row
 * count up to the spec's.
 *
 * <p>Validation is {@link LocalGroup#validateAll}, the workspace layout is {@link Ll128}'s, and a wait that gives up
 * leaves the other engines' timeout record, poisons the rank's workspace, makes the row NaN and fails the call with
 * {@link PeerTimeoutException}; no call runs until {@link #reset()}. Inputs are host views, copied into the graph's
 * arrays when a call is prepared and sent to the GPU on every execution (TornadoVM's PTX backend keeps its own CUDA
 * context, so another library's device memory cannot be used in place).
 */
public final class TornadoEngine implements LocalGroup {
    /** The engine's name, as {@code --engine} spells it. */
    public static final String NAME = "tornado";
    /** The task graph's name: the prebuilt task's entry name begins with it. */
    static final String GRAPH = "dcp4j";
    /** The prebuilt task's PTX, built by scripts/build-tornado-ptx into the tornado jar. */
    static final String PTX_RESOURCE = "tornado_tasks.ptx";
    /** TornadoNativeArray.ARRAY_HEADER the prebuilt task is compiled for (tornado_tasks.cu's kArrayHeader). */
    static final long ARRAY_HEADER = 16;
    /** Threads per block of every task. */
    static final int BLOCK_THREADS = 128;
    /** Most threads of one task's grid: larger calls stride (4096 blocks keep every SM of a Hopper GPU busy). */
    static final int MAX_GRID_THREADS = 4096 * BLOCK_THREADS;
    /**
     * Blocks of the exchange per SM: all resident at once, as the exchange's polls need (its launch bounds, in
     * tornado_tasks.cu, hold its registers to what 6 blocks of {@link #BLOCK_THREADS} leave a thread).
     */
    static final int EXCHANGE_BLOCKS_PER_SM = 6;
    /** Threads of a warp: the send's unit. */
    private static final int WARP = 32;

    /**
     * How a group runs.
     *
     * @param merge     the merge task
     * @param cudaGraph whether executions replay a CUDA graph (TornadoVM's {@code withCUDAGraph()})
     * @param profiler  whether TornadoVM's profiler times every execution ({@link #lastProfile()})
     */
    public record Options(MergeVariant.Named merge, boolean cudaGraph, boolean profiler) {
        /** The system property that turns CUDA-graph executions on: {@code -Ddcp4j.tornado.cudaGraph=true}. */
        public static final String CUDA_GRAPH_PROPERTY = "dcp4j.tornado.cudaGraph";

        /**
         * Checks the merge.
         *
         * @param merge     the merge task
         * @param cudaGraph whether executions replay a CUDA graph
         * @param profiler  whether TornadoVM's profiler runs
         */
        public Options {
            Objects.requireNonNull(merge, "merge");
        }

        /**
         * The merge {@code -Ddcp4j.tornado.merge} names (the engine's own by default), CUDA graphs where
         * {@code -Ddcp4j.tornado.cudaGraph=true}, no profiler.
         *
         * @return the options
         */
        public static Options fromSystemProperties() {
            return new Options(MergeVariant.fromSystemProperty(), Boolean.getBoolean(CUDA_GRAPH_PROPERTY), false);
        }
    }

    /**
     * What TornadoVM's profiler measured in one execution, in nanoseconds.
     *
     * @param kernelNs   time of the graph's kernels on the device
     * @param copyInNs   host-to-device copies
     * @param copyOutNs  device-to-host copies
     * @param totalNs    the execution as TornadoVM's host saw it
     * @param dispatchNs time the host spent dispatching kernels
     */
    public record Profile(long kernelNs, long copyInNs, long copyOutNs, long totalNs, long dispatchNs) {
    }

    private final WorkspaceSpec spec;
    private final Duration timeout;
    private final Options options;
    private final Path ptx;
    private GraphArrays arrays;
    private TornadoExecutionPlan plan;
    private TornadoExecutionResult lastResult;
    /** The prepared call whose inputs the arrays hold. */
    private Call loaded;
    private boolean poisoned;
    private boolean closed;

    private TornadoEngine(WorkspaceSpec spec, Duration timeout, Options options, Path ptx) {
        this.spec = spec;
        this.timeout = timeout;
        this.options = options;
        this.ptx = ptx;
        build();
    }

    /**
     * A group of {@code spec.cpSize()} ranks on TornadoVM's default device, each with a zeroed workspace.
     *
     * @param spec    the largest call the group will make
     * @param timeout how long a rank waits for a peer's line
     * @param options the merge, CUDA graphs, the profiler
     * @return the group; close it to free its device memory
     * @throws IllegalStateException where TornadoVM's runtime does not start here, its array header is not the one
     *         the prebuilt task is compiled for, or the tornado jar holds no PTX (naming why)
     */
    public static TornadoEngine open(WorkspaceSpec spec, Duration timeout, Options options) {
        Objects.requireNonNull(spec, "spec");
        Objects.requireNonNull(timeout, "timeout");
        Objects.requireNonNull(options, "options");
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive; got " + timeout);
        }
        String why = unavailableReason();
        if (why != null) {
            throw new IllegalStateException(why);
        }
        if (TornadoNativeArray.ARRAY_HEADER != ARRAY_HEADER) {
            throw new IllegalStateException("TornadoVM's array header is " + TornadoNativeArray.ARRAY_HEADER
                    + " bytes (tornado.panama.objectHeader); the tornado engine's PTX task is built for "
                    + ARRAY_HEADER);
        }
        Path ptx = writePtx();
        try {
            return new TornadoEngine(spec, timeout, options, ptx);
        } catch (RuntimeException | Error e) {
            deleteQuietly(ptx, e);
            throw e;
        }
    }

    /** Deletes {@code file}; a failure to is added to {@code failure}, the error being raised. */
    private static void deleteQuietly(Path file, Throwable failure) {
        try {
            Files.deleteIfExists(file);
        } catch (IOException e) {
            failure.addSuppressed(e);
        }
    }

    /**
     * Why no group can open in this JVM, or null where TornadoVM's runtime starts and has a device.
     *
     * @return the reason, or null
     */
    static String unavailableReason() {
        try {
            TornadoRuntimeProvider.getTornadoRuntime().getDefaultDevice();
            return null;
        } catch (Throwable e) {  // a missing runtime shows as a LinkageError or the API's own exception
            Throwable root = e;
            while (root.getCause() != null) {
                root = root.getCause();
            }
            return "TornadoVM's runtime did not start in this JVM (run it with the argument file that"
                    + " tornado-config/make-argfile writes for a TornadoVM SDK): " + root;
        }
    }

    /**
     * The prebuilt task's PTX in a file, its entry named as TornadoVM names the entry of this graph's prebuilt task
     * ({@link #entryName}).
     */
    private static Path writePtx() {
        String text;
        try (InputStream in = TornadoEngine.class.getResourceAsStream(PTX_RESOURCE)) {
            if (in == null) {
                throw new IllegalStateException("the tornado jar holds no " + PTX_RESOURCE + " (the build makes it with"
                        + " scripts/build-tornado-ptx, which -Dkernels.skip leaves out)");
            }
            text = new String(in.readAllBytes(), StandardCharsets.US_ASCII);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        text = renameEntry(text, Prebuilt.ENTRY, entryName(Prebuilt.TASK, Prebuilt.ENTRY, Prebuilt.types()));
        Path file;
        try {
            file = Files.createTempFile("dcp4j-tornado-", ".ptx");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        try {
            Files.writeString(file, text, StandardCharsets.US_ASCII);
            return file;
        } catch (IOException e) {
            UncheckedIOException failure = new UncheckedIOException(e);
            deleteQuietly(file, failure);
            throw failure;
        }
    }

    private static String renameEntry(String ptxText, String entry, String name) {
        String declaration = ".entry " + entry + "(";
        if (!ptxText.contains(declaration)) {
            throw new IllegalStateException(PTX_RESOURCE + " has no entry " + entry);
        }
        return ptxText.replace(declaration, ".entry " + name + "(");
    }

    /**
     * The name TornadoVM's PTX backend looks up for the entry of prebuilt task {@code task} of this graph
     * ({@code PTXCodeUtil.buildKernelName}): the task's id {@code graph.task} with '.' as '_', the entry, then per
     * argument '_' and its class name without the {@code uk.ac.manchester.tornado.api.types.} prefix, '.' as '_',
     * all lower case.
     *
     * @param task  the task's name in the graph
     * @param entry the kernel's name in the PTX
     * @param args  the task's argument classes, in order
     * @return the entry name
     */
    static String entryName(String task, String entry, List<Class<?>> args) {
        StringBuilder b = new StringBuilder(GRAPH).append('_').append(task).append('_').append(entry);
        for (Class<?> c : args) {
            b.append('_').append(c.getName().replace('.', '_'));
        }
        return b.toString().replace("uk_ac_manchester_tornado_api_types_", "").toLowerCase(Locale.ROOT);
    }

    /**
     * The graph's one prebuilt task, {@code exchange} (the LL128 send and the bounded receive in one kernel), and its
     * arguments. One prebuilt task, and the graph's first: TornadoVM 5.2.1 finds a prebuilt task's installed code at
     * the graph's first task's place (its local task index of a prebuilt task is always 0), so a second prebuilt task
     * would launch the first one's kernel.
     */
    static final class Prebuilt {
        static final String TASK = "exchange";
        static final String ENTRY = "ll128_exchange";

        /**
         * One argument of the kernel, after TornadoVM's kernel-context pointer: its parameter's name in
         * tornado_tasks.cu, its array's class (which TornadoVM spells into the entry name), how the kernel accesses
         * it, and which of the graph's arrays it is.
         */
        record Argument(String name, Class<?> type, Access access, Function<GraphArrays, Object> array) {
        }

        /** The kernel's arguments in its parameters' order. */
        static final List<Argument> ARGUMENTS = List.of(
                new Argument("params", IntArray.class, Access.READ_ONLY, a -> a.params),
                new Argument("workspaces", LongArray.class, Access.READ_WRITE, a -> a.ws),
                new Argument("partialO", ShortArray.class, Access.READ_ONLY, a -> a.oIn),
                new Argument("partialLse", FloatArray.class, Access.READ_ONLY, a -> a.lseIn),
                new Argument("index", IntArray.class, Access.READ_ONLY, a -> a.index),
                new Argument("senders", IntArray.class, Access.READ_ONLY, a -> a.senders),
                new Argument("received", FloatArray.class, Access.WRITE_ONLY, a -> a.received),
                new Argument("failed", IntArray.class, Access.READ_WRITE, a -> a.failed),
                new Argument("status", IntArray.class, Access.READ_WRITE, a -> a.status));

        private Prebuilt() {
        }

        /** The arguments' classes, in order, as {@link #entryName} takes them. */
        static List<Class<?>> types() {
            return ARGUMENTS.stream().<Class<?>>map(Argument::type).toList();
        }

        static AccessorParameters exchange(GraphArrays a) {
            AccessorParameters p = new AccessorParameters(ARGUMENTS.size());
            for (int i = 0; i < ARGUMENTS.size(); i++) {
                p.set(i, ARGUMENTS.get(i).array().apply(a), ARGUMENTS.get(i).access());
            }
            return p;
        }
    }

    /** Builds the arrays (zeroed workspaces) and the plan. */
    private void build() {
        GraphArrays a = new GraphArrays(spec);
        int cp = a.cp;
        long rows = a.maxRows;
        RowLayout row = RowLayout.of(spec.headDim(), spec.dtype().bytes());
        TaskGraph graph = new TaskGraph(GRAPH)
                .transferToDevice(DataTransferMode.FIRST_EXECUTION, a.ws, a.tables, a.received, a.weights, a.failed,
                        a.status)
                .transferToDevice(DataTransferMode.EVERY_EXECUTION, a.params, a.oIn, a.lseIn, a.index, a.senders)
                .prebuiltTask(Prebuilt.TASK, Prebuilt.ENTRY, ptx.toString(), Prebuilt.exchange(a))
                .task("weights", MergeTasks::weights, a.params, a.received, a.weights, a.tables)
                .task("merge", options.merge().merge(), a.params, a.ws, a.oIn, a.index, a.weights, a.failed, a.out,
                        a.tables)
                .transferToHost(DataTransferMode.EVERY_EXECUTION, a.out, a.status)
                .transferToHost(DataTransferMode.UNDER_DEMAND, a.ws);
        GridScheduler grids = new GridScheduler();
        grids.addWorkerGrid(GRAPH + "." + Prebuilt.TASK, exchangeGrid((long) cp * rows * cp * WARP));
        grids.addWorkerGrid(GRAPH + ".weights", grid((long) cp * rows));
        grids.addWorkerGrid(GRAPH + ".merge", grid((long) cp * rows * row.dataWords() * 4));
        TornadoExecutionPlan p = new TornadoExecutionPlan(graph.snapshot()).withGridScheduler(grids);
        if (options.profiler()) {
            p = p.withProfiler(ProfilerMode.SILENT);
        }
        if (options.cudaGraph()) {
            p = p.withCUDAGraph();
        }
        this.arrays = a;
        this.plan = p;
        this.lastResult = null;
        this.loaded = null;
    }

    /**
     * The exchange's grid: enough threads for {@code work} (its send's), at most {@link #EXCHANGE_BLOCKS_PER_SM} blocks
     * per SM of TornadoVM's device, so that every block is resident at once and every sender runs while receivers
     * poll.
     */
    private static WorkerGrid1D exchangeGrid(long work) {
        int sms = TornadoExecutionPlan.DEFAULT_DEVICE.getPhysicalDevice().getDeviceMaxComputeUnits();
        // no more blocks than a ticket counts arrivals of (Ll128.ARRIVALS_MASK): the exchange strides over its items
        long blocks = Math.min(Math.min((long) Math.max(sms, 1) * EXCHANGE_BLOCKS_PER_SM, Ll128.ARRIVALS_MASK),
                Math.ceilDiv(Math.max(work, 1), BLOCK_THREADS));
        WorkerGrid1D g = new WorkerGrid1D((int) (blocks * BLOCK_THREADS));
        g.setLocalWork(BLOCK_THREADS, 1, 1);
        return g;
    }

    /** A fixed grid for {@code work} items (threads): whole blocks, at most {@link #MAX_GRID_THREADS}. */
    private static WorkerGrid1D grid(long work) {
        long threads = Math.min(MAX_GRID_THREADS, Math.ceilDiv(Math.max(work, 1), BLOCK_THREADS) * BLOCK_THREADS);
        WorkerGrid1D g = new WorkerGrid1D((int) threads);
        g.setLocalWork(BLOCK_THREADS, 1, 1);
        return g;
    }

    @Override
    public String engineName() {
        return NAME;
    }

    @Override
    public String description() {
        return cpSize() + " ranks in one TornadoVM task graph on "
                + TornadoExecutionPlan.DEFAULT_DEVICE.getPhysicalDevice().getDeviceName() + ", merge "
                + options.merge().name()
                + (options.cudaGraph() ? ", CUDA graph" : "");
    }

    @Override
    public int cpSize() {
        return spec.cpSize();
    }

    /** {@return how the group runs} */
    public Options options() {
        return options;
    }

    /** {@return how long a rank waits for a peer's line before its call fails} */
    public Duration timeout() {
        return timeout;
    }

    /**
     * What TornadoVM's profiler measured in the last execution.
     *
     * @return the profile
     * @throws IllegalStateException where the group runs without the profiler, or nothing ran yet
     */
    public Profile lastProfile() {
        if (!options.profiler() || lastResult == null) {
            throw new IllegalStateException("no profile: the group " + (options.profiler() ? "ran no call yet"
                    : "runs without the profiler (Options.profiler)"));
        }
        var r = lastResult.getProfilerResult();
        return new Profile(r.getDeviceKernelTime(), r.getDeviceWriteTime(), r.getDeviceReadTime(), r.getTotalTime(),
                r.getKernelDispatchTime());
    }

    /**
     * TornadoVM's profiler log of the last execution (JSON: every task's kernel time, every copy).
     *
     * @return the log
     * @throws IllegalStateException where the group runs without the profiler, or nothing ran yet
     */
    public String lastProfileLog() {
        lastProfile();
        return lastResult.getProfilerResult().getProfileLog();
    }

    /**
     * The call counter of {@code rank} (metadata word 0), read back from the device.
     *
     * @param rank a rank of the group
     * @return the counter its next call will use
     */
    public int epoch(int rank) {
        return workspaceOnDevice(rank).get(ValueLayout.JAVA_INT_UNALIGNED, Ll128.EPOCH_OFFSET);
    }

    /** Whether rank {@code rank}'s workspace is marked poisoned on the device (white-box, for the fault tests). */
    boolean poisonedOnDevice(int rank) {
        long arrivals = Integer.toUnsignedLong(workspaceOnDevice(rank).get(ValueLayout.JAVA_INT_UNALIGNED,
                Ll128.ARRIVALS_OFFSET));
        return (arrivals & Ll128.POISONED_BIT) != 0;
    }

    /** Rank {@code rank}'s workspace as it is on the device, read back (white-box, for the tests). */
    MemorySegment workspaceOnDevice(int rank) {
        requireOpen();
        if (lastResult != null) {
            lastResult.transferToHost(arrays.ws);
        }
        return arrays.workspace(rank);
    }

    @Override
    public PreparedCall prepare(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                                List<? extends Tensor> out, LseMode mode) {
        requireUsable();
        List<ReduceCall> calls = LocalGroup.validateAll(partialO, partialLse, out, cpSize(), spec.bytes(), mode);
        return new Call(calls, hostViews("partial_o", partialO), hostViews("partial_lse", partialLse),
                hostViews("out", out), null);
    }

    /** As {@link #prepare}, with rank {@code silent} sending nothing: its peers' waits give up (the fault tests). */
    PreparedCall prepareWithoutSender(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                                      List<? extends Tensor> out, LseMode mode, int silent) {
        requireUsable();
        List<ReduceCall> calls = LocalGroup.validateAll(partialO, partialLse, out, cpSize(), spec.bytes(), mode);
        return new Call(calls, hostViews("partial_o", partialO), hostViews("partial_lse", partialLse),
                hostViews("out", out), silent);
    }

    private static List<TensorView> hostViews(String name, List<? extends Tensor> tensors) {
        List<TensorView> views = new ArrayList<>(tensors.size());
        for (int r = 0; r < tensors.size(); r++) {
            if (!(tensors.get(r) instanceof TensorView v)) {
                throw new IllegalArgumentException(name + " of rank " + r + " must be a host TensorView for the"
                        + " tornado engine (TornadoVM's PTX backend has its own CUDA context: another library's device"
                        + " memory cannot be used in place); got " + tensors.get(r));
            }
            views.add(v);
        }
        return views;
    }

    /** One prepared call: its inputs are copied into the group's arrays at its first run, and after another's. */
    private final class Call implements PreparedCall {
        private final List<ReduceCall> calls;
        private final List<TensorView> partialO;
        private final List<TensorView> partialLse;
        private final List<TensorView> out;
        private final Integer silent;

        Call(List<ReduceCall> calls, List<TensorView> partialO, List<TensorView> partialLse, List<TensorView> out,
             Integer silent) {
            this.calls = calls;
            this.partialO = partialO;
            this.partialLse = partialLse;
            this.out = out;
            this.silent = silent;
        }

        @Override
        public void run() {
            requireUsable();
            if (loaded != this) {
                arrays.load(calls, partialO, partialLse, timeout);
                arrays.senders.init(1);
                if (silent != null) {
                    arrays.senders.set(silent, 0);
                }
                loaded = this;
            }
            lastResult = plan.execute();
            checkStatus();
        }

        /**
         * Copies this call's outputs from the group's arrays: refused where another call ran since this one, or
         * this one has not run (the arrays hold another call's outputs, or none).
         */
        @Override
        public void readOutputs() {
            requireOpen();
            if (loaded != this || lastResult == null) {
                throw new IllegalStateException("readOutputs: the group's arrays hold another call's outputs, or"
                        + " none: run this call, then read its outputs before another call runs");
            }
            arrays.store(calls, out);
        }

        @Override
        public void close() {
            if (loaded == this) {
                loaded = null;
            }
        }
    }

    /** After an execution: a wait that gave up (or a misplaced workspace) fails the call and poisons the group. */
    private void checkStatus() {
        int status = arrays.status.get(0);
        if (status == 0) {
            return;
        }
        poisoned = true;
        if (status == MergeTasks.STATUS_MISALIGNED) {
            throw new IllegalStateException("TornadoVM's workspace buffer does not put rank 0's workspace on "
                    + Ll128.LINE_BYTES + " bytes (array header " + TornadoNativeArray.ARRAY_HEADER + "); nothing was"
                    + " sent; the group is unusable");
        }
        lastResult.transferToHost(arrays.ws);
        for (int r = 0; r < cpSize(); r++) {
            MemorySegment m = arrays.workspace(r);
            int kind = m.get(ValueLayout.JAVA_INT_UNALIGNED, Ll128.TIMEOUT_OFFSET);
            if (kind != 0) {
                throw new PeerTimeoutException(r, m.get(ValueLayout.JAVA_INT_UNALIGNED, Ll128.TIMEOUT_SOURCE_OFFSET),
                        m.get(ValueLayout.JAVA_INT_UNALIGNED, Ll128.TIMEOUT_ROW_OFFSET),
                        m.get(ValueLayout.JAVA_INT_UNALIGNED, Ll128.TIMEOUT_LINE_OFFSET),
                        kind == Ll128.TIMEOUT_LSE_LINE, timeout,
                        m.get(ValueLayout.JAVA_INT_UNALIGNED, Ll128.TIMEOUT_EPOCH_OFFSET));
            }
        }
        throw new IllegalStateException("the tornado group's status word is " + status + " but no rank holds a"
                + " timeout record");
    }

    private void requireOpen() {
        if (closed) {
            throw new IllegalStateException("the tornado group is closed");
        }
    }

    private void requireUsable() {
        requireOpen();
        if (poisoned) {
            throw new IllegalStateException("the tornado group is poisoned by a call that failed; reset() it (every"
                    + " workspace re-zeroed) before the next call");
        }
    }

    /** Re-zeroes every workspace: fresh arrays and a fresh plan (TornadoVM recompiles the tasks on the next call). */
    @Override
    public void reset() {
        requireOpen();
        freePlan();
        build();
        poisoned = false;
    }

    private void freePlan() {
        try {
            plan.close();
        } catch (TornadoExecutionPlanException e) {
            throw new IllegalStateException("TornadoVM could not free the group's device memory", e);
        }
    }

    /** Frees the group's device memory and its PTX file. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            freePlan();
        } catch (RuntimeException | Error e) {
            deleteQuietly(ptx, e);
            throw e;
        }
        try {
            Files.deleteIfExists(ptx);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
