package io.github.dcp4j.cli;

import io.github.dcp4j.cuda.CudaGraph;
import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.engine.cpu.CpuEngine;
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
import io.github.dcp4j.reference.ConformanceCases;
import io.github.dcp4j.reference.ConformanceCases.GroupInputs;
import io.github.dcp4j.reference.Fp64Oracle;
import io.github.dcp4j.reference.RandomInputs;
import io.github.dcp4j.rendezvous.LauncherEnvironment;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;

@Command(name = "check", mixinStandardHelpOptions = true,
        description = {
            "Runs the conformance cases as one rank of a multi-process group (start it with `dcp4j launch --nproc N"
                + " -- check`, or under torchrun / a scheduler with RANK, WORLD_SIZE, DCP4J_JOB_SECRET and a"
                + " rendezvous set): CUDA IPC"
                + " workspaces, cp = the group's size, and this rank's output of every call checked against the CPU"
                + " engine and the fp64 oracle on the same inputs (every rank generates the whole group's inputs from"
                + " the seed).",
            "Cases: the conformance cases the engine tests run too (NaN and +-inf LSE rows, strided views, row-count"
                + " sequences on one workspace, bf16 and fp16, base 2 and base e), then the call counter's wrap at 2^32"
                + " and CUDA-graph replays.",
            "--inject runs a fault drill instead: wrong-cp-rank:R (rank R passes a wrong cp_rank: every rank must"
                + " refuse the call before launching), skip-call:R (rank R skips one call: the others must time out"
                + " naming it, then a collective reset must make the group usable again)."})
final class CheckCommand implements Callable<Integer> {
    @Option(names = "--timeout", defaultValue = "10s", converter = DurationConverter.class,
            description = "How long a rank waits for a peer (kernel and rendezvous), default ${DEFAULT-VALUE}.")
    Duration timeout;

    @Option(names = "--repeat", defaultValue = "1",
            description = "Runs the first case's first call this many times, printing each call (for fault drills),"
                    + " default ${DEFAULT-VALUE}.")
    int repeat;

    @Option(names = "--inject", paramLabel = "FAULT:RANK",
            description = "A fault drill: wrong-cp-rank:R or skip-call:R.")
    String inject;

    @Option(names = "--seed", defaultValue = "" + ConformanceCases.SEED,
            description = "Seed of every case's inputs, default ${DEFAULT-VALUE}.")
    long seed;

    @Option(names = "--csv", paramLabel = "FILE", description = "Also write this rank's checks as CSV to FILE; in a"
            + " group of several ranks FILE must hold " + RANK_PLACEHOLDER + ", which becomes the rank.")
    String csv;

    @Option(names = "--json", paramLabel = "FILE", description = "Also write this rank's checks as JSON to FILE (" +
            RANK_PLACEHOLDER + " as for --csv).")
    String json;

    /** In --csv / --json, replaced by the rank, so that the ranks of a group write one file each. */
    static final String RANK_PLACEHOLDER = "{rank}";

    @Spec
    CommandSpec spec;

    private PrintWriter report;
    private int rank;
    private int cp;
    private final List<Check> checks = new ArrayList<>();

    /**
     * One check of this rank (public accessors: it is also the JSON's shape). Output checks give the relative error
     * against fp64 and the elements that differ from the CPU engine; the others (counters, refusals) NaN and 0.
     */
    record Check(int rank, String check, boolean passed, double relativeError, long elementsDiffering,
                 long elements) {
        static final String CSV_HEADER = "rank,check,passed,rel_err,elements_differing,elements";

        String csvLine() {
            return String.format(Locale.ROOT, "%d,\"%s\",%b,%.6e,%d,%d", rank, check.replace("\"", "\"\""), passed,
                    relativeError, elementsDiffering, elements);
        }
    }

    @Override
    public Integer call() {
        report = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        CommandLine cli = spec.commandLine();
        if (repeat < 1) {
            throw new ParameterException(cli, "--repeat must be >= 1; got " + repeat);
        }
        String[] fault = parseInject();
        if (!RankSetup.inEnvironment()) {
            throw new IllegalArgumentException("check runs as one rank of a group: start it with `dcp4j launch --nproc"
                    + " N -- check`, or set RANK, WORLD_SIZE, DCP4J_JOB_SECRET and a rendezvous (docs/DEPLOYMENT.md)");
        }
        // the options that depend on the group are checked against the launcher's numbers, before any rank joins
        LauncherEnvironment launch = LauncherEnvironment.of(System.getenv());
        if (fault != null && Integer.parseInt(fault[1]) >= launch.worldSize()) {
            throw new ParameterException(cli, "--inject must name a rank in [0, " + (launch.worldSize() - 1)
                    + "] of this group of " + launch.worldSize() + "; got '" + inject + "'");
        }
        Path csvFile;
        Path jsonFile;
        try {
            csvFile = tableFile("--csv", csv, launch.rank(), launch.worldSize());
            jsonFile = tableFile("--json", json, launch.rank(), launch.worldSize());
        } catch (IllegalArgumentException e) {
            throw new ParameterException(cli, e.getMessage(), e);  // it names the option and the value
        }
        try (RankSetup setup = RankSetup.fromEnvironment(timeout, Log.to(err))) {
            rank = setup.rank();
            cp = setup.worldSize();
            try {
                if (fault != null) {
                    return drill(setup, fault[0], Integer.parseInt(fault[1]));
                }
                int failures = 0;
                failures += conformance(setup);
                failures += counterWrap(setup);
                failures += graphReplays(setup);
                report.printf("rank %d: %s%n", rank, failures == 0 ? "all cases passed"
                        : failures + " check(s) FAILED");
                report.flush();
                return failures == 0 ? 0 : 1;
            } finally {
                TableFiles.write(csvFile, jsonFile, Check.CSV_HEADER, Check::csvLine, checks);
            }
        }
    }

    /**
     * The file rank {@code rank} of a group of {@code ranks} writes for {@code option}: {@code file} with {@link
     * #RANK_PLACEHOLDER} replaced by the rank; null where the option is not given.
     *
     * @throws IllegalArgumentException for several ranks and a name without the placeholder (they would all write
     *                                  one file)
     */
    static Path tableFile(String option, String file, int rank, int ranks) {
        if (file == null) {
            return null;
        }
        if (ranks > 1 && !file.contains(RANK_PLACEHOLDER)) {
            throw new IllegalArgumentException(option + " in a group of " + ranks + " ranks must name a file with "
                    + RANK_PLACEHOLDER + " in it (each rank writes its own); got '" + file + "'");
        }
        return Path.of(file.replace(RANK_PLACEHOLDER, Integer.toString(rank)));
    }

    /** Records a check that compares no output (a counter, a refusal) and returns 0 where it passed, else 1. */
    private int record(String name, boolean passed) {
        checks.add(new Check(rank, name, passed, Double.NaN, 0, 0));
        return passed ? 0 : 1;
    }

    private String[] parseInject() {
        if (inject == null) {
            return null;
        }
        String[] parts = inject.split(":");
        if (parts.length != 2 || !(parts[0].equals("wrong-cp-rank") || parts[0].equals("skip-call"))
                || !parts[1].matches("[0-9]{1,9}")) {
            throw new ParameterException(spec.commandLine(), "--inject must be wrong-cp-rank:R or skip-call:R; got '"
                    + inject + "'");
        }
        return parts;
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
            boolean ok = err <= MainJob.TOLERANCE && differ == 0;
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

    /** The conformance cases ({@link ConformanceCases}), each on its own workspace; the first call --repeat times. */
    private int conformance(RankSetup setup) {
        int failures = 0;
        boolean first = true;
        for (ConformanceCases.Case c : ConformanceCases.all()) {
            try (Arena arena = Arena.ofShared(); IpcWorkspaces ws = setup.openWorkspaces(c.spec(cp).bytes());
                 CudaRankEngine engine = setup.openEngine(ws, timeout)) {
                int calls = c.tokens().size();
                for (int call = 0; call < calls; call++) {
                    GroupInputs g = c.inputs(arena, seed, cp, call);
                    TensorView out = output(arena, g);
                    int times = first ? repeat : 1;
                    first = false;
                    for (int k = 0; k < times; k++) {
                        engine.reduce(g.partialO().get(rank), g.partialLse().get(rank), out, rank, cp, c.mode());
                        if (times > 1) {
                            report.printf("rank %d (pid %d): call %d of %d done%n", rank,
                                    ProcessHandle.current().pid(), k + 1, times);
                            report.flush();
                        }
                    }
                    failures += verify(c.name() + ", call " + (call + 1) + " of " + calls, g, out, c.mode(),
                            c.callSpec(cp, call));
                }
            }
        }
        return failures;
    }

    /** Six calls across the call counter's wrap (2^32 - 3 ... 2): slots and flags stay right. */
    private int counterWrap(RankSetup setup) {
        WorkspaceSpec spec = specOf(2, 2, cp, 64, DType.BF16);
        int failures = 0;
        try (Arena arena = Arena.ofShared(); IpcWorkspaces ws = setup.openWorkspaces(spec.bytes());
             CudaRankEngine engine = setup.openEngine(ws, timeout)) {
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
        try (Arena arena = Arena.ofShared(); IpcWorkspaces ws = setup.openWorkspaces(spec.bytes());
             CudaRankEngine engine = setup.openEngine(ws, timeout)) {
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

    /** The fault drills: 0 when the group behaved as required. */
    private int drill(RankSetup setup, String fault, int target) {
        WorkspaceSpec spec = specOf(2, 2, cp, 128, DType.BF16);
        try (Arena arena = Arena.ofShared(); IpcWorkspaces ws = setup.openWorkspaces(spec.bytes());
             CudaRankEngine engine = setup.openEngine(ws, timeout)) {
            GroupInputs g = inputs(arena, 60, 2, 2, 128, DType.BF16, true);
            TensorView out = output(arena, g);
            TensorView o = g.partialO().get(rank);
            TensorView lse = g.partialLse().get(rank);
            if (fault.equals("wrong-cp-rank")) {
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
}
