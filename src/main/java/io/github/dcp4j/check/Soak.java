package io.github.dcp4j.check;

import io.github.dcp4j.bench.CaseMatrix;
import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.cuda.CudaGraph;
import io.github.dcp4j.cuda.CudaStream;
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
import io.github.dcp4j.peer.IpcWorkspaces;
import io.github.dcp4j.reference.ConformanceCases.GroupInputs;
import io.github.dcp4j.reference.RandomInputs;

import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.function.Consumer;
import java.util.function.IntConsumer;

/**
 * The {@code soak} command's run: the op many times at the layer shape (bf16, strided input) in CUDA graphs of
 * {@link #GRAPH_CALLS} launches cycling through {@link #INPUTS} distinct calls, across the 32-bit call counter's wrap
 * (forced so that it comes halfway, at a call whose output is checked). After every replay it checks the device
 * status word and the outputs of the last launch on each input against the CPU engine, bit for bit; at the end, that
 * every checked rank's counter advanced by exactly the calls made. Needs a GPU: loopback (every rank in one launch)
 * or, as one rank of a group in the environment, CUDA IPC.
 */
public final class Soak {
    /** Distinct calls (inputs) a graph cycles through, so that a call that read another's lines would show. */
    public static final int INPUTS = 10;
    /** Launches in one graph, and the calls between two checks. */
    public static final int GRAPH_CALLS = 1000;
    /** At most this many calls, so that the 32-bit counter wraps once, halfway. */
    public static final long MAX_CALLS = 1L << 31;
    /** The inputs' seed: every rank of a group generates the whole group's inputs from it, alike. */
    public static final long SEED = 2027;

    private final long calls;
    private final int batch;
    private final Duration timeout;
    private final PrintWriter progress;

    /**
     * A soak of {@code calls} calls.
     *
     * @param calls    calls in all: a positive multiple of {@link #GRAPH_CALLS} up to {@link #MAX_CALLS}
     * @param batch    tokens per call
     * @param timeout  how long a rank waits for a peer (kernel and rendezvous)
     * @param progress where the progress lines go (flushed after each)
     * @throws IllegalArgumentException for a number of calls that is not whole graphs or would wrap the counter twice
     */
    public Soak(long calls, int batch, Duration timeout, PrintWriter progress) {
        if (calls < GRAPH_CALLS || calls % GRAPH_CALLS != 0 || calls > MAX_CALLS) {
            throw new IllegalArgumentException("a soak's calls must be a positive multiple of " + GRAPH_CALLS
                    + " up to " + MAX_CALLS + "; got " + calls);
        }
        this.calls = calls;
        this.batch = batch;
        this.timeout = timeout;
        this.progress = progress;
    }

    /**
     * What a soak found.
     *
     * @param where      the checked ranks and where they ran
     * @param calls      calls in all
     * @param counters   the checked ranks' call counters at the end
     * @param mismatches outputs found different from the CPU engine's
     */
    public record Result(String where, long calls, List<Integer> counters, long mismatches) {
        /** A result, the counters copied. */
        public Result {
            counters = List.copyOf(counters);
        }

        /** {@return whether every checked rank's counter advanced by exactly the calls made} */
        public boolean counted() {
            int expectedEnd = (int) (startEpoch(calls) + calls);
            return counters.stream().allMatch(c -> c == expectedEnd);
        }

        /** {@return whether every output matched and every counter was right} */
        public boolean passed() {
            return mismatches == 0 && counted();
        }

        /** {@return the one line that reports the soak} */
        public String summary() {
            int start = startEpoch(calls);
            int expectedEnd = (int) (start + calls);
            return String.format("soak %s: %s: %d calls, every counter from %d to %d%s, %d outputs differ from the CPU"
                    + " engine", passed() ? "passed" : "FAILED", where, calls, Integer.toUnsignedLong(start),
                    Integer.toUnsignedLong(expectedEnd), counted() ? "" : " (FAILED: ended at "
                            + counters.stream().map(Integer::toUnsignedLong).toList() + ")", mismatches);
        }
    }

    /**
     * Runs the soak: as one rank of the group in the environment where there is one ({@link RankSetup}), this rank's
     * outputs checked; else loopback on GPU 0, every rank's outputs checked.
     *
     * @param loopbackCp ranks in loopback (a group's size otherwise)
     * @param log        receives the line describing this rank, in a group
     * @return what the soak found
     * @throws IllegalStateException where no GPU is usable
     * @throws io.github.dcp4j.rendezvous.EnvironmentException in a group, where a variable of the rank's environment is
     *         missing or malformed
     */
    public Result run(int loopbackCp, Consumer<String> log) {
        if (RankSetup.inEnvironment()) {
            // RankSetup reads the environment first, so that a bad variable is named before the GPU is looked for
            return asRank(log);
        }
        Cuda.Availability gpu = Cuda.availability();
        if (!gpu.available()) {
            throw new IllegalStateException("soak needs a GPU: " + gpu.reason());
        }
        return loopback(loopbackCp);
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
    private Result loopback(int cp) {
        try (Arena arena = Arena.ofShared();
             CudaGroup engine = CudaGroup.open(0, specOf(cp), timeout);
             CudaStream stream = new CudaStream(engine.gpus().getFirst())) {
            String where = "loopback, " + cp + " ranks in one launch on " + engine.gpus().getFirst();
            List<Integer> ranks = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                ranks.add(r);
            }
            long mismatches = soak(where, arena, cp, ranks,
                    (in, out) -> engine.prepare(in.partialO(), in.partialLse(), out, LseMode.BASE2, stream),
                    engine::forceEpoch);
            List<Integer> counters = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                counters.add(engine.epoch(r));
            }
            return new Result(where, calls, counters, mismatches);
        }
    }

    /** One rank of a group: this rank's outputs are checked. */
    private Result asRank(Consumer<String> log) {
        try (RankSetup setup = RankSetup.fromEnvironment(timeout, log)) {
            int rank = setup.rank();
            int cp = setup.worldSize();
            try (Arena arena = Arena.ofShared(); IpcWorkspaces ws = setup.openWorkspaces(specOf(cp).bytes());
                 CudaRankEngine engine = setup.openEngine(ws, timeout)) {
                String where = "rank " + rank + " of " + cp + " (CUDA IPC) on " + setup.device();
                long mismatches = soak(where, arena, cp, List.of(rank),
                        (in, out) -> engine.prepare(in.partialO().get(rank), in.partialLse().get(rank), out.getFirst(),
                                rank, cp, LseMode.BASE2),
                        engine::forceEpoch);
                return new Result(where, calls, List.of(engine.epoch()), mismatches);
            }
        }
    }

    /** Prepares one distinct call on its inputs, writing the outputs of the checked ranks, in their order. */
    @FunctionalInterface
    private interface Preparer {
        KernelCall prepare(Inputs in, List<TensorView> outputs);
    }

    /**
     * Prepares the {@link #INPUTS} distinct calls, forces the counter to {@link #startEpoch} and runs the soak,
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
            forceEpoch.accept(startEpoch(calls));
            return run(where, prepared.getFirst().stream(), prepared, outs, expected);
        } finally {
            prepared.forEach(KernelCall::close);
        }
    }

    /**
     * The counter value a soak of {@code calls} starts from. The call with counter 0 (the wrap) is a launch of the
     * middle replay among its last {@link #INPUTS}, the last on their inputs in that replay, whose outputs the check
     * after it reads.
     *
     * @param calls calls in all, a multiple of {@link #GRAPH_CALLS}
     * @return the counter before the first call
     */
    public static int startEpoch(long calls) {
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
}
