package io.github.dcp4j.io;

import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.reference.RandomInputs;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.SequencedMap;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class SafeTensorsTest {
    @TempDir
    Path dir;

    private SafeTensorsException malformed(byte[] bytes, String mention) throws IOException {
        Path p = dir.resolve("bad.safetensors");
        Files.write(p, bytes);
        try (Arena arena = Arena.ofConfined()) {
            SafeTensorsException e = assertThrows(SafeTensorsException.class, () -> SafeTensors.read(p, arena));
            assertTrue(e.getMessage().contains(mention), "'" + e.getMessage() + "' should mention '" + mention + "'");
            return e;
        }
    }

    @Test
    void writesAndReadsBackEveryDtype() throws IOException {
        Path p = dir.resolve("t.safetensors");
        try (Arena arena = Arena.ofConfined()) {
            SequencedMap<String, TensorView> in = new LinkedHashMap<>();
            SplittableRandom random = new SplittableRandom(1);
            for (DType dtype : DType.values()) {
                TensorView t = TensorView.allocate(arena, dtype, 3, 5, 7);
                RandomInputs.fillGaussian(t, random, 2.0);
                in.put("x." + dtype, t);
            }
            SafeTensors.write(p, in);
            byte[] raw = Files.readAllBytes(p);
            long headerLength = ByteBuffer.wrap(raw).order(ByteOrder.LITTLE_ENDIAN).getLong();
            assertEquals(0, (8 + headerLength) % 8, "data starts 8-byte aligned");
            String header = new String(raw, 8, (int) headerLength, StandardCharsets.UTF_8);
            assertTrue(header.contains("\"x.BF16\":{\"dtype\":\"BF16\",\"shape\":[3,5,7],\"data_offsets\":[210,420]}"),
                    header);
            SafeTensors.Contents out = SafeTensors.read(p, arena);
            assertEquals(in.keySet().stream().toList(), out.tensors().keySet().stream().toList());
            for (String name : in.keySet()) {
                TensorView a = in.get(name);
                TensorView b = out.tensors().get(name);
                assertEquals(a.dtype(), b.dtype());
                assertArrayEquals(a.shape(), b.shape());
                assertArrayEquals(a.memory().toArray(java.lang.foreign.ValueLayout.JAVA_BYTE),
                        b.memory().asSlice(0, a.memory().byteSize()).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
            }
        }
    }

    @Test
    void keepsEntriesOfOtherDtypesWithoutLoadingThem() throws IOException {
        Path p = dir.resolve("mixed.safetensors");
        Files.write(p, RawSafeTensors.file("{\"__metadata__\":{\"format\":\"pt\"},\"ids\":{\"dtype\":\"I64\",\"shape\":[2],"
                + "\"data_offsets\":[0,16]},\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[16,20]}}",
                new byte[20]));
        try (Arena arena = Arena.ofConfined()) {
            SafeTensors.Contents c = SafeTensors.read(p, arena);
            assertEquals(2, c.entries().size());
            assertEquals("I64", c.entry("ids").dtype());
            assertEquals(java.util.List.of("x"), c.tensors().keySet().stream().toList());
        }
    }

    @Test
    void tooShortForAHeaderLength() throws IOException {
        malformed(new byte[5], "too short");
    }

    @Test
    void headerLengthBeyondTheFile() throws IOException {
        byte[] b = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putLong(1000).array();
        malformed(b, "header length 1000");
    }

    @Test
    void negativeHeaderLength() throws IOException {
        byte[] b = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putLong(-1).array();
        malformed(b, "header length 18446744073709551615");
    }

    @Test
    void headerNotJson() throws IOException {
        malformed(RawSafeTensors.file("{not json", new byte[0]), "not valid JSON");
    }

    @Test
    void headerNotAnObject() throws IOException {
        malformed(RawSafeTensors.file("[1,2]", new byte[0]), "JSON object");
    }

    @Test
    void duplicateTensorNames() throws IOException {
        malformed(RawSafeTensors.file("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                + "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", new byte[4]), "Duplicate");
    }

    @Test
    void unknownDtype() throws IOException {
        malformed(RawSafeTensors.file("{\"x\":{\"dtype\":\"F17\",\"shape\":[1],\"data_offsets\":[0,4]}}", new byte[4]),
                "unknown dtype 'F17'");
    }

    @Test
    void missingShape() throws IOException {
        malformed(RawSafeTensors.file("{\"x\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", new byte[4]), "no shape");
    }

    @Test
    void negativeSize() throws IOException {
        malformed(RawSafeTensors.file("{\"x\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", new byte[4]),
                "sizes must be integers >= 0");
    }

    @Test
    void offsetsThatDisagreeWithTheShape() throws IOException {
        malformed(RawSafeTensors.file("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", new byte[4]),
                "needs 8 bytes");
    }

    @Test
    void aHoleInTheData() throws IOException {
        malformed(RawSafeTensors.file("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", new byte[8]),
                "starts at byte 4");
    }

    @Test
    void trailingBytesAfterTheLastTensor() throws IOException {
        malformed(RawSafeTensors.file("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", new byte[12]),
                "cover 4 bytes");
    }

    @Test
    void dataShorterThanTheHeaderSays() throws IOException {
        malformed(RawSafeTensors.file("{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", new byte[8]),
                "cover 16 bytes");
    }

    @Test
    void badDataOffsets() throws IOException {
        malformed(RawSafeTensors.file("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", new byte[4]),
                "data_offsets");
    }

    @Test
    void invalidUtf8InTheHeader() throws IOException {
        byte[] file = RawSafeTensors.file("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                new byte[4]);
        file[8 + 2] = (byte) 0xFF;  // inside the name "x": a byte that starts no UTF-8 sequence
        malformed(file, "not valid UTF-8");
    }

    @Test
    void trailingTokensAfterTheHeaderObject() throws IOException {
        malformed(RawSafeTensors.file("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} {}",
                new byte[4]), "not valid JSON");
    }

    @Test
    void spacesAfterTheHeaderObjectArePadding() throws IOException {
        Path p = dir.resolve("padded.safetensors");
        Files.write(p, RawSafeTensors.file("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}   ",
                new byte[4]));
        try (Arena arena = Arena.ofConfined()) {
            assertEquals(1, SafeTensors.read(p, arena).tensors().size());
        }
    }

    @Test
    void aByteSizeThatOverflows() throws IOException {
        // 2^62 elements fit a long; 2^62 x 4 bytes do not
        malformed(RawSafeTensors.file("{\"x\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],"
                + "\"data_offsets\":[0,0]}}", new byte[0]), "byte size overflows");
    }

    /** A zero-size tensor is accepted before, between or after the others, in whichever header order. */
    @Test
    void zeroSizeTensorsWhereverTheyStand() throws IOException {
        String x = "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}";
        String y = "\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}";
        String[] empties = {
            "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}",
            "\"e\":{\"dtype\":\"F32\",\"shape\":[2,0],\"data_offsets\":[4,4]}",
            "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}"};
        Path p = dir.resolve("empty.safetensors");
        try (Arena arena = Arena.ofConfined()) {
            for (String e : empties) {
                for (String header : new String[] {"{" + e + "," + x + "," + y + "}", "{" + x + "," + y + "," + e + "}",
                    "{" + y + "," + e + "," + x + "}"}) {
                    Files.write(p, RawSafeTensors.file(header, new byte[8]));
                    SafeTensors.Contents c = SafeTensors.read(p, arena);
                    assertEquals(0, c.tensors().get("e").numel(), header);
                    assertEquals(3, c.tensors().size(), header);
                }
            }
        }
    }

    @Test
    void aDirectoryIsNotASafetensorsFile() throws IOException {
        Path d = Files.createDirectory(dir.resolve("sub.safetensors"));
        try (Arena arena = Arena.ofConfined()) {
            SafeTensorsException e = assertThrows(SafeTensorsException.class, () -> SafeTensors.read(d, arena));
            assertTrue(e.getMessage().contains(d + ": not a regular file"), e.getMessage());
        }
    }

    /** The header length is checked against the cap before anything of the header is read. */
    @Test
    void aHeaderOverTheCap() throws IOException {
        Path p = dir.resolve("huge.safetensors");
        long length = SafeTensors.MAX_HEADER_BYTES + 8;
        try (java.io.RandomAccessFile f = new java.io.RandomAccessFile(p.toFile(), "rw")) {
            f.setLength(8 + length);  // sparse: no disk is written
            f.write(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(length).array());
        }
        try (Arena arena = Arena.ofConfined()) {
            SafeTensorsException e = assertThrows(SafeTensorsException.class, () -> SafeTensors.read(p, arena));
            assertTrue(e.getMessage().contains("must be in [1, " + SafeTensors.MAX_HEADER_BYTES + "]"),
                    e.getMessage());
        }
    }

    /** The output gets the mode any new file of this process gets (the umask's), not a temporary file's 0600. */
    @Test
    void theOutputHasTheUmasksMode() throws IOException {
        org.junit.jupiter.api.Assumptions.assumeTrue(dir.getFileSystem().supportedFileAttributeViews()
                .contains("posix"), "POSIX permissions");
        Path p = dir.resolve("out.safetensors");
        try (Arena arena = Arena.ofConfined()) {
            SequencedMap<String, TensorView> m = new LinkedHashMap<>();
            m.put("x", TensorView.allocate(arena, DType.FP32, 2));
            SafeTensors.write(p, m);
        }
        Path plain = Files.createFile(dir.resolve("plain"));
        assertEquals(Files.getPosixFilePermissions(plain), Files.getPosixFilePermissions(p));
    }

    /** A name as long as the file system allows (243 characters plus ".safetensors" = 255) is written. */
    @Test
    void theLongestLegalNameIsWritten() throws IOException {
        Path p = dir.resolve("n".repeat(243) + ".safetensors");
        try (Arena arena = Arena.ofConfined()) {
            SequencedMap<String, TensorView> m = new LinkedHashMap<>();
            m.put("x", TensorView.allocate(arena, DType.BF16, 4));
            SafeTensors.write(p, m);
            assertEquals(1, SafeTensors.read(p, arena).tensors().size());
        }
        try (var files = Files.list(dir)) {
            assertEquals(List.of(p), files.toList(), "only the output is left");
        }
    }

    @Test
    void aFailedWriteLeavesNoFile() throws IOException {
        Path p = dir.resolve("out.safetensors");
        try (Arena arena = Arena.ofConfined()) {
            TensorView t = TensorView.allocate(arena, DType.BF16, 4, 4);
            SequencedMap<String, TensorView> m = new LinkedHashMap<>();
            m.put("strided", t.permute(1, 0));
            assertThrows(IllegalArgumentException.class, () -> SafeTensors.write(p, m));
        }
        assertEquals(0, Arrays.stream(dir.toFile().listFiles()).count(), "nothing left behind");
    }
}
