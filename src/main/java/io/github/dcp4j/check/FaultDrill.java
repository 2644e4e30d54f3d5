package io.github.dcp4j.check;

import io.github.dcp4j.bench.CaseMatrix;
import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.cuda.CudaGraph;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.engine.PeerFailedException;
import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.engine.cpu.CpuEngine;
import io.github.dcp4j.engine.cuda.CudaGroup;
import io.github.dcp4j.engine.cuda.CudaRankEngine;
import io.github.dcp4j.engine.cuda.KernelCall;
import io.github.dcp4j.engine.cuda.RankSetup;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.peer.GroupCheck;
import io.github.dcp4j.peer.IpcWorkspaces;
import io.github.dcp4j.reference.ConformanceCases.GroupInputs;
import io.github.dcp4j.reference.RandomInputs;
import io.github.dcp4j.rendezvous.LauncherEnvironment;

import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.List;
import java.util.SplittableRandom;
import java.util.function.Consumer;

/**
 * One rank of a GPU fault drill (docs/RELIABILITY.md), at the layer shape over CUDA IPC: the victim rank misbehaves
 * on purpose ({@link Kind}) and every rank prints one {@link DrillOutcome} line of what it saw, which {@link
 * DrillJudge} judges from the launch's log. The starve drill also runs without a group: every rank in one loopback
 * launch of this process, the whole process starved.
 *
 * <p>The drill acts on its own process where the drill needs it: the victim of the kill drill sends itself SIGKILL
 * with a replay in flight, and the starved process sets its MPS share in its C environment before CUDA starts. The
 * processes themselves are started by {@code launch} (its {@code --keep-going} lets the others time out).
 */
public final class FaultDrill {
    /** The drills, named as {@code --kind} and the outcome lines spell them. */
    public enum Kind {
        /** The victim sends itself SIGKILL while a CUDA graph replay runs; the others must time out naming it. */
        kill,
        /**
         * The victim's graph has one launch fewer; the others must time out naming it, see their workspace poisoned
         * and the status word stay set, and a collective reset must make the group usable again.
         */
        skip,
        /**
         * The victim runs with too few SMs for its blocks to be resident at once; every rank must complete correctly
         * or end in a named exception within the timeout.
         */
        starve
    }

    /** Launches in one graph: long enough that the victim's kill lands while a replay runs. */
    private static final int GRAPH_LAUNCHES = 1000;
    /** The victim of the kill drill completes this many replays first (every rank is then well into its loop). */
    private static final int REPLAYS_BEFORE_KILL = 5;
    /** A survivor of the kill drill replays at most this many times before it reports that nobody died. */
    private static final int MAX_REPLAYS = 200;
    /** The starve drill's batch: more blocks per rank than a starved rank can hold resident. */
    private static final int STARVE_BATCH = 64;
    /** The starve drill's replays, each of a graph of {@link #STARVE_LAUNCHES}. */
    private static final int STARVE_REPLAYS = 3;
    /** Launches in one graph of the starve drill. */
    private static final int STARVE_LAUNCHES = 20;
    /** Ranks of the loopback starve drill. */
    public static final int LOOPBACK_RANKS = 8;
    /** The MPS client variable that caps a process's share of the SMs. */
    public static final String ACTIVE_THREAD_PERCENTAGE = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
    /** The inputs' seed: every rank of a group generates the whole group's inputs from it, alike. */
    private static final long SEED = 2028;

    private final Kind kind;
    private final int victim;
    private final Duration timeout;
    private final int activeThreads;
    private final PrintWriter out;

    /**
     * One rank's drill.
     *
     * @param kind          the drill
     * @param victim        the rank that misbehaves
     * @param timeout       how long a rank waits for a peer
     * @param activeThreads starve: the victim's {@value #ACTIVE_THREAD_PERCENTAGE}, 1..100
     * @param out           where the outcome line and the exceptions' messages go (flushed after the outcome)
     */
    public FaultDrill(Kind kind, int victim, Duration timeout, int activeThreads, PrintWriter out) {
        this.kind = kind;
        this.victim = victim;
        this.timeout = timeout;
        this.activeThreads = activeThreads;
        this.out = out;
    }

    /**
     * Runs this rank's drill: as a rank of the group in the environment ({@link RankSetup}), or, for the starve drill
     * without one, every rank in one loopback launch. The kill drill's victim does not return.
     *
     * @param log receives the line describing this rank, in a group
     * @throws IllegalStateException    for the kill or skip drill without a group, or where no GPU is usable
     * @throws IllegalArgumentException for a victim that is not a rank of the group
     */
    public void run(Consumer<String> log) {
        boolean group = RankSetup.inEnvironment();
        if (!group && kind != Kind.starve) {
            throw new IllegalStateException("the " + kind + " drill runs as a rank of a group");
        }
        int rank = group ? LauncherEnvironment.of(System.getenv()).rank() : -1;
        int world = group ? LauncherEnvironment.of(System.getenv()).worldSize() : LOOPBACK_RANKS;
        if (victim < 0 || victim >= world) {
            throw new IllegalArgumentException("the drill's victim must be a rank of the group, in [0, "
                    + (world - 1) + "]; got " + victim);
        }
        if (kind == Kind.starve && (!group || rank == victim)) {
            // before CUDA starts: the MPS client reads its share when CUDA first initialises
            DrillProcess.setenv(ACTIVE_THREAD_PERCENTAGE, Integer.toString(activeThreads));
        }
        Cuda.Availability gpu = Cuda.availability();
        if (!gpu.available()) {
            throw new IllegalStateException("drill needs a GPU: " + gpu.reason());
        }
        if (!group) {
            loopbackStarve();
            return;
        }
        try (RankSetup setup = RankSetup.fromEnvironment(timeout, log)) {
            int batch = kind == Kind.starve ? STARVE_BATCH : 1;
            WorkspaceSpec ws = specOf(batch, world);
            try (Arena arena = Arena.ofShared(); IpcWorkspaces w = setup.openWorkspaces(ws.bytes());
                 CudaRankEngine engine = setup.openEngine(w, timeout)) {
                GroupInputs g = inputs(arena, batch, world);
                TensorView expected = expected(g, ws).get(rank);
                TensorView o = output(arena, g.partialO().get(rank));
                try (KernelCall call = engine.prepare(g.partialO().get(rank), g.partialLse().get(rank), o, rank,
                        world, LseMode.BASE2)) {
                    DrillOutcome outcome = DrillOutcome.of(kind.name(), Integer.toString(rank))
                            .with(DrillOutcome.BLOCKS_PER_RANK, call.blocksPerRank());
                    switch (kind) {
                        case kill -> kill(outcome, call, rank == victim);
                        case skip -> skip(outcome, engine, call, g, o, expected, rank);
                        case starve -> starve(outcome, call, List.of(o), List.of(expected), rank == victim);
                    }
                }
            }
        }
    }

    private static WorkspaceSpec specOf(int batch, int cp) {
        return new WorkspaceSpec(batch, CaseMatrix.LAYER_HEADS, cp, CaseMatrix.LAYER_HEAD_DIM, DType.BF16);
    }

    private static GroupInputs inputs(Arena arena, int batch, int cp) {
        return RandomInputs.group(arena, new SplittableRandom(SEED), batch, CaseMatrix.LAYER_HEADS, cp,
                CaseMatrix.LAYER_HEAD_DIM, DType.BF16, 3.0);
    }

    private static List<TensorView> expected(GroupInputs g, WorkspaceSpec spec) {
        try (CpuEngine cpu = CpuEngine.open(spec)) {
            return cpu.reduceAll(g.partialO(), g.partialLse(), LseMode.BASE2);
        }
    }

    private static TensorView output(Arena arena, TensorView partialO) {
        return TensorView.allocate(arena, partialO.dtype(), ReduceCall.outputShape(partialO));
    }

    private static CudaGraph graph(KernelCall call, int launches) {
        return CudaGraph.capture(call.stream(), () -> {
            for (int i = 0; i < launches; i++) {
                call.launch();
            }
        });
    }

    private static long millisSince(long start) {
        return (System.nanoTime() - start) / 1_000_000;
    }

    private void report(DrillOutcome outcome) {
        out.println(outcome.line());
        out.flush();
    }

    /** The victim replays a few times, then sends itself SIGKILL with a replay running; the others replay on. */
    private void kill(DrillOutcome outcome, KernelCall call, boolean isVictim) {
        CudaStream stream = call.stream();
        try (CudaGraph graph = graph(call, GRAPH_LAUNCHES)) {
            if (isVictim) {
                for (int i = 0; i < REPLAYS_BEFORE_KILL; i++) {
                    graph.replay(stream, 1);
                    call.checkStatus();
                }
                stream.device().run(() -> graph.launch(stream));
                report(outcome.with(DrillOutcome.OUTCOME, DrillOutcome.KILLING_ITSELF)
                        .with(DrillOutcome.IN_FLIGHT, !stream.idle()));
                DrillProcess.killSelf();
            }
            for (int i = 0; i < MAX_REPLAYS; i++) {
                long start = System.nanoTime();
                try {
                    graph.replay(stream, 1);
                    call.checkStatus();
                } catch (PeerTimeoutException e) {
                    out.println("drill kill: " + e.getMessage());
                    report(outcome.with(DrillOutcome.OUTCOME, e.getClass().getSimpleName())
                            .with(DrillOutcome.SOURCE, e.sourceRank()).with(DrillOutcome.ELAPSED_MS, millisSince(start)));
                    return;
                }
            }
            report(outcome.with(DrillOutcome.OUTCOME, DrillOutcome.COMPLETED));
        }
    }

    /**
     * The victim's graph has one launch fewer; the others time out naming it and mark their workspaces poisoned.
     * Then, before the reset: the next check refused on every rank, the victim's too, naming the poisoned ranks; one
     * more replay on each rank that timed out (the status word stays set: it fails without waiting); then the
     * collective reset and a whole replay on every rank, checked against the CPU engine.
     */
    private void skip(DrillOutcome outcome, CudaRankEngine engine, KernelCall call, GroupInputs g, TensorView o,
                      TensorView expected, int rank) {
        CudaStream stream = call.stream();
        try (CudaGraph graph = graph(call, rank == victim ? GRAPH_LAUNCHES - 1 : GRAPH_LAUNCHES)) {
            long start = System.nanoTime();
            boolean timedOut = false;
            try {
                graph.replay(stream, 1);
                call.checkStatus();
                outcome.with(DrillOutcome.OUTCOME, DrillOutcome.COMPLETED);
            } catch (PeerTimeoutException e) {
                timedOut = true;
                outcome.with(DrillOutcome.OUTCOME, e.getClass().getSimpleName())
                        .with(DrillOutcome.SOURCE, e.sourceRank()).with(DrillOutcome.ELAPSED_MS, millisSince(start));
                out.println("drill skip: " + e.getMessage());
                outcome.with(DrillOutcome.POISONED, engine.poisoned());
            }
            // the next check, on every rank (it is collective): refused everywhere, naming the poisoned ranks
            boolean refused;
            try {
                engine.prepare(g.partialO().get(rank), g.partialLse().get(rank), o, rank, g.partialO().size(),
                        LseMode.BASE2).close();
                refused = false;
            } catch (GroupCheck.MismatchException poisoned) {
                refused = poisoned.getMessage().contains("poisoned");
                out.println("drill skip: " + poisoned.getMessage());
            }
            outcome.with(DrillOutcome.REFUSED, refused);
            if (timedOut) {
                long again = System.nanoTime();
                String againOutcome = DrillOutcome.COMPLETED;
                try {
                    graph.replay(stream, 1);
                    call.checkStatus();
                } catch (PeerTimeoutException stays) {
                    againOutcome = stays.getClass().getSimpleName();
                }
                outcome.with(DrillOutcome.AGAIN, againOutcome).with(DrillOutcome.AGAIN_MS, millisSince(again));
            }
        }
        engine.reset();
        try (CudaGraph whole = graph(call, GRAPH_LAUNCHES)) {
            whole.replay(stream, 1);
            call.checkStatus();
            call.readOutputs();
            outcome.with(DrillOutcome.RECOVERED, sameBits(o, expected) && engine.epoch() == GRAPH_LAUNCHES);
        }
        report(outcome);
    }

    /** Replays a graph a few times, checking the outputs after each; stops at the first named exception. */
    private void starve(DrillOutcome outcome, KernelCall call, List<TensorView> outs, List<TensorView> expected,
                        boolean starved) {
        if (starved) {
            outcome.with(DrillOutcome.ACTIVE_THREADS, activeThreads);
        }
        CudaStream stream = call.stream();
        long slowest = 0;
        boolean matched = true;
        try (CudaGraph graph = graph(call, STARVE_LAUNCHES)) {
            for (int i = 0; i < STARVE_REPLAYS; i++) {
                long start = System.nanoTime();
                try {
                    graph.replay(stream, 1);
                    call.checkStatus();
                } catch (PeerTimeoutException | PeerFailedException e) {
                    out.println("drill starve: " + e.getMessage());
                    outcome.with(DrillOutcome.OUTCOME, e.getClass().getSimpleName()).with(DrillOutcome.ELAPSED_MS,
                            millisSince(start));
                    if (e instanceof PeerTimeoutException t) {
                        outcome.with(DrillOutcome.SOURCE, t.sourceRank());
                    }
                    report(outcome);
                    return;
                }
                slowest = Math.max(slowest, millisSince(start));
                call.readOutputs();
                for (int r = 0; r < outs.size(); r++) {
                    matched &= sameBits(outs.get(r), expected.get(r));
                }
            }
        }
        report(outcome.with(DrillOutcome.OUTCOME, DrillOutcome.COMPLETED).with(DrillOutcome.ELAPSED_MS, slowest)
                .with(DrillOutcome.MATCHED, matched));
    }

    /** Every rank in one launch of this process, the whole process starved. */
    private void loopbackStarve() {
        int cp = LOOPBACK_RANKS;
        WorkspaceSpec ws = specOf(STARVE_BATCH, cp);
        try (Arena arena = Arena.ofShared();
             CudaGroup engine = CudaGroup.open(0, ws, timeout);
             CudaStream stream = new CudaStream(engine.gpus().getFirst())) {
            GroupInputs g = inputs(arena, STARVE_BATCH, cp);
            List<TensorView> expected = expected(g, ws);
            List<TensorView> outs = g.partialO().stream().map(p -> output(arena, p)).toList();
            try (KernelCall call = engine.prepare(g.partialO(), g.partialLse(), outs, LseMode.BASE2, stream)) {
                starve(DrillOutcome.of(kind.name(), DrillOutcome.LOOPBACK_RANK)
                        .with(DrillOutcome.BLOCKS_PER_RANK, call.blocksPerRank()), call, outs, expected, true);
            }
        }
    }

    private static boolean sameBits(TensorView actual, TensorView expected) {
        for (long i = 0; i < actual.numel(); i++) {
            if (actual.loadBits(i) != expected.loadBits(i)) {
                return false;
            }
        }
        return true;
    }
}
