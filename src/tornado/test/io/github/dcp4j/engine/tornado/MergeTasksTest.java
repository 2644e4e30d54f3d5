package io.github.dcp4j.engine.tornado;

import io.github.dcp4j.Tensors;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.engine.cpu.CpuEngine;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.layout.Ll128Lines;
import io.github.dcp4j.layout.RowLayout;
import io.github.dcp4j.layout.WorkspaceLayout;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.Halves;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WeightExp;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.reference.ConformanceCases;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import uk.ac.manchester.tornado.api.types.arrays.DoubleArray;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import java.util.SplittableRandom;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The TornadoVM engine's Java tasks run as plain Java on the CPU: each arithmetic step equals its definition bit for
 * bit (Math.fma, Halves, WeightExp, Float.intBitsToFloat), and a whole call (the exchange written in Java as the
 * PTX exchange sends, receives and takes its ticket, then weights and merge) gives the CPU engine's outputs and leaves
 * every workspace byte for byte as the CPU engine leaves it.
 */
class MergeTasksTest {
    private static final DoubleArray TABLES = MergeTasks.tables(WeightExp.taylorCoefficients());
    /** Fresh for every run, printed with every failure: the random tests' seed. */
    private static final long SEED = System.nanoTime();

    @Test
    void decodesEveryHalfPattern() {
        for (int bits = 0; bits < 1 << 16; bits++) {
            for (DType dtype : List.of(DType.BF16, DType.FP16)) {
                float expected = Halves.toFloat(dtype, (short) bits);
                float got = MergeTasks.decodeHalf(bits, dtype == DType.BF16, TABLES);
                assertSameFloat(expected, got, dtype + " pattern 0x" + Integer.toHexString(bits));
            }
        }
    }

    /** Every half value, the midpoints between neighbours and one fp32 ulp either side of each, and random floats. */
    @Test
    void roundsToHalvesAsHalves() {
        for (DType dtype : List.of(DType.BF16, DType.FP16)) {
            boolean bf16 = dtype == DType.BF16;
            for (int bits = 0; bits < 1 << 16; bits++) {
                float v = Halves.toFloat(dtype, (short) bits);
                float next = Halves.toFloat(dtype, (short) (bits + 1));
                float mid = (float) (((double) v + next) / 2);
                for (float x : new float[] {v, mid, Math.nextUp(mid), Math.nextDown(mid)}) {
                    assertEncodes(dtype, bf16, x);
                }
            }
            SplittableRandom random = new SplittableRandom(SEED);
            for (int i = 0; i < 1_000_000; i++) {
                assertEncodes(dtype, bf16, Float.intBitsToFloat(random.nextInt()));
            }
        }
    }

    /**
     * The exponent search from an estimate one too low, exact and one too high (PTX's approximate log2 may give any
     * of them): powers of two, their neighbours and random magnitudes from 2^minExp up, for both halves' ranges; below
     * 2^minExp (zero and fp32 subnormals included) any estimate gives minExp.
     */
    @Test
    void findsTheExponentFromAnEstimateWithinOne() {
        SplittableRandom random = new SplittableRandom(SEED);
        for (int[] range : new int[][] {{-126, 127}, {-14, 15}}) {
            int minExp = range[0];
            int maxExp = range[1];
            for (int i = 0; i < 200_000; i++) {
                double a = switch (i % 4) {
                    case 0 -> Math.scalb(1.0, random.nextInt(minExp, 128));
                    case 1 -> Math.nextDown((float) Math.scalb(1.0, random.nextInt(minExp + 1, 128)));
                    case 2 -> Math.scalb(1.0 + random.nextDouble(), random.nextInt(minExp, 127));
                    default -> i % 1000 == 3 ? 0.0 : Math.scalb(random.nextDouble(), minExp);
                };
                boolean below = a < Math.scalb(1.0, minExp);
                int exact = below ? minExp : Math.getExponent(a);  // floor(log2(a)) from 2^minExp up
                int expected = Math.min(exact, maxExp);
                for (int off = -1; off <= 1; off++) {
                    int estimate = below ? random.nextInt() : exact + off;
                    assertEquals(expected, MergeTasks.exponentAtMost(a, estimate, minExp, maxExp, TABLES),
                            "seed " + SEED + ": a = " + a + ", estimate " + estimate + ", range " + minExp + ".."
                                    + maxExp);
                }
            }
        }
    }

    private static void assertEncodes(DType dtype, boolean bf16, float x) {
        if (Float.isNaN(x)) {
            assertEquals(bf16 ? 0x7FC0 : 0x7E00, MergeTasks.encodeHalf(x, bf16, TABLES));
            return;
        }
        assertEquals(Halves.fromFloat(dtype, x) & 0xFFFF, MergeTasks.encodeHalf(x, bf16, TABLES),
                dtype + " of " + x + " (0x" + Integer.toHexString(Float.floatToRawIntBits(x)) + ")");
    }

    /**
     * fma32 against Math.fma: random patterns, products whose fp64 sum lands on an fp32 midpoint (where a plain
     * fp64 sum rounds twice, wrongly), weights times halves as the merge uses them, NaN, infinities and subnormals.
     */
    @Test
    void fusedMultiplyAddEqualsMathFma() {
        SplittableRandom random = new SplittableRandom(SEED);
        for (int i = 0; i < 2_000_000; i++) {
            float a;
            float b;
            float c;
            switch (i % 4) {
                case 0 -> {
                    a = Float.intBitsToFloat(random.nextInt());
                    b = Float.intBitsToFloat(random.nextInt());
                    c = Float.intBitsToFloat(random.nextInt());
                }
                case 1 -> {
                    // a*b = +-(half an ulp of c) x (1 - 2^-46), up to a factor 2: the fp64 sum rounds to the fp32
                    // midpoint where c's last bit is odd (plain (float) (a*b + c) then rounds wrongly: 1 in 6 here)
                    int e = random.nextInt(-100, 100);
                    c = Math.scalb(1f + random.nextInt(1 << 22) * 0x1p-22f + (random.nextBoolean() ? 0x1p-23f : 0f),
                            e);
                    a = 1f + 0x1p-23f;
                    b = (random.nextBoolean() ? 1 : -1) * Math.scalb(1f - 0x1p-23f, e - 24 + random.nextInt(-1, 2));
                }
                case 2 -> {
                    a = (float) random.nextDouble();
                    b = Halves.bf16ToFloat((short) random.nextInt(1 << 16));
                    c = (float) random.nextGaussian();
                }
                default -> {
                    a = Math.scalb((float) random.nextDouble(), -random.nextInt(160));
                    b = Math.scalb((float) random.nextGaussian(), random.nextInt(-40, 40));
                    c = Math.scalb((float) random.nextGaussian(), -random.nextInt(150));
                }
            }
            assertSameFloat(Math.fma(a, b, c), MergeTasks.fma32(a, b, c),
                    "seed " + SEED + ": fma(" + a + ", " + b + ", " + c + ")");
        }
        // products at the midpoint between Float.MAX_VALUE and 2^128 (18631 x 1801 = 2^25 - 1), the sum a little
        // below it, on it and above it, either sign: the fp64 sum rounds to the midpoint and (float) to infinity
        for (float sign : new float[] {1f, -1f}) {
            for (float c : new float[] {-Float.MIN_VALUE, 0f, Float.MIN_VALUE, -1f, 1f, -0x1p80f, 0x1p80f}) {
                float a = sign * 18631f;
                float b = 1801f * 0x1p103f;
                assertSameFloat(Math.fma(a, b, sign * c), MergeTasks.fma32(a, b, sign * c),
                        "fma(" + a + ", " + b + ", " + sign * c + ")");
            }
        }
        float inf = Float.POSITIVE_INFINITY;
        float[] special = {0f, -0f, 1f, -1f, inf, -inf, Float.NaN, Float.MIN_VALUE, Float.MAX_VALUE};
        for (float a : special) {
            for (float b : special) {
                for (float c : special) {
                    assertSameFloat(Math.fma(a, b, c), MergeTasks.fma32(a, b, c), a + " " + b + " " + c);
                }
            }
        }
    }

    @Test
    void weightExponentialEqualsWeightExp() {
        SplittableRandom random = new SplittableRandom(SEED);
        for (int i = 0; i < 1_000_000; i++) {
            float x = i % 2 == 0 ? (float) -random.nextDouble(200) : -Float.intBitsToFloat(random.nextInt() >>> 1);
            for (LseMode mode : LseMode.values()) {
                assertSameFloat(WeightExp.exp(mode, x), MergeTasks.weightExp(mode == LseMode.BASE2, x, TABLES),
                        "seed " + SEED + ": " + mode + " exp(" + x + ")");
            }
        }
        assertEquals(0f, MergeTasks.weightExp(true, Float.NEGATIVE_INFINITY, TABLES));
    }

    /** Every merge the engine ships: its own and the example of a user's. */
    static List<MergeVariant.Named> merges() {
        return List.of(MergeVariant.standard(),
                MergeVariant.named(ExampleMerges.class.getName() + "::elementPerThread"));
    }

    static Stream<Arguments> conformance() {
        return ConformanceCases.all().stream().flatMap(c -> merges().stream().map(m -> Arguments.of(c, m)));
    }

    /** The shared conformance cases at cp 2, 4 and 8, with every merge: every call as the CPU engine makes it. */
    @ParameterizedTest(name = "{0} merge {1}")
    @MethodSource("conformance")
    void conformanceCase(ConformanceCases.Case c, MergeVariant.Named merge) {
        for (int cp : new int[] {2, 4, 8}) {
            try (Arena arena = Arena.ofShared(); CpuEngine cpu = CpuEngine.open(c.spec(cp))) {
                GraphArrays arrays = new GraphArrays(c.spec(cp));
                for (int call = 0; call < c.tokens().size(); call++) {
                    Tensors.Group g = Tensors.of(c.inputs(arena, ConformanceCases.SEED, cp, call));
                    callAndCompare(arena, cpu, arrays, g, c.mode(), merge.merge(),
                            c + " cp " + cp + " call " + call + " merge " + merge.name());
                }
            }
        }
    }

    /**
     * Fresh random shapes, dtypes, modes, packed and strided inputs, with NaN, +inf and -inf LSE rows, several calls
     * on one workspace (both slots, and calls smaller than the workspace).
     */
    @ParameterizedTest(name = "merge {0}")
    @MethodSource("merges")
    void randomShapesAndSpecialRows(MergeVariant.Named merge) {
        SplittableRandom random = new SplittableRandom(SEED);
        for (int trial = 0; trial < 24; trial++) {
            int cp = 1 + random.nextInt(9);
            int heads = 1 + random.nextInt(4);
            int tokens = 1 + random.nextInt(4);
            int headDim = 8 * (1 + random.nextInt(96));
            DType dtype = random.nextBoolean() ? DType.BF16 : DType.FP16;
            LseMode mode = random.nextBoolean() ? LseMode.BASE2 : LseMode.BASEE;
            WorkspaceSpec spec = new WorkspaceSpec(tokens, heads, cp, headDim, dtype);
            String shape = "seed " + SEED + " trial " + trial + ": cp " + cp + " T " + tokens + " H " + heads + " D "
                    + headDim + " " + dtype + " " + mode;
            try (Arena arena = Arena.ofShared(); CpuEngine cpu = CpuEngine.open(spec)) {
                GraphArrays arrays = new GraphArrays(spec);
                for (int call = 0; call < 3; call++) {
                    int t = 1 + random.nextInt(tokens);
                    Tensors.Group g = random.nextBoolean()
                            ? Tensors.strided(arena, random, t, heads, cp, headDim, dtype, 4.0)
                            : Tensors.packed(arena, random, t, heads, cp, headDim, dtype, 4.0);
                    float[] special = {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY};
                    for (int k = 0; k < 3; k++) {
                        TensorView lse = g.partialLse().get(random.nextInt(cp));
                        lse.setFloat(special[random.nextInt(3)], random.nextInt(t), random.nextInt(heads),
                                random.nextInt(cp));
                    }
                    if (random.nextBoolean()) {
                        Tensors.setLseRow(g, random.nextInt(cp), random.nextInt(t), random.nextInt(heads),
                                Float.NEGATIVE_INFINITY);
                    }
                    callAndCompare(arena, cpu, arrays, g, mode, merge.merge(),
                            shape + " call " + call + " merge " + merge.name());
                }
            }
        }
    }

    /**
     * One call both ways: the CPU engine, and the tornado graph's tasks in their order as plain Java (the exchange in
     * Java, the merge {@code merge}). Outputs equal bit for bit, workspaces byte for byte.
     */
    private static void callAndCompare(Arena arena, CpuEngine cpu, GraphArrays arrays, Tensors.Group g, LseMode mode,
                                       MergeVariant merge, String where) {
        int cp = g.cp();
        List<TensorView> expected = Tensors.outputs(arena, g);
        cpu.reduceAll(g.partialO(), g.partialLse(), expected, mode);

        List<TensorView> out = Tensors.outputs(arena, g);
        List<ReduceCall> calls = LocalGroup.validateAll(g.partialO(), g.partialLse(), out, cp,
                arrays.workspaceBytes, mode);
        arrays.load(calls, g.partialO(), g.partialLse(), Duration.ofSeconds(1));
        send(arrays, calls, g);
        receive(arrays, calls, g);
        for (int r = 0; r < cp; r++) {
            Ll128Lines.takeTicketVolatile(arrays.workspace(r), 1);  // the exchange's last arrival, one per rank
        }
        MergeTasks.weights(arrays.params, arrays.received, arrays.weights, arrays.tables);
        merge.apply(arrays.params, arrays.ws, arrays.oIn, arrays.index, arrays.weights, arrays.failed, arrays.out,
                arrays.tables);
        arrays.store(calls, out);

        for (int r = 0; r < cp; r++) {
            assertArrayEquals(Tensors.bits(expected.get(r)), Tensors.bits(out.get(r)), where + " rank " + r);
            MemorySegment mine = arrays.workspace(r);
            long at = mine.mismatch(cpu.workspace(r).memory());
            assertEquals(-1L, at, where + ": workspace of rank " + r + " differs at byte " + at);
        }
    }

    /** What the PTX send writes: every rank's slices and LSEs as lines in every other rank's workspace. */
    private static void send(GraphArrays arrays, List<ReduceCall> calls, Tensors.Group g) {
        int cp = g.cp();
        for (int src = 0; src < cp; src++) {
            ReduceCall call = calls.get(src);
            RowLayout row = call.row();
            WorkspaceLayout layout = WorkspaceLayout.forWorkspace(arrays.workspaceBytes, cp, row);
            int epoch = Ll128Lines.getEpochAcquire(arrays.workspace(src));
            int slot = Ll128.slot(epoch);
            for (int dst = 0; dst < cp; dst++) {
                if (dst == src) {
                    continue;
                }
                MemorySegment peer = arrays.workspace(dst);
                for (int i = 0; i < call.rows(); i++) {
                    long from = call.sliceElement(i, dst) * Short.BYTES;
                    for (int line = 0; line < row.dataLines(); line++) {
                        int offset = line * Ll128.LINE_DATA_BYTES;
                        Ll128Lines.putDataLineRelease(peer, layout.dataLineOffset(slot, src, i, line),
                                g.partialO().get(src).memory(), from + offset,
                                Math.min(Ll128.LINE_DATA_BYTES, row.dataBytes() - offset), Ll128.dataFlag(epoch));
                    }
                    int bits = Float.floatToRawIntBits(g.partialLse().get(src).loadFloat(call.lseElement(i, dst)));
                    for (int k = 0; k < row.lineGroups(); k++) {
                        Ll128Lines.putLseLineRelease(peer, layout.lseLineOffset(slot, src, i, k), bits,
                                Ll128.lseFlag(epoch));
                    }
                }
            }
        }
    }

    /**
     * What the PTX receive does once every line has arrived: every data line's flag and every LSE line zeroed, the
     * row's LSE (its first LSE line's) in {@code received}, the own LSE copied from the input.
     */
    private static void receive(GraphArrays arrays, List<ReduceCall> calls, Tensors.Group g) {
        int cp = g.cp();
        for (int dst = 0; dst < cp; dst++) {
            ReduceCall call = calls.get(dst);
            RowLayout row = call.row();
            WorkspaceLayout layout = WorkspaceLayout.forWorkspace(arrays.workspaceBytes, cp, row);
            MemorySegment mine = arrays.workspace(dst);
            int epoch = Ll128Lines.getEpochAcquire(mine);
            int slot = Ll128.slot(epoch);
            for (int i = 0; i < call.rows(); i++) {
                for (int src = 0; src < cp; src++) {
                    int at = (dst * call.rows() + i) * cp + src;
                    if (src == dst) {
                        arrays.received.set(at, g.partialLse().get(dst).loadFloat(call.lseElement(i, dst)));
                        continue;
                    }
                    for (int line = 0; line < row.dataLines(); line++) {
                        long offset = layout.dataLineOffset(slot, src, i, line);
                        assertEquals(Ll128.dataFlag(epoch), Ll128Lines.getDataFlagAcquire(mine, offset));
                        Ll128Lines.clearDataFlagPlain(mine, offset);
                    }
                    for (int k = 0; k < row.lineGroups(); k++) {
                        long offset = layout.lseLineOffset(slot, src, i, k);
                        assertEquals(true, Ll128Lines.isLseLineReadyAcquire(mine, offset, Ll128.lseFlag(epoch)));
                        if (k == 0) {
                            arrays.received.set(at, Float.intBitsToFloat(Ll128Lines.getLseBitsPlain(mine, offset)));
                        }
                        Ll128Lines.clearLseLinePlain(mine, offset);
                    }
                }
            }
        }
    }

    private static void assertSameFloat(float expected, float got, String where) {
        if (Float.isNaN(expected)) {
            assertEquals(true, Float.isNaN(got), where + ": expected NaN, got " + got);
        } else {
            assertEquals(Float.floatToRawIntBits(expected), Float.floatToRawIntBits(got), where + ": expected "
                    + expected + ", got " + got);
        }
    }
}
