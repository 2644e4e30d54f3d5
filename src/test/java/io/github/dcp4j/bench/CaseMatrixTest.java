package io.github.dcp4j.bench;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The benchmark's case matrix and files, without a GPU. */
class CaseMatrixTest {
    @Test
    void everyModeTimesEveryL2StateTimesEveryInputKind() {
        List<Benchmark.Case> cases = CaseMatrix.cases(List.of("eager", "layer"), List.of(1, 256), 8,
                List.of("hot", "flushed"), List.of("host", "device"));
        assertEquals(2 * 2 * (CaseMatrix.REFERENCE_SHAPES.length + 2), cases.size());
        Benchmark.Case layerDevice = cases.stream().filter(c -> c.mode() == Benchmark.Mode.LAYER && c.deviceInputs()
                && c.batch() == 256 && !c.flushL2()).findFirst().orElseThrow();
        assertEquals("strided-dev", layerDevice.inputName());
        assertEquals(CaseMatrix.LAYER_HEAD_DIM, layerDevice.headDim());
        assertEquals("packed", cases.getFirst().inputName());
    }

    @Test
    void unknownSpellingsAreRefusedNamingTheOption() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> CaseMatrix.cases(
                List.of("layer"), List.of(1), 8, List.of("hot"), List.of("gpu")));
        assertEquals("--inputs must be host and/or device; got 'gpu'", e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> CaseMatrix.cases(List.of("layer"), List.of(0), 8,
                List.of("hot"), List.of("host")));
        assertTrue(e.getMessage().contains("--batches"), e.getMessage());
    }

    @Test
    void thePeersFiguresAreReadByBatchAndComparedInLayerModeOnly(@TempDir Path dir) throws IOException {
        Path csv = dir.resolve("peer.csv");
        Files.writeString(csv, "batch,us_per_call,max_rel_err\n1,5.19,1.7e-03\n256,217.59,1.7e-03\n");
        Map<Integer, Double> peer = BenchReport.readPeer(csv);
        assertEquals(Map.of(1, 5.19, 256, 217.59), peer);
        Benchmark.Case layer = new Benchmark.Case(Benchmark.Mode.LAYER, 256, 16, 512, 8, true, false, true);
        Benchmark.Case eager = new Benchmark.Case(Benchmark.Mode.EAGER, 1, 2, 64, 8, false, false, false);
        Benchmark.Result r = new Benchmark.Result(layer, 354.3, 0.8, 219.0, 1.7e-3, Double.NaN, Double.NaN);
        assertEquals(217.59, BenchReport.peerFor(r, peer));
        assertEquals(null, BenchReport.peerFor(new Benchmark.Result(eager, 7, 3, 0.02, 1.8e-3, 3.5, 3.4), peer));
        Path out = dir.resolve("bench.csv");
        BenchReport.writeCsv(out, List.of(r), peer);
        List<String> lines = Files.readAllLines(out);
        assertEquals(2, lines.size());
        assertTrue(lines.get(1).startsWith("layer,256,16,512,8,strided-dev,hot,354.3,"), lines.get(1));
    }
}
