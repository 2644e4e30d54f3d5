package io.github.dcp4j.reference;

import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.Halves;
import io.github.dcp4j.op.TensorView;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Fresh random inputs for one rank, shaped as attention produces them: {@code out [T, cp x H, D]} and
 * {@code lse [T, cp x H]} (head h belongs to rank h / H), with the op's views {@code [T, H, cp, D]} and
 * {@code [T, H, cp]} taken without a copy ({@code unflatten(1, (cp, H)).permute(0, 2, 1, 3)}).
 *
 * @param attentionOut {@code [T, cp x H, D]} contiguous
 * @param attentionLse {@code [T, cp x H]} contiguous fp32
 * @param partialO     the strided view {@code [T, H, cp, D]} of attentionOut
 * @param partialLse   the strided view {@code [T, H, cp]} of attentionLse
 */
public record RandomInputs(TensorView attentionOut, TensorView attentionLse, TensorView partialO,
                           TensorView partialLse) {

    private static final ValueLayout.OfShort HALF = ValueLayout.JAVA_SHORT.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT.withOrder(ByteOrder.LITTLE_ENDIAN);

    /**
     * Random attention outputs: values ~ N(0, 1); LSEs ~ lseScale x N(0, 1).
     *
     * @param arena    where the memory comes from
     * @param random   the source of randomness
     * @param tokens   T
     * @param heads    H, the heads each rank owns
     * @param cp       ranks in the group
     * @param headDim  D
     * @param dtype    fp16 or bf16
     * @param lseScale the LSEs' standard deviation
     * @return the attention output, its LSEs and the op's views of both
     */
    public static RandomInputs attention(Arena arena, SplittableRandom random, int tokens, int heads, int cp,
                                         int headDim, DType dtype, double lseScale) {
        TensorView out = TensorView.allocate(arena, dtype, tokens, (long) cp * heads, headDim);
        TensorView lse = TensorView.allocate(arena, DType.FP32, tokens, (long) cp * heads);
        fillGaussian(out, random, 1.0);
        fillGaussian(lse, random, lseScale);
        return new RandomInputs(out, lse, out.unflatten(1, cp, heads).permute(0, 2, 1, 3),
                lse.unflatten(1, cp, heads).permute(0, 2, 1));
    }

    /**
     * Every rank's inputs of one call: rank r's are {@link #attention} from the r-th {@code random.split()}, so the
     * same seed gives the same group on every rank of a multi-process group.
     *
     * @param arena    where the memory comes from
     * @param random   the source of randomness
     * @param tokens   T
     * @param heads    H, the heads each rank owns
     * @param cp       ranks in the group
     * @param headDim  D
     * @param dtype    fp16 or bf16
     * @param lseScale the LSEs' standard deviation
     * @return the op's strided views, rank r's at index r
     */
    public static ConformanceCases.GroupInputs group(Arena arena, SplittableRandom random, int tokens, int heads,
                                                     int cp, int headDim, DType dtype, double lseScale) {
        List<TensorView> partialO = new ArrayList<>(cp);
        List<TensorView> partialLse = new ArrayList<>(cp);
        for (int r = 0; r < cp; r++) {
            RandomInputs in = attention(arena, random.split(), tokens, heads, cp, headDim, dtype, lseScale);
            partialO.add(in.partialO());
            partialLse.add(in.partialLse());
        }
        return new ConformanceCases.GroupInputs(partialO, partialLse);
    }

    /**
     * Fills a contiguous tensor with scale x N(0, 1), rounded to its dtype.
     *
     * @param t      the tensor
     * @param random the source of randomness
     * @param scale  the standard deviation
     */
    public static void fillGaussian(TensorView t, SplittableRandom random, double scale) {
        MemorySegment m = t.memory();
        long n = t.numel();
        for (long i = 0; i < n; i++) {
            float v = (float) (random.nextGaussian() * scale);
            long e = t.offset() + i;
            if (t.dtype() == DType.FP32) {
                m.setAtIndex(FLOAT, e, v);
            } else {
                m.setAtIndex(HALF, e, Halves.fromFloat(t.dtype(), v));
            }
        }
    }
}
