package io.github.dcp4j.engine.tornado;

import uk.ac.manchester.tornado.api.annotations.Parallel;
import uk.ac.manchester.tornado.api.types.arrays.DoubleArray;
import uk.ac.manchester.tornado.api.types.arrays.FloatArray;
import uk.ac.manchester.tornado.api.types.arrays.IntArray;
import uk.ac.manchester.tornado.api.types.arrays.LongArray;
import uk.ac.manchester.tornado.api.types.arrays.ShortArray;

/**
 * Merges written as a user would write one ({@link MergeVariant}; docs/TORNADO.md shows how to run them): public
 * static methods with {@link MergeTasks#merge}'s parameters, built from MergeTasks's public layout and arithmetic
 * helpers so that they round as ExactMerge does.
 */
public final class ExampleMerges {
    private ExampleMerges() {
    }

    /**
     * ExactMerge steps 4-5 with one thread per output element (the engine's own merge takes one 8-byte word, four
     * elements, per thread): 4x the threads, each loading one 16-bit element of every source. Same sums in the same
     * source order, so the same bits.
     *
     * @param p      the parameters
     * @param ws     every rank's workspace
     * @param oIn    every rank's partial_o
     * @param index  the index table
     * @param w      the weights
     * @param failed per (destination, row): nonzero where the exchange task gave up on that row
     * @param out    every rank's output
     * @param t      the constant table
     */
    public static void elementPerThread(IntArray p, LongArray ws, ShortArray oIn, IntArray index, FloatArray w,
                                        IntArray failed, ShortArray out, DoubleArray t) {
        int cp = p.get(MergeTasks.P_CP);
        int rows = p.get(MergeTasks.P_ROWS);
        int elements = 4 * p.get(MergeTasks.P_DATA_WORDS);
        boolean bf16 = p.get(MergeTasks.P_BF16) == 1;
        for (@Parallel int i = 0; i < cp * rows * elements; i++) {
            int dr = i / elements;
            int e = i - dr * elements;
            int k = e / 4;
            int dst = dr / rows;
            int row = dr - dst * rows;
            int slot = MergeTasks.slot(p, ws, dst);
            float acc = 0f;
            for (int s = 0; s < cp; s++) {
                int bits;
                if (s == dst) {
                    bits = oIn.get(index.get(p.get(MergeTasks.P_SLICE_INDEX) + dr * cp + dst) + e) & 0xFFFF;
                } else {
                    int line = k / MergeTasks.LINE_DATA_WORDS;
                    long word = ws.get(MergeTasks.dataLine(p, dst, slot, s, row, line) + k
                            - line * MergeTasks.LINE_DATA_WORDS);
                    bits = (int) ((word >>> (16 * (e - 4 * k))) & 0xFFFF);
                }
                acc = MergeTasks.fma32(w.get(dr * cp + s), MergeTasks.decodeHalf(bits, bf16, t), acc);
            }
            if (failed.get(dr) != 0) {
                acc = (float) t.get(MergeTasks.T_NAN);
            }
            out.set(index.get(p.get(MergeTasks.P_OUT_INDEX) + dr) + e, (short) MergeTasks.encodeHalf(acc, bf16, t));
        }
    }
}
