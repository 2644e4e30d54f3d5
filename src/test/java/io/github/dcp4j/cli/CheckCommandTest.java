package io.github.dcp4j.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.github.dcp4j.check.Check;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The files `check --csv / --json` writes: one per rank, the checks as recorded. No GPU. */
class CheckCommandTest {
    @TempDir
    Path dir;

    @Test
    void eachRankOfAGroupWritesItsOwnFileAndANameWithoutTheRankIsRefused() {
        assertEquals(Path.of("out/check-3.csv"), CheckCommand.tableFile("--csv", "out/check-{rank}.csv", 3, 8));
        assertEquals(Path.of("check.json"), CheckCommand.tableFile("--json", "check.json", 0, 1));
        assertNull(CheckCommand.tableFile("--csv", null, 2, 8));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> CheckCommand.tableFile("--csv", "check.csv", 1, 2));
        assertTrue(e.getMessage().contains("--csv") && e.getMessage().contains("{rank}")
                && e.getMessage().contains("check.csv"), e.getMessage());
    }

    @Test
    void theChecksAreWrittenAsCsvWithQuotedNamesAndAsJsonByComponent() throws IOException {
        List<Check> checks = List.of(
                new Check(1, "counter wrap, call 1 of 6", true, 1.5e-3, 0, 256),
                new Check(1, "a \"quoted\" name", false, Double.NaN, 0, 0));
        Path csv = dir.resolve("check-1.csv");
        Path json = dir.resolve("check-1.json");
        TableFiles.write(csv, json, Check.CSV_HEADER, Check::csvLine, checks);
        List<String> lines = Files.readAllLines(csv);
        assertEquals(List.of(Check.CSV_HEADER,
                "1,\"counter wrap, call 1 of 6\",true,1.500000e-03,0,256",
                "1,\"a \"\"quoted\"\" name\",false,NaN,0,0"), lines);
        JsonNode rows = new ObjectMapper().readTree(json.toFile());
        assertEquals(2, rows.size());
        assertEquals("counter wrap, call 1 of 6", rows.get(0).get("check").asText());
        assertTrue(rows.get(0).get("passed").asBoolean() && !rows.get(1).get("passed").asBoolean());
        assertEquals(256, rows.get(0).get("elements").asLong());
        try (var left = Files.list(dir)) {
            assertEquals(2, left.count(), "no temporary file left beside them");
        }
    }
}
