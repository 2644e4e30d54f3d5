package io.github.dcp4j.check;

import io.github.dcp4j.cuda.CudaGraph;
import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.engine.RankWorkspace;
import io.github.dcp4j.engine.cpu.CpuEngine;
import io.github.dcp4j.engine.cuda.CudaRankEngine;
import io.github.dcp4j.engine.cuda.KernelCall;
import io.github.dcp4j.engine.cuda.RankSetup;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.Variant;
import io.github.dcp4j.op.VariantWorkspace;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.peer.GroupCheck;
import io.github.dcp4j.peer.IpcWorkspaces;
import io.github.dcp4j.reference.ConformanceCases;
import io.github.dcp4j.reference.ConformanceCases.GroupInputs;
import io.github.dcp4j.reference.Fp64Oracle;
import io.github.dcp4j.reference.RandomInputs;

import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.function.ToIntFunction;

/**
 * The {@code check} command as one rank of a group: the conformance cases ({@link ConformanceCases}), this rank's
 * output of every call checked against the CPU engine (bit for bit) and the fp64 oracle (within {@link
 * Fp64Oracle#TOLERANCE}) on the same inputs, which every rank generates for the whole group from the seed; on CUDA
 * IPC workspaces also the call counter's wrap, CUDA-graph replays and the fault drills. Every rank of the group makes
 * the same calls in the same order. Each check is printed to the report writer as it is made, and kept ({@link
 * #checks()}).
 */
public final class RankCheck {
    /** The fault drills of {@code check --inject}: what the target rank does wrong, and what the group must do. */
    public enum Fault {
        /** The target passes a wrong cp_rank: every rank must refuse the call before launching, naming it. */
        WRONG_CP_RANK("wrong-cp-rank"),
        /** The target skips one call: the others must time out naming it, then a collective reset must recover. */
        SKIP_CALL("skip-call");

        private final String spelling;

        Fault(String spelling) {
            this.spelling = spelling;
        }

        /** {@return the fault as {@code --inject} spells it} */
        public String spelling() {
            return spelling;
        }

        /**
         * The fault {@code spelling} names.
         *
         * @param spelling as {@code --inject} spells it
         * @return the fault, or empty where there is none of that name
         */
        public static Optional<Fault> of(String spelling) {
            return Arrays.stream(values()).filter(f -> f.spelling.equals(spelling)).findFirst();
        }
    }

    /**
     * Where the conformance cases run: this rank's engine on a fresh workspace for each case, opened in the same
     * order on every rank of the group (CUDA IPC under {@link #run}; ranks as threads of one CPU engine in tests).
     */
    @FunctionalInterface
    public interface Workspaces {
        /**
         * Opens this rank's engine on a fresh workspace for {@code spec}, runs {@code calls} on it and frees both.
         *
         * @param spec  the case's workspace
         * @param calls the case's calls on this rank's engine, returning their failed checks
         * @return what {@code calls} returned
         */
        int with(WorkspaceSpec spec, ToIntFunction<RankWorkspace> calls);
    }

    private final int rank;
    private final int cp;
    private final long seed;
    private final Duration timeout;
    private final PrintWriter report;
    private final Variant variant;
    private final List<Check> checks = new ArrayList<>();

    /**
     * A check of one rank.
     *
     * @param rank    this rank
     * @param cp      ranks in the group
     * @param seed    the seed of every case's inputs, the same on every rank
     * @param timeout how long a rank waits for a peer (kernel)
     * @param report  where each check is printed as it is made (flushed after each)
     */
    public RankCheck(int rank, int cp, long seed, Duration timeout, PrintWriter report) {
        this(rank, cp, seed, timeout, report, Variant.LL128);
    }

    /**
     * A check of one rank whose CUDA IPC cases run {@code variant}'s protocol (op.Variant).
     *
     * @param rank    this rank
     * @param cp      ranks in the group
     * @param seed    the seed of every case's inputs, the same on every rank
     * @param timeout how long a rank waits for a peer (kernel)
     * @param report  where each check is printed as it is made (flushed after each)
     * @param variant the protocol variant of the CUDA IPC cases, the same on every rank
     */
    public RankCheck(int rank, int cp, long seed, Duration timeout, PrintWriter report, Variant variant) {
        this.variant = variant;
        this.rank = rank;
        this.cp = cp;
        this.seed = seed;
        this.timeout = timeout;
        this.report = report;
    }

    /** {@return the checks made so far, in order} */
    public List<Check> checks() {
        return List.copyOf(checks);
    }

    /**
     * Every case on CUDA IPC workspaces of {@code setup}'s group: the conformance cases, the call counter's wrap and
     * CUDA-graph replays.
     *
     * @param setup  this rank's bootstrap (collective: every rank runs the same)
     * @param repeat how many times the first case's first call runs, each printed (for fault drills)
     * @return the number of failed checks
     */
    public int run(RankSetup setup, int repeat) {
        int failures = 0;
        failures += conformance(ipc(setup), repeat);
        failures += counterWrap(setup);
        failures += graphReplays(setup);
        return failures;
    }

    /**
     * The conformance cases ({@link ConformanceCases}), each on its own workspace from {@code workspaces}, each call's
     * output checked.
     *
     * @param workspaces this rank's engine for each case
     * @param repeat     how many times the first case's first call runs, each printed (for fault drills)
     * @return the number of failed checks
     */
    public int conformance(Workspaces workspaces, int repeat) {
        if (repeat < 1) {
            throw new IllegalArgumentException("repeat must be >= 1; got " + repeat);
        }
        int failures = 0;
        List<ConformanceCases.Case> cases = ConformanceCases.all();
        for (int k = 0; k < cases.size(); k++) {
            ConformanceCases.Case c = cases.get(k);
            boolean firstCase = k == 0;
            try (Arena arena = Arena.ofShared()) {
                failures += workspaces.with(c.spec(cp), engine -> {
                    int caseFailures = 0;
                    int calls = c.tokens().size();
                    for (int call = 0; call < calls; call++) {
                        GroupInputs g = c.inputs(arena, seed, cp, call);
                        TensorView out = output(arena, g);
                        int times = firstCase && call == 0 ? repeat : 1;
                        for (int i = 0; i < times; i++) {
                            engine.reduce(g.partialO().get(rank), g.partialLse().get(rank), out, rank, cp, c.mode());
                            if (times > 1) {
                                report.printf("rank %d (pid %d): call %d of %d done%n", rank,
                                        ProcessHandle.current().pid(), i + 1, times);
                                report.flush();
                            }
                        }
                        caseFailures += verify(c.name() + ", call " + (call + 1) + " of " + calls, g, out, c.mode(),
                                c.callSpec(cp, call));
                    }
                    return caseFailures;
                });
            }
        }
        return failures;
    }

    /** Each case's workspaces over CUDA IPC, and this rank's engine on them. */
    private Workspaces ipc(RankSetup setup) {
        return (spec, calls) -> {
            VariantWorkspace vw = setup.variantWorkspace(variant, spec);
            try (IpcWorkspaces ws = setup.openWorkspaces(vw.bytes());
                 CudaRankEngine engine = setup.openEngine(ws, timeout, vw, spec)) {
                return calls.applyAsInt(engine);
            }
        };
    }

    /**
     * A fault drill on CUDA IPC workspaces of {@code setup}'s group, then one normal call, checked.
     *
     * @param setup  this rank's bootstrap (collective: every rank runs the same drill)
     * @param fault  what {@code target} does wrong
     * @param target the rank that does it
     * @return 0 when the group behaved as required, else 1
     */
    public int drill(RankSetup setup, Fault fault, int target) {
        WorkspaceSpec spec = specOf(2, 2, cp, 128, DType.BF16);
        VariantWorkspace vw = setup.variantWorkspace(variant, spec);
        try (Arena arena = Arena.ofShared(); IpcWorkspaces ws = setup.openWorkspaces(vw.bytes());
             CudaRankEngine engine = setup.openEngine(ws, timeout, vw, spec)) {
            GroupInputs g = inputs(arena, 60, 2, 2, 128, DType.BF16, true);
            TensorView out = output(arena, g);
            TensorView o = g.partialO().get(rank);
            TensorView lse = g.partialLse().get(rank);
            if (fault == Fault.WRONG_CP_RANK) {
                int cpRank = rank == target ? (rank + 1) % cp : rank;
                try {
                    engine.reduce(o, lse, out, cpRank, cp, LseMode.BASE2);
                    report.printf("rank %d: drill FAILED: the call with rank %d's wrong cp_rank was launched%n",
                            rank, target);
                    return record("wrong cp_rank refused before launch", false);
                } catch (GroupCheck.MismatchException e) {
                    boolean named = e.getMessage().contains("rank " + target + ":");
                    report.printf("rank %d: refused before launch%s: %s%n", rank, named ? "" : " (FAILED: rank "
                            + target + " not named)", e.getMessage());
                    if (record("wrong cp_rank refused before launch, naming rank " + target, named) != 0) {
                        return 1;
                    }
                }
            } else {
                if (rank != target) {
                    long start = System.nanoTime();
                    try {
                        engine.reduce(o, lse, out, rank, cp, LseMode.BASE2);
                        report.printf("rank %d: drill FAILED: the call completed without rank %d%n", rank, target);
                        return record("skipped call times out", false);
                    } catch (PeerTimeoutException e) {
                        double s = (System.nanoTime() - start) / 1e9;
                        boolean named = e.sourceRank() == target;
                        report.printf("rank %d: timed out after %.1f s%s: %s%n", rank, s, named ? ""
                                : " (FAILED: rank " + target + " not named)", e.getMessage());
                        if (record("skipped call times out, naming rank " + target, named) != 0) {
                            return 1;
                        }
                    }
                } else {
                    // the skipped call: rank target still takes part in the call check, then never launches
                    report.printf("rank %d: skipping one call%n", rank);
                    engine.prepare(o, lse, out, rank, cp, LseMode.BASE2).close();
                }
                engine.reset();
                report.printf("rank %d: collective reset done%n", rank);
            }
            report.flush();
            engine.reduce(o, lse, out, rank, cp, LseMode.BASE2);
            return verify("after the drill, a normal call", g, out, LseMode.BASE2, spec);
        }
    }

    /** Records a check that compares no output (a counter, a refusal) and returns 0 where it passed, else 1. */
    private int record(String name, boolean passed) {
        checks.add(new Check(rank, name, passed, Double.NaN, 0, 0));
        return passed ? 0 : 1;
    }

    /** An output buffer for this rank's call on {@code g} (its shape and dtype). */
    private TensorView output(Arena arena, GroupInputs g) {
        TensorView o = g.partialO().get(rank);
        return TensorView.allocate(arena, o.dtype(), ReduceCall.outputShape(o));
    }

    /** The whole group's inputs for one call of the lifecycle cases, identical on every rank (same seed). */
    private GroupInputs inputs(Arena arena, long caseSeed, int tokens, int heads, int headDim, DType dtype,
                               boolean strided) {
        GroupInputs g = RandomInputs.group(arena, new SplittableRandom(seed * 1_000_003L + caseSeed), tokens, heads,
                cp, headDim, dtype, 3.0);
        if (strided) {
            return g;
        }
        return new GroupInputs(g.partialO().stream().map(t -> t.contiguousCopy(arena)).toList(),
                g.partialLse().stream().map(t -> t.contiguousCopy(arena)).toList());
    }

    /** Number of failed checks of this rank's output against the CPU engine and the fp64 oracle (0 or 1). */
    private int verify(String name, GroupInputs g, TensorView mine, LseMode mode, WorkspaceSpec spec) {
        try (CpuEngine cpu = CpuEngine.open(spec)) {
            TensorView expected = cpu.reduceAll(g.partialO(), g.partialLse(), mode).get(rank);
            int differ = 0;
            for (long i = 0; i < mine.numel(); i++) {
                differ += mine.loadBits(i) != expected.loadBits(i) ? 1 : 0;
            }
            double err = Fp64Oracle.relativeError(mine, Fp64Oracle.reduce(g.partialO(), g.partialLse(), rank, mode));
            boolean ok = err <= Fp64Oracle.TOLERANCE && differ == 0;
            checks.add(new Check(rank, name, ok, err, differ, mine.numel()));
            report.printf("rank %d: %-44s %s (rel err %.1e vs fp64, %d of %d elements differ from the CPU engine)%n",
                    rank, name, ok ? "ok" : "FAILED", err, differ, mine.numel());
            report.flush();
            return ok ? 0 : 1;
        }
    }

    private static WorkspaceSpec specOf(int tokens, int heads, int cp, int headDim, DType dtype) {
        return new WorkspaceSpec(tokens, heads, cp, headDim, dtype);
    }

    /** Six calls across the call counter's wrap (2^32 - 3 ... 2): slots and flags stay right. */
    private int counterWrap(RankSetup setup) {
        WorkspaceSpec spec = specOf(2, 2, cp, 64, DType.BF16);
        int failures = 0;
        VariantWorkspace vw = setup.variantWorkspace(variant, spec);
        try (Arena arena = Arena.ofShared(); IpcWorkspaces ws = setup.openWorkspaces(vw.bytes());
             CudaRankEngine engine = setup.openEngine(ws, timeout, vw, spec)) {
            engine.forceEpoch((int) ((1L << 32) - 3));
            for (int i = 0; i < 6; i++) {
                GroupInputs g = inputs(arena, 40 + i, 2, 2, 64, DType.BF16, true);
                TensorView out = output(arena, g);
                engine.reduce(g.partialO().get(rank), g.partialLse().get(rank), out, rank, cp, LseMode.BASE2);
                failures += verify("counter wrap, call " + (i + 1) + " of 6", g, out, LseMode.BASE2, spec);
            }
            if (record("counter wrap, the counter after the calls", engine.epoch() == 3) != 0) {
                report.printf("rank %d: counter wrap FAILED: epoch %d after 2^32 - 3 + 6 calls, expected 3%n", rank,
                        engine.epoch());
                failures++;
            }
        }
        return failures;
    }

    /** One prepared call, 20 launches captured in a CUDA graph, replayed 3 times; the counter advances by 60. */
    private int graphReplays(RankSetup setup) {
        WorkspaceSpec spec = specOf(4, 4, cp, 256, DType.BF16);
        VariantWorkspace vw = setup.variantWorkspace(variant, spec);
        try (Arena arena = Arena.ofShared(); IpcWorkspaces ws = setup.openWorkspaces(vw.bytes());
             CudaRankEngine engine = setup.openEngine(ws, timeout, vw, spec)) {
            GroupInputs g = inputs(arena, 50, 4, 4, 256, DType.BF16, true);
            TensorView out = output(arena, g);
            int before = engine.epoch();
            try (KernelCall call = engine.prepare(g.partialO().get(rank), g.partialLse().get(rank), out, rank, cp,
                    LseMode.BASE2);
                 CudaGraph graph = CudaGraph.capture(call.stream(), () -> {
                     for (int i = 0; i < 20; i++) {
                         call.launch();
                     }
                 })) {
                graph.replay(call.stream(), 3);
                call.stream().synchronize();
                call.checkStatus();
                call.readOutputs();
            }
            int failures = verify("CUDA graph, 3 replays of 20 calls", g, out, LseMode.BASE2, spec);
            if (record("CUDA graph, the counter after the replays", engine.epoch() == before + 60) != 0) {
                report.printf("rank %d: graph replays FAILED: the counter went from %d to %d, expected +60%n", rank,
                        before, engine.epoch());
                failures++;
            }
            return failures;
        }
    }
}
