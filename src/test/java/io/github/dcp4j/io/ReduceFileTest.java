package io.github.dcp4j.io;

import io.github.dcp4j.Tensors;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.engine.cpu.CpuEngine;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.SequencedMap;
import java.util.SplittableRandom;
import java.util.function.Function;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The op over a safetensors file on the CPU engine: outputs, the split into calls, what is refused. No GPU. */
class ReduceFileTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(10);

    @TempDir
    Path dir;

    /** Writes every rank's partial tensors of {@code g} to {@code file}, as {@code dcp4j sample} names them. */
    private static void write(Path file, Tensors.Group g) throws IOException {
        SequencedMap<String, TensorView> m = new LinkedHashMap<>();
        for (int r = 0; r < g.cp(); r++) {
            m.put("partial_o." + r, g.partialO().get(r));
            m.put("partial_lse." + r, g.partialLse().get(r));
        }
        SafeTensors.write(file, m);
    }

    /** Opens CPU groups and keeps the specs asked for, so that a test can see the call size and whether one opened. */
    private static final class Opener implements Function<WorkspaceSpec, LocalGroup> {
        final List<WorkspaceSpec> specs = new ArrayList<>();

        @Override
        public LocalGroup apply(WorkspaceSpec spec) {
            specs.add(spec);
            return CpuEngine.open(spec, TIMEOUT);
        }
    }

    /**
     * 64 tokens whose workspaces at once would take more than half the input: several calls, each of the size the
     * group was opened for, and every rank's output equal to the exact merge bit for bit.
     */
    @ParameterizedTest
    @EnumSource(LseMode.class)
    void everyRanksOutputIsTheExactMergeAcrossSeveralCalls(LseMode mode) throws IOException {
        int tokens = 64;
        int heads = 2;
        int cp = 4;
        int headDim = 64;
        Path in = dir.resolve("in.safetensors");
        Path out = dir.resolve("out.safetensors");
        try (Arena arena = Arena.ofShared()) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(7), tokens, heads, cp, headDim, DType.BF16,
                    4.0);
            Tensors.setLseRow(g, 0, 0, 0, Float.NEGATIVE_INFINITY);
            Tensors.setLseRow(g, cp - 1, 1, heads - 1, Float.NaN);
            write(in, g);
            Opener opener = new Opener();
            ReduceFile.Result r = ReduceFile.run(in, out, mode, opener);
            int chunk = ReduceFile.tokensPerCall(tokens, heads, cp, headDim, DType.BF16);
            assertTrue(chunk < tokens, "the tokens are split: " + chunk);
            assertEquals(new ReduceFile.Result(cp, (long) tokens * heads, headDim, DType.BF16,
                    (tokens + chunk - 1) / chunk), r);
            assertEquals(List.of(new WorkspaceSpec(chunk, heads, cp, headDim, DType.BF16)), opener.specs,
                    "one group, opened for one call's tokens");
            SafeTensors.Contents result = SafeTensors.read(out, arena);
            assertEquals(List.of("out.0", "out.1", "out.2", "out.3"), List.copyOf(result.tensors().keySet()));
            for (int rank = 0; rank < cp; rank++) {
                TensorView o = result.tensors().get("out." + rank);
                assertArrayEquals(new long[] {(long) tokens * heads, headDim}, o.shape());
                assertArrayEquals(Tensors.exact(arena, g, rank, mode), Tensors.bits(o), "rank " + rank);
            }
        }
    }

    @Test
    void oneCallTakesEveryTokenWhereTheWorkspacesFitAndTheOutputKeepsTheInputsDtype() throws IOException {
        Path in = dir.resolve("in.safetensors");
        Path out = dir.resolve("out.safetensors");
        try (Arena arena = Arena.ofShared()) {
            Tensors.Group g = Tensors.packed(arena, new SplittableRandom(3), 1, 1, 2, 64, DType.FP16, 2.0);
            write(in, g);
            ReduceFile.Result r = ReduceFile.run(in, out, LseMode.BASEE, new Opener());
            assertEquals(new ReduceFile.Result(2, 1, 64, DType.FP16, 1), r);
            TensorView o = SafeTensors.read(out, arena).tensors().get("out.1");
            assertEquals(DType.FP16, o.dtype());
            assertArrayEquals(Tensors.exact(arena, g, 1, LseMode.BASEE), Tensors.bits(o));
        }
    }

    /** A file that does not hold the ranks' tensors is refused naming it, before any group opens; nothing written. */
    @Test
    void aBadInputIsRefusedBeforeAGroupOpensAndNothingIsWritten() throws IOException {
        Path in = dir.resolve("in.safetensors");
        Path out = dir.resolve("out.safetensors");
        String lseF16 = "{\"partial_o.0\":{\"dtype\":\"BF16\",\"shape\":[1,1,1,8],\"data_offsets\":[0,16]},"
                + "\"partial_lse.0\":{\"dtype\":\"F16\",\"shape\":[1,1,1],\"data_offsets\":[16,18]}}";
        String[][] cases = {
            {"{}", "0", "holds no partial_o.<r> tensor"},
            {"{\"partial_o.0\":{\"dtype\":\"BF16\",\"shape\":[1,1,1,8],\"data_offsets\":[0,16]}}", "16",
                "tensor 'partial_lse.0' is missing"},
            {lseF16, "18", "tensor 'partial_lse.0' has dtype F16; must be F32"},
            {"{\"partial_o.0\":{\"dtype\":\"BF16\",\"shape\":[1,1,2,8],\"data_offsets\":[0,32]},"
                + "\"partial_lse.0\":{\"dtype\":\"F32\",\"shape\":[1,1,2],\"data_offsets\":[32,40]}}", "40",
                "partial_o.0 must be [T, H, 1, D] for 1 ranks; got [1, 1, 2, 8]"},
            {"{\"partial_o.0\":{\"dtype\":\"BF16\",\"shape\":[0,1,1,8],\"data_offsets\":[0,0]},"
                + "\"partial_lse.0\":{\"dtype\":\"F32\",\"shape\":[0,1,1],\"data_offsets\":[0,0]}}", "0",
                "has zero rows"},
            {"{\"partial_o.0\":{\"dtype\":\"BF16\",\"shape\":[1,1,1,8],\"data_offsets\":[0,16]},"
                + "\"partial_o.01\":{\"dtype\":\"BF16\",\"shape\":[1,1,1,8],\"data_offsets\":[16,32]},"
                + "\"partial_lse.0\":{\"dtype\":\"F32\",\"shape\":[1,1,1],\"data_offsets\":[32,36]}}", "36",
                "tensor 'partial_o.01' does not fit 2 partial_o tensors"}};
        for (String[] c : cases) {
            Files.write(in, RawSafeTensors.file(c[0], new byte[Integer.parseInt(c[1])]));
            Opener opener = new Opener();
            SafeTensorsException e = assertThrows(SafeTensorsException.class,
                    () -> ReduceFile.run(in, out, LseMode.BASE2, opener));
            assertEquals(in + ": ", e.getMessage().substring(0, in.toString().length() + 2), e.getMessage());
            assertTrue(e.getMessage().contains(c[2]), e.getMessage());
            assertEquals(List.of(), opener.specs, "no group opened");
            assertEquals(List.of(in), Files.list(dir).toList(), "nothing written");
        }
    }

    /** A group that cannot open (no GPU, say) fails the run with its own exception, and no output appears. */
    @Test
    void aGroupThatCannotOpenFailsTheRunAndNothingIsWritten() throws IOException {
        Path in = dir.resolve("in.safetensors");
        Path out = dir.resolve("out.safetensors");
        try (Arena arena = Arena.ofShared()) {
            write(in, Tensors.packed(arena, new SplittableRandom(5), 2, 1, 2, 64, DType.BF16, 1.0));
        }
        IllegalStateException cause = new IllegalStateException("no CUDA device");
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> ReduceFile.run(in, out, LseMode.BASE2, spec -> {
                    throw cause;
                }));
        assertSame(cause, e);
        assertTrue(Files.notExists(out), "nothing written");
    }

    @Test
    void theTokensAreSplitSoThatTheWorkspacesTakeAtMostHalfTheInput() {
        for (int tokens : new int[] {1, 2, 7, 64, 4096}) {
            for (int cp : new int[] {1, 2, 8, 64}) {
                int chunk = ReduceFile.tokensPerCall(tokens, 16, cp, 512, DType.BF16);
                assertTrue(chunk >= 1 && chunk <= tokens, tokens + " tokens, cp " + cp + ": " + chunk);
                long input = (long) cp * tokens * 16 * cp * 512 * 2;
                long workspaces = cp * new WorkspaceSpec(chunk, 16, cp, 512, DType.BF16).bytes();
                assertTrue(chunk == 1 || workspaces <= input / 2, tokens + " tokens, cp " + cp + ": " + workspaces
                        + " bytes of workspaces for " + input + " of input");
            }
        }
    }
}
