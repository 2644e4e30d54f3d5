package io.github.dcp4j.op;

import io.github.dcp4j.DcpLseReduce;
import io.github.dcp4j.Tensors;
import io.github.dcp4j.engine.cpu.CpuEngine;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

import java.lang.foreign.Arena;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every validation error of one rank's call: each names the argument, the value and what is allowed, is raised before
 * anything is written (the output keeps its sentinel), and dtype errors are a kind of their own.
 */
class ValidationTest {
    private static final int CP = 4;
    private Arena arena;
    private CpuEngine group;
    private TensorView o;
    private TensorView lse;
    private TensorView out;

    @BeforeEach
    void setUp() {
        arena = Arena.ofShared();
        group = CpuEngine.open(new WorkspaceSpec(4, 2, CP, 64, DType.BF16));
        Tensors.Group g = Tensors.packed(arena, new SplittableRandom(3), 4, 2, CP, 64, DType.BF16, 2.0);
        o = g.partialO().getFirst();
        lse = g.partialLse().getFirst();
        out = TensorView.allocate(arena, DType.BF16, 8, 64);
        Tensors.fillSentinel(out);
    }

    @AfterEach
    void tearDown() {
        group.close();
        arena.close();
    }

    private void call(TensorView partialO, TensorView partialLse, TensorView output, int rank, int cp, LseMode mode) {
        DcpLseReduce.reduce(partialO, partialLse, group.workspace(rank), rank, cp, mode, output);
    }

    private <T extends Throwable> T rejected(Class<T> kind, Executable call, String... mentions) {
        short[] before = Tensors.bits(out);
        T e = assertThrows(kind, call);
        for (String m : mentions) {
            assertTrue(e.getMessage().contains(m), "'" + e.getMessage() + "' should mention '" + m + "'");
        }
        assertArrayEquals(before, Tensors.bits(out), "a rejected call writes nothing");
        return e;
    }

    @Test
    void unknownLseModeNamesTheValue() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> LseMode.parse("invalid"));
        assertEquals("lse_mode must be 'base2' or 'basee'; got 'invalid'", e.getMessage());
        assertEquals(LseMode.BASEE, LseMode.parse("basee"));
        assertEquals(LseMode.BASE2, LseMode.parse("base2"));
    }

    @Test
    void cpSizeOutside1To64() {
        rejected(IllegalArgumentException.class, () -> call(o, lse, out, 0, 65, LseMode.BASE2), "cp_size", "65",
                "[1, 64]");
        rejected(IllegalArgumentException.class, () -> call(o, lse, out, 0, 0, LseMode.BASE2), "cp_size", "0");
    }

    @Test
    void cpRankOutsideTheGroup() {
        rejected(IllegalArgumentException.class,
                () -> DcpLseReduce.reduce(o, lse, group.workspace(0), 4, CP, LseMode.BASE2, out), "cp_rank", "4",
                "[0, 4)");
        rejected(IllegalArgumentException.class,
                () -> DcpLseReduce.reduce(o, lse, group.workspace(0), -1, CP, LseMode.BASE2, out), "cp_rank", "-1");
    }

    @Test
    void cpRankOfAnotherWorkspace() {
        rejected(IllegalArgumentException.class,
                () -> DcpLseReduce.reduce(o, lse, group.workspace(1), 0, CP, LseMode.BASE2, out), "cp_rank", "0",
                "rank 1");
    }

    @Test
    void headDimNotAMultipleOf16Bytes() {
        TensorView bad = TensorView.allocate(arena, DType.BF16, 4, 2, CP, 60);
        TensorView badOut = TensorView.allocate(arena, DType.BF16, 8, 60);
        rejected(IllegalArgumentException.class, () -> call(bad, lse, badOut, 0, CP, LseMode.BASE2), "head_dim",
                "60", "multiple of 16");
    }

    @Test
    void rowBytesOver15360() {
        TensorView bad = TensorView.allocate(arena, DType.FP16, 1, 1, CP, 7688);
        TensorView badLse = TensorView.allocate(arena, DType.FP32, 1, 1, CP);
        TensorView badOut = TensorView.allocate(arena, DType.FP16, 1, 7688);
        rejected(IllegalArgumentException.class, () -> call(bad, badLse, badOut, 0, CP, LseMode.BASE2), "7688",
                "15376", "at most 15360");
    }

    @Test
    void zeroRows() {
        TensorView empty = TensorView.allocate(arena, DType.BF16, 0, 2, CP, 64);
        TensorView emptyLse = TensorView.allocate(arena, DType.FP32, 0, 2, CP);
        rejected(IllegalArgumentException.class, () -> call(empty, emptyLse, out, 0, CP, LseMode.BASE2),
                "zero rows", "[0, 2, 4, 64]");
    }

    @Test
    void moreRowsThanTheWorkspaceHolds() {
        TensorView big = TensorView.allocate(arena, DType.BF16, 5, 2, CP, 64);
        TensorView bigLse = TensorView.allocate(arena, DType.FP32, 5, 2, CP);
        TensorView bigOut = TensorView.allocate(arena, DType.BF16, 10, 64);
        rejected(IllegalArgumentException.class, () -> call(big, bigLse, bigOut, 0, CP, LseMode.BASE2), "10 rows",
                "at most 8");
    }

    /** A view that repeats one slice of each rank's memory (strides 0 on the leading dims) {@code shape} times. */
    private TensorView repeated(DType dtype, long... shape) {
        long[] strides = TensorView.contiguousStrides(shape);
        int leading = dtype == DType.FP32 ? shape.length - 1 : shape.length - 2;
        long[] inner = java.util.Arrays.copyOfRange(shape, leading, shape.length);
        for (int i = 0; i < leading; i++) {
            strides[i] = 0;
        }
        TensorView slice = TensorView.allocate(arena, dtype, inner);
        return new TensorView(slice.memory(), dtype, shape, strides, 0);
    }

    /**
     * Rows past an int, or past what the kernel's row arithmetic holds at this cp_size, are refused naming partial_o,
     * its shape and the limit; a shape whose element count or rows overflow a long is refused as such, never wrapped
     * around to a small count.
     */
    @Test
    void hugeShapesAreRefusedNamingTheArgumentTheValueAndTheLimit() {
        long pastInt = 1L << 31;
        rejected(IllegalArgumentException.class, () -> call(repeated(DType.BF16, pastInt, 1, CP, 64),
                repeated(DType.FP32, pastInt, 1, CP), out, 0, CP, LseMode.BASE2), "partial_o rows",
                "[2147483648, 1, 4, 64]", "at most 2147483647", "got 2147483648");
        rejected(IllegalArgumentException.class, () -> call(repeated(DType.BF16, 1, pastInt, CP, 64),
                repeated(DType.FP32, 1, pastInt, CP), out, 0, CP, LseMode.BASE2), "partial_o rows",
                "[1, 2147483648, 4, 64]", "at most 2147483647");
        long pastLayout = Integer.MAX_VALUE / 32 + 1;
        rejected(IllegalArgumentException.class, () -> call(repeated(DType.BF16, pastLayout, 1, CP, 64),
                repeated(DType.FP32, pastLayout, 1, CP), out, 0, CP, LseMode.BASE2), "partial_o rows",
                "at most " + (Integer.MAX_VALUE / 32), "got " + pastLayout, "cp_size 4");
        long[] wraps = {(1L << 32) + 1, (1L << 32) - 1, CP, 64};  // 2^64 - 1 rows: -1 in a long
        IllegalArgumentException view = assertThrows(IllegalArgumentException.class,
                () -> repeated(DType.BF16, wraps));
        assertTrue(view.getMessage().contains("has more than 9223372036854775807 elements"), view.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new DeviceTensor(0x10000, 0, DType.BF16, wraps,
                new long[] {0, 0, 64, 1}, 0));
        DeviceTensor noElements = new DeviceTensor(0x10000, 0, DType.BF16, new long[] {1L << 32, 1L << 32, CP, 0},
                new long[] {0, 0, 0, 1}, 0);
        IllegalArgumentException rows = assertThrows(IllegalArgumentException.class,
                () -> ReduceCall.outputShape(noElements));
        assertTrue(rows.getMessage().contains("partial_o rows") && rows.getMessage().contains("at most 2147483647")
                && rows.getMessage().contains("got more than 9223372036854775807"), rows.getMessage());
        IllegalArgumentException large = assertThrows(IllegalArgumentException.class,
                () -> ReduceCall.outputShape(repeated(DType.BF16, pastInt, 1, CP, 64)));
        assertTrue(large.getMessage().contains("got 2147483648"), large.getMessage());
        assertArrayEquals(new long[] {8, 64}, ReduceCall.outputShape(o));
    }

    @Test
    void partialOOfFp32IsADtypeError() {
        TensorView f32 = TensorView.allocate(arena, DType.FP32, 4, 2, CP, 64);
        DTypeException e = rejected(DTypeException.class, () -> call(f32, lse, out, 0, CP, LseMode.BASE2),
                "partial_o", "FP32", "fp16 or bf16");
        assertInstanceOf(IllegalArgumentException.class, e);
    }

    @Test
    void lseNotFp32IsADtypeError() {
        TensorView half = TensorView.allocate(arena, DType.BF16, 4, 2, CP);
        rejected(DTypeException.class, () -> call(o, half, out, 0, CP, LseMode.BASE2), "partial_lse", "BF16",
                "fp32");
    }

    @Test
    void outputOfAnotherDtypeIsADtypeError() {
        TensorView fp16Out = TensorView.allocate(arena, DType.FP16, 8, 64);
        assertThrows(DTypeException.class, () -> call(o, lse, fp16Out, 0, CP, LseMode.BASE2));
    }

    @Test
    void shapeMismatchBetweenPartialOAndPartialLse() {
        TensorView other = TensorView.allocate(arena, DType.FP32, 4, 3, CP);
        rejected(IllegalArgumentException.class, () -> call(o, other, out, 0, CP, LseMode.BASE2), "partial_lse",
                "[4, 2, 4]", "[4, 3, 4]");
    }

    @Test
    void cpAxisDiffersFromCpSize() {
        TensorView three = TensorView.allocate(arena, DType.BF16, 4, 2, 3, 64);
        rejected(IllegalArgumentException.class, () -> call(three, lse, out, 0, CP, LseMode.BASE2), "cp axis",
                "cp_size 4", "[4, 2, 3, 64]");
    }

    @Test
    void lastDimensionNotContiguous() {
        TensorView wide = TensorView.allocate(arena, DType.BF16, 4, 2, CP, 128);
        TensorView everyOther = new TensorView(wide.memory(), DType.BF16, new long[] {4, 2, CP, 64},
                new long[] {2 * CP * 128, CP * 128, 128, 2}, 0);
        rejected(IllegalArgumentException.class, () -> call(everyOther, lse, out, 0, CP, LseMode.BASE2),
                "last dimension", "stride 1", "[1024, 512, 128, 2]");
    }

    @Test
    void rowStartNot8ByteAligned() {
        TensorView shifted = new TensorView(o.memory(), DType.BF16, new long[] {4, 2, CP, 56},
                new long[] {2 * CP * 64, CP * 64, 64, 1}, 1);
        TensorView shiftedOut = TensorView.allocate(arena, DType.BF16, 8, 56);
        rejected(IllegalArgumentException.class, () -> call(shifted, lse, shiftedOut, 0, CP, LseMode.BASE2),
                "8-byte aligned", "offset 1");
        TensorView oddStride = new TensorView(o.memory(), DType.BF16, new long[] {2, 2, CP, 64},
                new long[] {2 * CP * 64 + 2, CP * 64, 64, 1}, 0);
        TensorView oddLse = TensorView.allocate(arena, DType.FP32, 2, 2, CP);
        TensorView oddOut = TensorView.allocate(arena, DType.BF16, 4, 64);
        rejected(IllegalArgumentException.class, () -> call(oddStride, oddLse, oddOut, 0, CP, LseMode.BASE2),
                "8-byte aligned", "514");
    }

    @Test
    void nonFourDimensionalInputsMustBeContiguous() {
        TensorView fiveD = TensorView.allocate(arena, DType.BF16, 2, 2, 2, CP, 64);
        TensorView transposed = fiveD.permute(1, 0, 2, 3, 4);
        TensorView lse5 = TensorView.allocate(arena, DType.FP32, 2, 2, 2, CP);
        rejected(IllegalArgumentException.class, () -> call(transposed, lse5, out, 0, CP, LseMode.BASE2),
                "contiguous", "4-D");
    }

    @Test
    void outputOfTheWrongShape() {
        TensorView wrong = TensorView.allocate(arena, DType.BF16, 8, 32);
        assertThrows(IllegalArgumentException.class, () -> call(o, lse, wrong, 0, CP, LseMode.BASE2));
    }

    @Test
    void workspaceOfAnotherGroupSize() {
        try (CpuEngine two = CpuEngine.open(new WorkspaceSpec(4, 2, 2, 64, DType.BF16))) {
            rejected(IllegalArgumentException.class,
                    () -> DcpLseReduce.reduce(o, lse, two.workspace(0), 0, CP, LseMode.BASE2, out), "cp_size",
                    "group's size 2");
        }
    }
}
