package io.github.dcp4j.engine.cpu;

import io.github.dcp4j.engine.FirstFailure;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.engine.PeerFailedException;
import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.Tensor;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;

import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * The CPU engine: a group of cp ranks in one JVM, each with its own off-heap workspace, running the real LL128
 * protocol over the real byte layout. Each rank's calls run on whichever platform thread makes them (one thread per
 * rank at a time); {@link #reduceAll} runs all ranks on the group's own threads.
 *
 * <p>Every wait is bounded by the group's timeout. A rank that times out throws a {@link PeerTimeoutException} naming
 * what it waited for and poisons the group: further calls fail until {@link #reset()} re-zeroes every workspace. A
 * rank whose part of a call fails in any other way once the call has begun poisons the group too, and every rank
 * waiting in that call stops at once with a {@link PeerFailedException} naming it, its exception as the cause.
 */
public final class CpuEngine implements LocalGroup {
    /** The engine's name as the CLI prints it. */
    public static final String NAME = "cpu";
    /** How long a rank waits for a peer's line before it gives up, unless the group is opened with another. */
    public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(10);

    private final Arena arena;
    private final List<CpuWorkspace> workspaces;
    private final Duration timeout;
    private final ExecutorService rankThreads;
    /** A failure of a call and the rank it happened on. */
    record Poison(int rank, RuntimeException cause) {
    }

    /** The first failure since the last reset: later calls are refused naming it. */
    private volatile Poison poison;
    /** The first failure that was not a wait giving up: every waiting rank stops for it. */
    private volatile Poison stop;
    private volatile boolean closed;

    private CpuEngine(int cpSize, long workspaceBytes, Duration timeout) {
        this.timeout = timeout;
        this.arena = Arena.ofShared();
        List<CpuWorkspace> list = new ArrayList<>(cpSize);
        for (int r = 0; r < cpSize; r++) {
            list.add(new CpuWorkspace(this, r, arena.allocate(workspaceBytes, Ll128.LINE_BYTES)));
        }
        this.workspaces = List.copyOf(list);
        this.rankThreads = Executors.newFixedThreadPool(cpSize, Thread.ofPlatform().daemon().name("dcp4j-cpu-rank-",
                0).factory());
    }

    /**
     * A group of {@code spec.cpSize()} ranks, each with a zeroed workspace of {@code spec.bytes()}.
     *
     * @param spec    the largest call the group will make
     * @param timeout how long a rank waits for a peer's line
     * @return the group; close it to free the workspaces and stop its threads
     */
    public static CpuEngine open(WorkspaceSpec spec, Duration timeout) {
        Objects.requireNonNull(spec, "spec");
        return open(spec.cpSize(), spec.bytes(), timeout);
    }

    /**
     * As {@link #open(WorkspaceSpec, Duration)} with the default 10 s timeout.
     *
     * @param spec the largest call the group will make
     * @return the group
     */
    public static CpuEngine open(WorkspaceSpec spec) {
        return open(spec, DEFAULT_TIMEOUT);
    }

    /**
     * A group of {@code cpSize} ranks with zeroed workspaces of {@code workspaceBytes} each (a size from
     * {@code DcpLseReduce.workspaceSize}).
     *
     * @param cpSize         ranks in the group, 1..{@link Ll128#MAX_RANKS}
     * @param workspaceBytes each rank's workspace size
     * @param timeout        how long a rank waits for a peer's line, positive
     * @return the group
     * @throws IllegalArgumentException naming the argument out of its range
     */
    public static CpuEngine open(int cpSize, long workspaceBytes, Duration timeout) {
        if (cpSize < 1 || cpSize > Ll128.MAX_RANKS) {
            throw new IllegalArgumentException("cp_size must be in [1, " + Ll128.MAX_RANKS + "]; got " + cpSize);
        }
        if (workspaceBytes <= Ll128.PAYLOAD_OFFSET) {
            throw new IllegalArgumentException("workspace bytes must be > " + Ll128.PAYLOAD_OFFSET + "; got "
                    + workspaceBytes);
        }
        Objects.requireNonNull(timeout, "timeout");
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive; got " + timeout);
        }
        return new CpuEngine(cpSize, workspaceBytes, timeout);
    }

    @Override
    public int cpSize() {
        return workspaces.size();
    }

    /** {@return how long a rank waits for a peer's line before its call fails} */
    public Duration timeout() {
        return timeout;
    }

    /**
     * The workspace of {@code rank}: pass it to {@code DcpLseReduce.reduce} on that rank's thread.
     *
     * @param rank a rank of the group
     * @return its workspace
     */
    public CpuWorkspace workspace(int rank) {
        if (rank < 0 || rank >= workspaces.size()) {
            throw new IllegalArgumentException("rank must be in [0, " + workspaces.size() + "); got " + rank);
        }
        return workspaces.get(rank);
    }

    @Override
    public String engineName() {
        return NAME;
    }

    @Override
    public String description() {
        return cpSize() + " ranks as platform threads on " + Runtime.getRuntime().availableProcessors() + " cores";
    }

    /**
     * Validates every rank's arguments before any rank starts; each run is one collective call with every rank on the
     * group's threads, writing the outputs directly. If ranks fail, the lowest rank's exception is thrown with the
     * others suppressed.
     */
    @Override
    public PreparedCall prepare(List<? extends Tensor> partialO, List<? extends Tensor> partialLse,
                                List<? extends Tensor> out, LseMode mode) {
        List<ReduceCall> calls = LocalGroup.validateAll(partialO, partialLse, out, cpSize(),
                workspaces.getFirst().byteSize(), mode);
        for (int r = 0; r < cpSize(); r++) {
            requireSharedMemory("partial_o", r, partialO.get(r));
            requireSharedMemory("partial_lse", r, partialLse.get(r));
            requireSharedMemory("out", r, out.get(r));
        }
        return new PreparedCall() {
            @Override
            public void run() {
                runRanks(calls);
            }

            /** The ranks wrote the outputs themselves. */
            @Override
            public void readOutputs() {
            }

            @Override
            public void close() {
            }
        };
    }

    /**
     * Runs {@code calls} (one per rank, any subset of the ranks) concurrently on the group's threads and waits for all
     * of them.
     */
    void runRanks(List<ReduceCall> calls) {
        requireUsable();
        for (ReduceCall call : calls) {
            requireAlive("partial_o", call.cpRank(), call.partialO());
            requireAlive("partial_lse", call.cpRank(), call.partialLse());
            requireAlive("out", call.cpRank(), call.out());
        }
        List<Future<?>> futures = new ArrayList<>(calls.size());
        for (ReduceCall call : calls) {
            futures.add(rankThreads.submit(() -> workspaces.get(call.cpRank()).execute(call)));
        }
        FirstFailure<RuntimeException> failure = new FirstFailure<>();
        for (Future<?> f : futures) {
            try {
                awaitUninterruptibly(f);
            } catch (ExecutionException e) {
                failure.add(e.getCause() instanceof RuntimeException re ? re
                        : new IllegalStateException("rank thread failed", e.getCause()));
            }
        }
        failure.throwIfAny();
    }

    private static void awaitUninterruptibly(Future<?> f) throws ExecutionException {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    f.get();
                    return;
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * Refuses, before any rank starts, a tensor whose memory was freed since the call was prepared: it would fail one
     * rank half-way through the call.
     */
    static void requireAlive(String name, int rank, Tensor tensor) {
        TensorView.host(tensor, name + " of rank " + rank, NAME).requireAlive(name + " of rank " + rank);
    }

    /** The group's threads touch every tensor: memory confined to one thread would fail half-way through a call. */
    private static void requireSharedMemory(String name, int rank, Tensor tensor) {
        TensorView t = TensorView.host(tensor, name + " of rank " + rank, NAME);
        if (!t.memory().isAccessibleBy(new Thread(() -> { }))) {
            throw new IllegalArgumentException(name + " of rank " + rank + " is in memory confined to one thread;"
                    + " reduceAll runs ranks on the group's threads: use a shared, auto or global arena");
        }
    }

    /**
     * Re-zeroes every workspace and clears a timeout's poison: the collective reset after a failed call. No call may
     * be in flight on any rank.
     */
    public void reset() {
        requireOpen();
        for (CpuWorkspace w : workspaces) {
            if (w.inCall()) {
                throw new IllegalStateException("cannot reset while rank " + w.rank() + " is in a call");
            }
        }
        for (CpuWorkspace w : workspaces) {
            w.memory().fill((byte) 0);
        }
        poison = null;
        stop = null;
    }

    /**
     * Records the first failure of a call on {@code rank}: a wait that gave up, or (any other exception) a part of the
     * call that failed, for which every waiting rank is woken to stop.
     */
    void poison(int rank, RuntimeException cause) {
        boolean peersStop = !(cause instanceof PeerTimeoutException || cause instanceof PeerFailedException);
        synchronized (this) {
            if (poison == null) {
                poison = new Poison(rank, cause);
            }
            if (peersStop && stop == null) {
                stop = new Poison(rank, cause);
            }
        }
        if (peersStop) {
            workspaces.forEach(CpuWorkspace::wake);
        }
    }

    /** The failure that waiting ranks must stop for, or null. */
    Poison stopping() {
        return stop;
    }

    void requireUsable() {
        requireOpen();
        Poison p = poison;
        if (p != null) {
            throw new IllegalStateException("the workspace group is poisoned by rank " + p.rank() + "'s failed call ("
                    + p.cause().getMessage() + "); call reset() once every rank has returned", p.cause());
        }
    }

    private void requireOpen() {
        if (closed) {
            throw new IllegalStateException("the CPU workspace group is closed");
        }
    }

    /** Stops the rank threads and frees every workspace. No call may be in flight. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        rankThreads.shutdownNow();
        arena.close();
    }
}
