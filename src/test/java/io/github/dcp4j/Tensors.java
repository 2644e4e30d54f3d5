package io.github.dcp4j;

import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.reference.ConformanceCases;
import io.github.dcp4j.reference.ExactMerge;
import io.github.dcp4j.reference.RandomInputs;

import java.lang.foreign.Arena;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/** Test inputs and comparisons shared by the test classes. */
public final class Tensors {
    private Tensors() {
    }

    /** One call's inputs for every rank. */
    public record Group(List<TensorView> partialO, List<TensorView> partialLse) {
        public int cp() {
            return partialO.size();
        }
    }

    /** A conformance case's inputs as a group. */
    public static Group of(ConformanceCases.GroupInputs in) {
        return new Group(in.partialO(), in.partialLse());
    }

    /** Packed (contiguous) {@code [T, H, cp, D]} values ~ N(0, 1) and {@code [T, H, cp]} LSEs ~ lseScale x N(0, 1). */
    public static Group packed(Arena arena, SplittableRandom random, int tokens, int heads, int cp, int headDim,
                               DType dtype, double lseScale) {
        List<TensorView> o = new ArrayList<>();
        List<TensorView> lse = new ArrayList<>();
        for (int r = 0; r < cp; r++) {
            TensorView po = TensorView.allocate(arena, dtype, tokens, heads, cp, headDim);
            TensorView pl = TensorView.allocate(arena, DType.FP32, tokens, heads, cp);
            RandomInputs.fillGaussian(po, random, 1.0);
            RandomInputs.fillGaussian(pl, random, lseScale);
            o.add(po);
            lse.add(pl);
        }
        return new Group(o, lse);
    }

    /** Strided views {@code [T, H, cp, D]} of attention outputs {@code [T, cp x H, D]}, as a model produces them. */
    public static Group strided(Arena arena, SplittableRandom random, int tokens, int heads, int cp, int headDim,
                                DType dtype, double lseScale) {
        List<TensorView> o = new ArrayList<>();
        List<TensorView> lse = new ArrayList<>();
        for (int r = 0; r < cp; r++) {
            RandomInputs in = RandomInputs.attention(arena, random, tokens, heads, cp, headDim, dtype, lseScale);
            o.add(in.partialO());
            lse.add(in.partialLse());
        }
        return new Group(o, lse);
    }

    public static Group packedCopy(Arena arena, Group g) {
        return new Group(g.partialO().stream().map(t -> t.contiguousCopy(arena)).toList(),
                g.partialLse().stream().map(t -> t.contiguousCopy(arena)).toList());
    }

    /** Fresh outputs for every rank, filled with a sentinel pattern that no merge produces by accident. */
    public static List<TensorView> outputs(Arena arena, Group g) {
        List<TensorView> out = new ArrayList<>();
        for (TensorView o : g.partialO()) {
            TensorView t = TensorView.allocate(arena, o.dtype(), ReduceCall.outputShape(o));
            fillSentinel(t);
            out.add(t);
        }
        return out;
    }

    public static void fillSentinel(TensorView t) {
        for (long i = 0, n = t.numel(); i < n; i++) {
            t.storeBits(t.offset() + i, (short) 0x7E5A);
        }
    }

    /** The raw 16-bit patterns of a contiguous fp16 / bf16 tensor. */
    public static short[] bits(TensorView t) {
        short[] b = new short[(int) t.numel()];
        for (int i = 0; i < b.length; i++) {
            b[i] = t.loadBits(t.offset() + i);
        }
        return b;
    }

    /** Rank {@code dest}'s exact output from {@link ExactMerge}. */
    public static short[] exact(Arena arena, Group g, int dest, LseMode mode) {
        TensorView out = TensorView.allocate(arena, g.partialO().getFirst().dtype(),
                ReduceCall.outputShape(g.partialO().getFirst()));
        ExactMerge.reduce(g.partialO(), g.partialLse(), dest, mode, out);
        return bits(out);
    }

    /** Sets partial_lse[t, h, :] on rank r to {@code value} (every source's LSE for that row of rank r's input). */
    public static void setLseRow(Group g, int rank, int t, int h, float value) {
        TensorView lse = g.partialLse().get(rank);
        for (int p = 0; p < g.cp(); p++) {
            lse.setFloat(value, t, h, p);
        }
    }
}
