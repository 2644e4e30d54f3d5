package io.github.dcp4j.bench;

import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.reference.Fp64Oracle;
import io.github.dcp4j.reference.RandomInputs;

import java.lang.foreign.Arena;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * One case's inputs, the same in every process (one seed per case, split once per rank in rank order): rank r's
 * partial_o and partial_lse (the strided attention views or packed copies) and its output. A process that runs only
 * some ranks may skip the other ranks' tensors ({@code null}); the fp64 check then needs every rank's inputs.
 */
record BenchInputs(List<TensorView> partialO, List<TensorView> partialLse, List<TensorView> out) {
    static final DType DTYPE = DType.BF16;
    static final LseMode MODE = LseMode.BASE2;

    /** The workspace a case's group needs: exactly its batch. */
    static WorkspaceSpec spec(Benchmark.Case c) {
        return new WorkspaceSpec(c.batch(), c.heads(), c.cp(), c.headDim(), DTYPE);
    }

    static BenchInputs all(Benchmark.Case c, Arena arena) {
        return of(c, arena, r -> true);
    }

    /** The inputs of the ranks {@code wanted} accepts; the others' entries are null. */
    static BenchInputs of(Benchmark.Case c, Arena arena, java.util.function.IntPredicate wanted) {
        SplittableRandom random = new SplittableRandom(2026L + c.batch() * 31L + c.heads());
        List<TensorView> o = new ArrayList<>();
        List<TensorView> lse = new ArrayList<>();
        List<TensorView> out = new ArrayList<>();
        for (int r = 0; r < c.cp(); r++) {
            SplittableRandom mine = random.split();
            if (!wanted.test(r)) {
                o.add(null);
                lse.add(null);
                out.add(null);
                continue;
            }
            RandomInputs in = RandomInputs.attention(arena, mine, c.batch(), c.heads(), c.cp(), c.headDim(), DTYPE,
                    3.0);
            o.add(c.strided() ? in.partialO() : in.partialO().contiguousCopy(arena));
            lse.add(c.strided() ? in.partialLse() : in.partialLse().contiguousCopy(arena));
            out.add(TensorView.allocate(arena, DTYPE, ReduceCall.outputShape(o.getLast())));
        }
        return new BenchInputs(o, lse, out);
    }

    /** The largest relative error (L2, against fp64) of the given ranks' outputs; needs every rank's inputs. */
    double maxRelativeError(int[] ranks) {
        double err = 0;
        for (int r : ranks) {
            err = Math.max(err, Fp64Oracle.relativeError(out.get(r), Fp64Oracle.reduce(partialO, partialLse, r,
                    MODE)));
        }
        return err;
    }
}
