package io.github.dcp4j.cli;

import io.github.dcp4j.Fifos;
import io.github.dcp4j.Tensors;
import io.github.dcp4j.io.RawSafeTensors;
import io.github.dcp4j.io.SafeTensors;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.reference.Fp64Oracle;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.foreign.Arena;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.SequencedMap;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

class CliTest {
    @TempDir
    Path dir;

    record Result(int exitCode, String out, String err) {
    }

    static Result run(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int code = Main.run(args, new PrintWriter(out, true), new PrintWriter(err, true));
        return new Result(code, out.toString(), err.toString());
    }

    @Test
    void workspaceSizePrintsTheByteCountAloneOnItsLine() {
        Result r = run("workspace-size", "--max-tokens", "8", "--local-heads", "2", "--cp", "4", "--head-dim", "128",
                "--dtype", "bf16");
        assertEquals(0, r.exitCode(), r.err());
        assertEquals("51328" + System.lineSeparator(), r.out());
    }

    @Test
    void workspaceSizeRejectsBadArgumentsWithAMessage() {
        Result r = run("workspace-size", "--max-tokens", "8", "--local-heads", "2", "--cp", "65", "--head-dim", "128",
                "--dtype", "bf16");
        assertEquals(2, r.exitCode(), "a usage error");
        assertTrue(r.err().contains("cp_size must be in [1, 64]; got 65 (--max-tokens 8 --local-heads 2 --cp 65"
                + " --head-dim 128)"), r.err());
        Result dtype = run("workspace-size", "--max-tokens", "8", "--local-heads", "2", "--cp", "4", "--head-dim",
                "128", "--dtype", "fp32");
        assertEquals(2, dtype.exitCode(), "a usage error");
        assertTrue(dtype.err().contains("dtype must be bf16 or fp16; got 'fp32'"), dtype.err());
        Result missing = run("workspace-size", "--max-tokens", "8");
        assertEquals(2, missing.exitCode());
        assertTrue(missing.err().contains("Missing required options"), missing.err());
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "workspace-size", "reduce", "bench"})
    void everyCommandHasHelp(String command) {
        Result r = command.isEmpty() ? run("--help") : run(command, "--help");
        assertEquals(0, r.exitCode(), r.err());
        assertTrue(r.out().contains("Usage: dcp4j" + (command.isEmpty() ? "" : " " + command)), r.out());
    }

    @Test
    void mainJobPrintsAVerifiedTable() {
        Result r = run("--batches", "1,2", "--seconds", "0.05");
        assertEquals(0, r.exitCode(), r.err());
        String[] lines = r.out().strip().split("\\R");
        assertEquals(3, lines.length, r.out());
        assertTrue(lines[0].matches("engine\\s+variant\\s+batch\\s+max rel err\\s+us/call \\(med\\)\\s+calls"),
                lines[0]);
        for (int i = 1; i < 3; i++) {
            String[] cells = lines[i].trim().split("\\s+");
            assertEquals("cpu", cells[0]);
            assertEquals("ll128", cells[1]);
            assertEquals(String.valueOf(i), cells[2]);
            double err = Double.parseDouble(cells[3]);
            assertTrue(err > 0 && err < 1e-2, "bf16 rounding shows, within tolerance: " + err);
            assertTrue(Double.parseDouble(cells[4]) > 0);
        }
        assertTrue(r.err().contains("engine: cpu"), r.err());
        assertTrue(r.err().contains("matches the fp64 oracle"), r.err());
    }

    /** Writes a reduce input: partial_o.r and partial_lse.r for every rank, with empty, NaN and +inf rows. */
    static Tensors.Group writeInput(Path file, Arena arena, int tokens, int heads, int cp, int headDim, DType dtype,
                                    long seed) throws IOException {
        Tensors.Group g = Tensors.packed(arena, new SplittableRandom(seed), tokens, heads, cp, headDim, dtype, 4.0);
        for (int r = 0; r < cp; r++) {
            Tensors.setLseRow(g, r, 0, 0, Float.NEGATIVE_INFINITY);
        }
        if (tokens > 1) {
            Tensors.setLseRow(g, 0, 1, 0, Float.NaN);
            Tensors.setLseRow(g, cp - 1, 1, heads - 1, Float.POSITIVE_INFINITY);
        }
        SequencedMap<String, TensorView> m = new LinkedHashMap<>();
        for (int r = 0; r < cp; r++) {
            m.put("partial_o." + r, g.partialO().get(r));
            m.put("partial_lse." + r, g.partialLse().get(r));
        }
        SafeTensors.write(file, m);
        return g;
    }

    @ParameterizedTest(name = "cp {0} {1} {2}")
    @CsvSource({"1,BF16,base2", "2,FP16,basee", "4,BF16,basee", "8,FP16,base2", "64,BF16,base2"})
    void reduceMatchesTheExactMergeForEveryRank(int cp, DType dtype, String mode) throws IOException {
        Path in = dir.resolve("in.safetensors");
        Path out = dir.resolve("out.safetensors");
        try (Arena arena = Arena.ofShared()) {
            Tensors.Group g = writeInput(in, arena, 3, 2, cp, 64, dtype, cp);
            Result r = run("reduce", "--input", in.toString(), "--output", out.toString(), "--lse-mode", mode);
            assertEquals(0, r.exitCode(), r.err());
            SafeTensors.Contents result = SafeTensors.read(out, arena);
            assertEquals(cp, result.tensors().size());
            for (int rank = 0; rank < cp; rank++) {
                TensorView o = result.tensors().get("out." + rank);
                assertEquals(dtype, o.dtype());
                assertArrayEquals(new long[] {6, 64}, o.shape());
                assertArrayEquals(Tensors.exact(arena, g, rank, LseMode.parse(mode)), Tensors.bits(o),
                        "rank " + rank);
            }
        }
    }

    private void rejectedFile(byte[] content, String mention) throws IOException {
        Path in = dir.resolve("in.safetensors");
        Path out = dir.resolve("out.safetensors");
        Files.write(in, content);
        Result r = run("reduce", "--input", in.toString(), "--output", out.toString());
        assertEquals(1, r.exitCode(), r.err());
        assertTrue(r.err().contains(mention), "'" + r.err() + "' should mention '" + mention + "'");
        assertFalse(r.err().contains("\tat "), "a clear message, no stack trace: " + r.err());
        assertEquals(List.of(in), Files.list(dir).toList(), "no output file is left behind");
    }

    @Test
    void reduceRejectsAFileThatIsNotSafetensors() throws IOException {
        rejectedFile("hello, this is not a tensor file".getBytes(), "header length");
    }

    @Test
    void reduceRejectsATruncatedFile() throws IOException {
        Path tmp = dir.resolve("whole.bin");
        try (Arena arena = Arena.ofShared()) {
            writeInput(tmp, arena, 2, 2, 2, 64, DType.BF16, 1);
        }
        byte[] whole = Files.readAllBytes(tmp);
        Files.delete(tmp);
        rejectedFile(java.util.Arrays.copyOf(whole, whole.length - 10), "tensors cover");
    }

    @Test
    void reduceRejectsMissingTensors() throws IOException {
        rejectedFile(RawSafeTensors.file(
                "{\"partial_o.0\":{\"dtype\":\"BF16\",\"shape\":[1,1,1,8],\"data_offsets\":[0,16]}}", new byte[16]),
                "tensor 'partial_lse.0' is missing");
        rejectedFile(RawSafeTensors.file("{}", new byte[0]), "no partial_o.<r> tensor");
    }

    @Test
    void reduceRejectsARankOutsideTheGroup() throws IOException {
        rejectedFile(RawSafeTensors.file(
                "{\"partial_o.1\":{\"dtype\":\"BF16\",\"shape\":[1,1,1,8],\"data_offsets\":[0,16]},"
                        + "\"partial_lse.0\":{\"dtype\":\"F32\",\"shape\":[1,1,1],\"data_offsets\":[16,20]}}",
                new byte[20]), "ranks must be numbered 0..0");
    }

    @Test
    void reduceRejectsWrongDtypes() throws IOException {
        rejectedFile(RawSafeTensors.file(
                "{\"partial_o.0\":{\"dtype\":\"BF16\",\"shape\":[1,1,1,8],\"data_offsets\":[0,16]},"
                        + "\"partial_lse.0\":{\"dtype\":\"F16\",\"shape\":[1,1,1],\"data_offsets\":[16,18]}}",
                new byte[18]), "'partial_lse.0' has dtype F16; must be F32");
        rejectedFile(RawSafeTensors.file(
                "{\"partial_o.0\":{\"dtype\":\"I16\",\"shape\":[1,1,1,8],\"data_offsets\":[0,16]},"
                        + "\"partial_lse.0\":{\"dtype\":\"F32\",\"shape\":[1,1,1],\"data_offsets\":[16,20]}}",
                new byte[20]), "'partial_o.0' has dtype I16; must be F16 or BF16");
    }

    @Test
    void reduceRejectsRanksThatDisagree() throws IOException {
        rejectedFile(RawSafeTensors.file(
                "{\"partial_o.0\":{\"dtype\":\"BF16\",\"shape\":[1,1,2,8],\"data_offsets\":[0,32]},"
                        + "\"partial_o.1\":{\"dtype\":\"BF16\",\"shape\":[2,1,2,8],\"data_offsets\":[32,96]},"
                        + "\"partial_lse.0\":{\"dtype\":\"F32\",\"shape\":[1,1,2],\"data_offsets\":[96,104]},"
                        + "\"partial_lse.1\":{\"dtype\":\"F32\",\"shape\":[2,1,2],\"data_offsets\":[104,120]}}",
                new byte[120]), "partial_o.1 is BF16 [2, 1, 2, 8]; every rank must match partial_o.0");
    }

    @Test
    void reduceRejectsABadHeadDim() throws IOException {
        rejectedFile(RawSafeTensors.file(
                "{\"partial_o.0\":{\"dtype\":\"BF16\",\"shape\":[1,1,1,7],\"data_offsets\":[0,14]},"
                        + "\"partial_lse.0\":{\"dtype\":\"F32\",\"shape\":[1,1,1],\"data_offsets\":[14,18]}}",
                new byte[18]), "multiple of 16 bytes");
    }

    /** The output named as the input, directly or through another spelling of its path: refused, input intact. */
    @Test
    void reduceRefusesToOverwriteItsInput() throws IOException {
        Path in = dir.resolve("in.safetensors");
        try (Arena arena = Arena.ofShared()) {
            writeInput(in, arena, 2, 2, 2, 64, DType.BF16, 2);
        }
        byte[] before = Files.readAllBytes(in);
        for (Path out : new Path[] {in, dir.resolve(".").resolve("in.safetensors"),
            dir.resolve("x").resolve("..").resolve("in.safetensors")}) {
            Files.createDirectories(dir.resolve("x"));
            Result r = run("reduce", "--input", in.toString(), "--output", out.toString());
            assertEquals(1, r.exitCode(), r.err());
            assertTrue(r.err().contains("is the input file"), r.err());
            assertArrayEquals(before, Files.readAllBytes(in), "the input is unchanged");
        }
    }

    /** A FIFO given as the input is refused by its type at once, naming it; opening it would block for ever. */
    @Test
    void reduceRefusesAFifoAsItsInputAtOnceNamingIt() throws Exception {
        Path fifo = Fifos.make(dir.resolve("in.fifo"));
        Path out = dir.resolve("out.safetensors");
        Result r = assertTimeoutPreemptively(Duration.ofSeconds(10),
                () -> run("reduce", "--input", fifo.toString(), "--output", out.toString(), "--engine", "cpu"));
        assertEquals(1, r.exitCode(), r.err());
        assertTrue(r.err().contains(fifo + ": not a regular file"), r.err());
        assertFalse(r.err().contains("\tat "), "no stack trace: " + r.err());
        assertFalse(Files.exists(out), "nothing written");
    }

    @Test
    void reduceRejectsAMissingInputFile() {
        Result r = run("reduce", "--input", dir.resolve("nope.safetensors").toString(), "--output",
                dir.resolve("out.safetensors").toString());
        assertEquals(1, r.exitCode());
        assertTrue(r.err().contains("no such file"), r.err());
    }

    @Test
    void benchWithoutAGpuSaysWhy() {
        org.junit.jupiter.api.Assumptions.assumeFalse(io.github.dcp4j.cuda.Cuda.availability().available(),
                "a GPU is present");
        Result r = run("bench", "--modes", "layer", "--batches", "1");
        assertEquals(1, r.exitCode());
        assertTrue(r.err().contains("bench needs a GPU"), r.err());
    }

    @Test
    void soakWithoutAGpuSaysWhy() {
        org.junit.jupiter.api.Assumptions.assumeFalse(io.github.dcp4j.cuda.Cuda.availability().available(),
                "a GPU is present");
        Result r = run("soak", "--calls", "2000");
        assertEquals(1, r.exitCode());
        assertTrue(r.err().contains("soak needs a GPU"), r.err());
    }

    @Test
    void soakRefusesCallsThatAreNotWholeGraphsAndOutOfRangeShapesAsUsageErrors() {
        for (String[] args : new String[][] {{"--calls", "1500"}, {"--calls", "0"}, {"--calls", "-1000"},
                {"--calls", "2147484000"},
                {"--batch", "0"}, {"--batch", "65"}, {"--cp", "1"}, {"--cp", "9"}}) {
            Result r = run("soak", args[0], args[1]);
            assertEquals(2, r.exitCode(), String.join(" ", args) + ": " + r.err());
            assertTrue(r.err().contains(args[0] + " must be") && r.err().contains("got " + args[1]), r.err());
            assertFalse(r.err().contains("\tat "), "no stack trace: " + r.err());
        }
    }

    /**
     * Every option value a command refuses is a usage error: exit code 2, a message that names the option, the value
     * and what is allowed, no stack trace; refused before anything runs, GPU or not.
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', quoteCharacter = '"', value = {
        "bench --samples 0                      | --samples must be >= 1; got 0",
        "bench --calls -3                       | --calls must be >= 1; got -3",
        "bench --cp 0                           | --cp must be in [1, 64]; got 0",
        "bench --cp 65                          | --cp must be in [1, 64]; got 65",
        "bench --ranks gpus                     | --ranks must be one of loopback, threads, processes; got 'gpus'",
        "bench --modes fast                     | --modes must be eager, graph, graph-50 or layer; got 'fast'",
        "bench --l2 warm                        | --l2 must be hot and/or flushed; got 'warm'",
        "bench --inputs gpu                     | --inputs must be host and/or device; got 'gpu'",
        "bench --modes layer --batches 4,0      | --batches must all be >= 1; got 0",
        "bench --modes eager --plot p.png       | --plot draws the layer mode with L2 hot and host inputs",
        "bench --inputs device --ranks threads  | --inputs device is measured with --ranks loopback; got --ranks"
            + " threads",
        "check --repeat 0                       | --repeat must be >= 1; got 0",
        "check --inject crash:1                 | --inject must be wrong-cp-rank:R or skip-call:R; got 'crash:1'",
        "check --inject skip-call:99999999999   | --inject must be wrong-cp-rank:R or skip-call:R; got",
        "--batches 1,0                          | --batches must all be >= 1; got 0",
        "--seconds 0                            | --seconds must be a finite number > 0; got 0.0",
        "--seconds -1                           | --seconds must be a finite number > 0; got -1.0",
        "--seconds NaN                          | --seconds must be a finite number > 0; got NaN",
        "--seconds Infinity                     | --seconds must be a finite number > 0; got Infinity",
        "workspace-size --max-tokens 0 --local-heads 2 --cp 4 --head-dim 128 --dtype bf16 | max_tokens must be > 0;"
            + " got 0 (--max-tokens 0",
        "sample --output /nonexistent/s.safetensors --head-dim 3 | head_dim x element size must be a multiple of",
    })
    void optionValuesOutOfRangeAreUsageErrors(String commandLine, String message) {
        Result r = run(commandLine.trim().split(" +"));
        assertEquals(2, r.exitCode(), r.err());
        assertTrue(r.err().contains(message.trim()), r.err());
        assertFalse(r.err().contains("\tat "), "no stack trace: " + r.err());
        assertFalse(r.err().contains(": error: "), "a usage error, not a failure of the run: " + r.err());
        assertEquals("", r.out());
    }

    @Test
    void reduceOnTheCudaEngineWithoutAGpuSaysWhyAndWritesNothing() throws IOException {
        org.junit.jupiter.api.Assumptions.assumeFalse(io.github.dcp4j.cuda.Cuda.availability().available(),
                "a GPU is present");
        Path in = dir.resolve("in.safetensors");
        try (Arena arena = Arena.ofShared()) {
            writeInput(in, arena, 1, 1, 2, 64, DType.BF16, 3);
        }
        Path out = dir.resolve("out.safetensors");
        Result r = run("reduce", "--input", in.toString(), "--output", out.toString(), "--engine", "cuda");
        assertEquals(1, r.exitCode());
        assertTrue(r.err().contains("no CUDA device"), r.err());
        assertFalse(Files.exists(out));
    }

    @Test
    void reduceRejectsAnUnknownLseMode() throws IOException {
        Path in = dir.resolve("in.safetensors");
        try (Arena arena = Arena.ofShared()) {
            writeInput(in, arena, 1, 1, 2, 64, DType.BF16, 3);
        }
        Result r = run("reduce", "--input", in.toString(), "--output", dir.resolve("o.safetensors").toString(),
                "--lse-mode", "base10");
        assertEquals(2, r.exitCode());
        assertTrue(r.err().contains("lse_mode must be 'base2' or 'basee'; got 'base10'"), r.err());
    }

    @Test
    void versionPrintsTheVersionAndCommitTheBuildWrote() {
        // Maven's build writes the build information before the tests run (scripts/build-info)
        Result r = run("--version");
        assertEquals(0, r.exitCode(), r.err());
        assertTrue(r.out().matches("dcp4j \\S+ \\(commit [0-9a-f]{12}(\\+changes)?\\)\\R"), r.out());
        assertEquals("dcp4j 1.2.3 (commit abc)", Main.Version.describe(new java.io.ByteArrayInputStream(
                "version=1.2.3\ncommit=abc\n".getBytes(java.nio.charset.StandardCharsets.UTF_8))));
        assertEquals("dcp4j (development build)", Main.Version.describe(null));
    }

    @Test
    void theMainJobTakesAnEngineAndWritesItsTableAsCsvAndJson() throws IOException {
        Path csv = dir.resolve("main.csv");
        Path json = dir.resolve("main.json");
        Result r = run("--engine", "cpu", "--batches", "1,2", "--seconds", "0.01", "--csv", csv.toString(), "--json",
                json.toString());
        assertEquals(0, r.exitCode(), r.err());
        List<String> lines = Files.readAllLines(csv);
        assertEquals("engine,variant,batch,max_rel_err,us_per_call,calls", lines.getFirst());
        assertEquals(3, lines.size(), lines.toString());
        assertTrue(lines.get(1).startsWith("cpu,ll128,1,") && lines.get(2).startsWith("cpu,ll128,2,"),
                lines.toString());
        var rows = new com.fasterxml.jackson.databind.ObjectMapper().readTree(json.toFile());
        assertEquals(2, rows.size());
        assertEquals(2, rows.get(1).get("batch").asInt());
        assertTrue(rows.get(0).get("maxRelativeError").asDouble() < Fp64Oracle.TOLERANCE, rows.toString());
        assertTrue(!r.err().contains("generating inputs"), "no progress lines where stderr is no terminal: " + r.err());
        Result progress = run("--engine", "cpu", "--batches", "1", "--seconds", "0.01", "--progress");
        assertTrue(progress.err().contains("batch 1: generating inputs"), progress.err());
        Result bad = run("--engine", "tpu");
        assertEquals(2, bad.exitCode());
        assertTrue(bad.err().contains("tpu"), bad.err());
    }

    @Test
    void sampleWritesAnInputThatReduceTakes() throws IOException {
        Path in = dir.resolve("sample.safetensors");
        Result sample = run("sample", "--output", in.toString(), "--tokens", "3", "--local-heads", "2", "--cp", "4",
                "--head-dim", "64", "--dtype", "fp16");
        assertEquals(0, sample.exitCode(), sample.err());
        Result reduce = run("reduce", "--input", in.toString(), "--output", dir.resolve("out.safetensors").toString(),
                "--engine", "cpu");
        assertEquals(0, reduce.exitCode(), reduce.err());
        assertTrue(reduce.err().contains("4 ranks x 6 rows x head_dim 64 (fp16"), reduce.err());
        Result bad = run("sample", "--output", in.toString(), "--cp", "65");
        assertEquals(2, bad.exitCode(), "a usage error");
        assertTrue(bad.err().contains("cp_size must be in [1, 64]; got 65 (--tokens 2 --local-heads 16 --cp 65"),
                bad.err());
    }

    @Test
    void generateCompletionPrintsABashScriptForEveryCommand() {
        Result r = run("generate-completion");
        assertEquals(0, r.exitCode(), r.err());
        assertTrue(r.out().contains("complete -F") && r.out().contains("reduce") && r.out().contains("sample"),
                r.out().substring(0, Math.min(400, r.out().length())));
    }
}
