package io.github.dcp4j.cli;

import io.github.dcp4j.bench.CaseMatrix;
import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.cuda.CudaGraph;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.engine.cpu.CpuEngine;
import io.github.dcp4j.engine.cuda.CudaLoopbackEngine;
import io.github.dcp4j.engine.cuda.CudaRankEngine;
import io.github.dcp4j.engine.cuda.KernelCall;
import io.github.dcp4j.engine.cuda.RankSetup;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.peer.IpcWorkspaces;
import io.github.dcp4j.reference.ConformanceCases.GroupInputs;
import io.github.dcp4j.reference.RandomInputs;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.function.IntConsumer;

@Command(name = "soak", mixinStandardHelpOptions = true,
        description = {
            "Runs the op many times at the layer shape (16 heads per rank, head_dim 512, bf16, strided input) across"
                + " the 32-bit call counter's wrap (forced so that it comes halfway, at a call whose output is"
                + " checked) and checks the device status word after every " + SoakCommand.GRAPH_CALLS + " calls,"
                + " the outputs of the last call on each distinct input in those " + SoakCommand.GRAPH_CALLS
                + " against the CPU engine, bit for bit, and at the end that every rank's counter advanced by exactly"
                + " the calls made.",
            "Without a group in the environment: loopback, all --cp ranks in one launch on GPU 0. As one rank of a"
                + " group (`dcp4j launch --nproc N -- soak`, or torchrun): CUDA IPC, cp = the group's size.",
            "The calls are " + SoakCommand.INPUTS + " calls on different inputs, captured " + SoakCommand.GRAPH_CALLS
                + " launches to a CUDA graph and replayed. Progress goes to stderr; exit code 0 when every check"
                + " passed."})
final class SoakCommand implements Callable<Integer> {
    /** Distinct calls (inputs) a graph cycles through, so that a call that read another's lines would show. */
    static final int INPUTS = 10;
    /** Launches in one graph, and the calls between two checks. */
    static final int GRAPH_CALLS = 1000;
    /** At most this many calls, so that the 32-bit counter wraps once, halfway. */
    static final long MAX_CALLS = 1L << 31;
    /** The inputs' seed: every rank of a group generates the whole group's inputs from it, alike. */
    static final long SEED = 2027;

    @Option(names = "--calls", defaultValue = "1000000",
            description = "Calls in all, a multiple of " + GRAPH_CALLS + " up to 2^31, default ${DEFAULT-VALUE}.")
    long calls;

    @Option(names = "--batch", defaultValue = "1", description = "Tokens per call, 1..64, default ${DEFAULT-VALUE}.")
    int batch;

    @Option(names = "--cp", defaultValue = "8", paramLabel = "CP",
            description = "Ranks in loopback, 2..8, default ${DEFAULT-VALUE} (a group's size otherwise).")
    int cpOption;

    @Option(names = "--timeout", defaultValue = "10s", converter = DurationConverter.class,
            description = "How long a rank waits for a peer (kernel and rendezvous), default ${DEFAULT-VALUE}.")
    Duration timeout;

    @Spec
    CommandSpec spec;

    private PrintWriter report;
    private PrintWriter progress;

    @Override
    public Integer call() {
        report = spec.commandLine().getOut();
        progress = spec.commandLine().getErr();
        if (calls < GRAPH_CALLS || calls % GRAPH_CALLS != 0 || calls > MAX_CALLS) {
            throw new ParameterException(spec.commandLine(), "--calls must be a positive multiple of " + GRAPH_CALLS
                    + " up to " + MAX_CALLS + " (the counter wraps once); got " + calls);
        }
        if (batch < 1 || batch > 64) {
            throw new ParameterException(spec.commandLine(), "--batch must be in [1, 64]; got " + batch);
        }
        if (cpOption < 2 || cpOption > 8) {
            throw new ParameterException(spec.commandLine(), "--cp must be in [2, 8]; got " + cpOption);
        }
        Cuda.Availability gpu = Cuda.availability();
        if (!gpu.available()) {
            throw new IllegalStateException("soak needs a GPU: " + gpu.reason());
        }
        return RankSetup.inEnvironment() ? asRank() : loopback();
    }

    private WorkspaceSpec specOf(int cp) {
        return new WorkspaceSpec(batch, CaseMatrix.LAYER_HEADS, cp, CaseMatrix.LAYER_HEAD_DIM, DType.BF16);
    }

    /** The whole group's inputs of distinct call {@code i}, the same on every rank (same seed). */
    private Inputs inputs(Arena arena, int cp, int i) {
        GroupInputs g = RandomInputs.group(arena, new SplittableRandom(SEED * 1_000_003L + i), batch,
                CaseMatrix.LAYER_HEADS, cp, CaseMatrix.LAYER_HEAD_DIM, DType.BF16, 3.0);
        try (CpuEngine cpu = CpuEngine.open(specOf(cp))) {
            return new Inputs(g.partialO(), g.partialLse(), cpu.reduceAll(g.partialO(), g.partialLse(), LseMode.BASE2));
        }
    }

    private record Inputs(List<TensorView> partialO, List<TensorView> partialLse, List<TensorView> expected) {
    }

    private static TensorView output(Arena arena, TensorView partialO) {
        return TensorView.allocate(arena, partialO.dtype(), ReduceCall.outputShape(partialO));
    }

    /** Ranks in one launch: every rank's outputs are checked. */
    private int loopback() {
        int cp = cpOption;
        try (Arena arena = Arena.ofShared();
             CudaLoopbackEngine engine = CudaLoopbackEngine.open(0, specOf(cp), timeout);
             CudaStream stream = new CudaStream(engine.device())) {
            String where = "loopback, " + cp + " ranks in one launch on " + engine.device();
            List<Integer> ranks = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                ranks.add(r);
            }
            long mismatches = soak(where, arena, cp, ranks,
                    (in, out) -> engine.prepare(in.partialO(), in.partialLse(), out, LseMode.BASE2, stream),
                    engine::forceEpoch);
            int[] counters = new int[cp];
            for (int r = 0; r < cp; r++) {
                counters[r] = engine.epoch(r);
            }
            return finish(where, mismatches, counters);
        }
    }

    /** One rank of a group: this rank's outputs are checked. */
    private int asRank() {
        try (RankSetup setup = RankSetup.fromEnvironment(timeout, Log.to(progress))) {
            int rank = setup.rank();
            int cp = setup.worldSize();
            try (Arena arena = Arena.ofShared(); IpcWorkspaces ws = setup.openWorkspaces(specOf(cp).bytes());
                 CudaRankEngine engine = setup.openEngine(ws, timeout)) {
                String where = "rank " + rank + " of " + cp + " (CUDA IPC) on " + setup.device();
                long mismatches = soak(where, arena, cp, List.of(rank),
                        (in, out) -> engine.prepare(in.partialO().get(rank), in.partialLse().get(rank), out.getFirst(),
                                rank, cp, LseMode.BASE2),
                        engine::forceEpoch);
                return finish(where, mismatches, new int[] {engine.epoch()});
            }
        }
    }

    /** Prepares one distinct call on its inputs, writing the outputs of the checked ranks, in their order. */
    @FunctionalInterface
    private interface Preparer {
        KernelCall prepare(Inputs in, List<TensorView> outputs);
    }

    /**
     * Prepares the {@link #INPUTS} distinct calls, forces the counter to {@link #startEpoch()} and runs the soak,
     * checking the outputs of {@code ranks}. Returns the number of outputs found different from the CPU engine's.
     */
    private long soak(String where, Arena arena, int cp, List<Integer> ranks, Preparer preparer,
                      IntConsumer forceEpoch) {
        List<KernelCall> prepared = new ArrayList<>();
        List<List<TensorView>> outs = new ArrayList<>();
        List<List<TensorView>> expected = new ArrayList<>();
        try {
            for (int i = 0; i < INPUTS; i++) {
                Inputs in = inputs(arena, cp, i);
                List<TensorView> out = new ArrayList<>();
                List<TensorView> exact = new ArrayList<>();
                for (int r : ranks) {
                    out.add(output(arena, in.partialO().get(r)));
                    exact.add(in.expected().get(r));
                }
                outs.add(out);
                expected.add(exact);
                prepared.add(preparer.prepare(in, out));
            }
            forceEpoch.accept(startEpoch());
            return run(where, prepared.getFirst().stream(), prepared, outs, expected);
        } finally {
            prepared.forEach(KernelCall::close);
        }
    }

    /**
     * The counter value to start from. The call with counter 0 (the wrap) is a launch of the middle replay among its
     * last {@link #INPUTS}, the last on their inputs in that replay, whose outputs the check after it reads.
     */
    int startEpoch() {
        long wrapCall = (calls / GRAPH_CALLS / 2) * GRAPH_CALLS + GRAPH_CALLS - INPUTS / 2;
        return (int) -wrapCall;
    }

    /**
     * Replays a graph of {@link #GRAPH_CALLS} launches that cycles through {@code prepared}, checking the status
     * word after each replay and the outputs its last launch on each input left. Returns the number of outputs found
     * different from the CPU engine's.
     */
    private long run(String where, CudaStream stream, List<KernelCall> prepared, List<List<TensorView>> outs,
                     List<List<TensorView>> expected) {
        progress.printf("soak: %s, batch %d, %d calls, checked every %d%n", where, batch, calls, GRAPH_CALLS);
        long mismatches = 0;
        long replays = calls / GRAPH_CALLS;
        long report = Math.max(1, replays / 10);
        long started = System.nanoTime();
        try (CudaGraph graph = CudaGraph.capture(stream, () -> {
            for (int k = 0; k < GRAPH_CALLS; k++) {
                prepared.get(k % prepared.size()).launch();
            }
        })) {
            for (long replay = 1; replay <= replays; replay++) {
                graph.replay(stream, 1);
                stream.synchronize();
                prepared.getFirst().checkStatus();
                for (int i = 0; i < prepared.size(); i++) {
                    prepared.get(i).readOutputs();
                    for (int r = 0; r < outs.get(i).size(); r++) {
                        if (!sameBits(outs.get(i).get(r), expected.get(i).get(r))) {
                            mismatches++;
                            progress.printf("soak: after %d calls, distinct call %d, output %d differs from the CPU"
                                    + " engine%n", replay * GRAPH_CALLS, i, r);
                        }
                    }
                }
                if (replay % report == 0 || replay == replays) {
                    double seconds = (System.nanoTime() - started) / 1e9;
                    progress.printf("soak: %d of %d calls, %d outputs differ, %.1f s%n", replay * GRAPH_CALLS, calls,
                            mismatches, seconds);
                    progress.flush();
                }
            }
        }
        return mismatches;
    }

    private static boolean sameBits(TensorView actual, TensorView expected) {
        MemorySegment a = actual.memory().asSlice(actual.offset() * actual.dtype().bytes(),
                actual.numel() * actual.dtype().bytes());
        MemorySegment e = expected.memory().asSlice(expected.offset() * expected.dtype().bytes(),
                expected.numel() * expected.dtype().bytes());
        return a.mismatch(e) == -1;
    }

    /** Reports the soak; {@code counters}: the checked ranks' counters at the end. */
    private int finish(String where, long mismatches, int[] counters) {
        int start = startEpoch();
        int expectedEnd = (int) (start + calls);
        boolean counted = Arrays.stream(counters).allMatch(c -> c == expectedEnd);
        boolean ok = mismatches == 0 && counted;
        report.printf("soak %s: %s: %d calls, every counter from %d to %d%s, %d outputs differ from the CPU engine%n",
                ok ? "passed" : "FAILED", where, calls, Integer.toUnsignedLong(start),
                Integer.toUnsignedLong(expectedEnd), counted ? "" : " (FAILED: ended at "
                        + Arrays.toString(Arrays.stream(counters).mapToLong(Integer::toUnsignedLong).toArray()) + ")",
                mismatches);
        report.flush();
        return ok ? 0 : 1;
    }
}
