package io.github.dcp4j.io;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.TensorView;

import java.io.IOException;
import java.io.OutputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SequencedMap;

/**
 * Reads and writes the safetensors format: an 8-byte little-endian header length N, N bytes of UTF-8 JSON mapping
 * each tensor name to {@code {"dtype", "shape", "data_offsets": [begin, end]}} (offsets relative to the byte buffer
 * after the header; an optional {@code "__metadata__"} string map), then the raw little-endian tensor bytes, which
 * the tensors cover exactly, without holes or overlaps.
 *
 * <p>Every malformation is a {@link SafeTensorsException} that says what is wrong and where.
 */
public final class SafeTensors {
    private SafeTensors() {
    }

    /**
     * Largest header this reader accepts: below the format's own 100 MB limit, since a header of the op's tensors is
     * a few hundred bytes and a larger one is read whole into memory before it can be checked.
     */
    static final long MAX_HEADER_BYTES = 16L << 20;
    private static final String METADATA = "__metadata__";
    private static final ObjectMapper JSON = new ObjectMapper()
            .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

    /** Bytes per element of every safetensors dtype, so files holding other tensors too can be checked. */
    private static final Map<String, Integer> ELEMENT_BYTES = Map.ofEntries(
            Map.entry("BOOL", 1), Map.entry("U8", 1), Map.entry("I8", 1), Map.entry("F8_E4M3", 1),
            Map.entry("F8_E5M2", 1), Map.entry("I16", 2), Map.entry("U16", 2), Map.entry("F16", 2),
            Map.entry("BF16", 2), Map.entry("I32", 4), Map.entry("U32", 4), Map.entry("F32", 4),
            Map.entry("I64", 8), Map.entry("U64", 8), Map.entry("F64", 8));

    /**
     * One tensor entry of a header.
     *
     * @param name  the tensor's name
     * @param dtype its dtype string as the header has it
     * @param shape its sizes (defensively copied)
     * @param begin the first byte of its data, from the start of the data section
     * @param end   one past its last byte
     */
    public record Entry(String name, String dtype, long[] shape, long begin, long end) {
        /** An entry, its shape copied. */
        public Entry {
            shape = shape.clone();
        }

        /** {@return a copy of the sizes} */
        @Override
        public long[] shape() {
            return shape.clone();
        }
    }

    /**
     * What a file holds: every entry of its header, and a view of each tensor whose dtype the op knows (F16, BF16,
     * F32), in header order.
     *
     * @param entries every entry of the header, in order
     * @param tensors the tensors read, by name, in header order
     */
    public record Contents(List<Entry> entries, SequencedMap<String, TensorView> tensors) {
        /** The contents, both collections copied (unmodifiable). */
        public Contents {
            entries = List.copyOf(entries);
            tensors = java.util.Collections.unmodifiableSequencedMap(new LinkedHashMap<>(tensors));
        }

        /**
         * The entry named {@code name}.
         *
         * @param name a tensor's name
         * @return its entry, or null where there is none
         */
        public Entry entry(String name) {
            return entries.stream().filter(e -> e.name().equals(name)).findFirst().orElse(null);
        }
    }

    /**
     * Reads {@code path} whole: every entry is checked, and the tensors whose dtype the op knows are copied into
     * fresh 128-byte-aligned native memory of {@code arena}.
     *
     * @param path  the file
     * @param arena where the tensors' memory comes from
     * @return the entries and the tensors read
     * @throws IOException where the file cannot be read
     * @throws SafeTensorsException where it is malformed, saying what and where
     */
    public static Contents read(Path path, Arena arena) throws IOException {
        if (!Files.isRegularFile(path)) {
            throw new SafeTensorsException(path + ": " + (Files.exists(path) ? "not a regular file" : "no such file"));
        }
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ); Arena mapping = Arena.ofConfined()) {
            long size = ch.size();
            if (size < Long.BYTES) {
                throw new SafeTensorsException(path + ": " + size + " bytes is too short for a safetensors file"
                        + " (it starts with an 8-byte header length)");
            }
            MemorySegment file = ch.map(FileChannel.MapMode.READ_ONLY, 0, size, mapping);
            long headerLength = file.get(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 0);
            if (headerLength <= 0 || headerLength > MAX_HEADER_BYTES || headerLength > size - Long.BYTES) {
                throw new SafeTensorsException(path + ": header length " + Long.toUnsignedString(headerLength)
                        + " must be in [1, " + Math.min(MAX_HEADER_BYTES, size - Long.BYTES) + "] for a file of "
                        + size + " bytes");
            }
            byte[] header = file.asSlice(Long.BYTES, headerLength).toArray(ValueLayout.JAVA_BYTE);
            long dataStart = Long.BYTES + headerLength;
            List<Entry> entries = parseHeader(path, header, size - dataStart);
            SequencedMap<String, TensorView> tensors = new LinkedHashMap<>();
            for (Entry e : entries) {
                DType dtype = DType.fromSafetensorsName(e.dtype());
                if (dtype == null) {
                    continue;
                }
                long bytes = e.end() - e.begin();
                MemorySegment copy = arena.allocate(Math.max(1, bytes), TensorView.ALLOCATION_ALIGNMENT);
                MemorySegment.copy(file, dataStart + e.begin(), copy, 0, bytes);
                tensors.put(e.name(), TensorView.contiguous(copy, dtype, e.shape()));
            }
            return new Contents(entries, tensors);
        }
    }

    /** The entries of a header, each checked, sorted by offset, covering {@code dataBytes} exactly. */
    static List<Entry> parseHeader(Path path, byte[] header, long dataBytes) {
        JsonNode root;
        try {
            root = JSON.readTree(StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(header)).toString());
        } catch (CharacterCodingException e) {
            throw new SafeTensorsException(path + ": header is not valid UTF-8");
        } catch (JsonProcessingException e) {
            throw new SafeTensorsException(path + ": header is not valid JSON: " + e.getOriginalMessage());
        }
        if (root == null || !root.isObject()) {
            throw new SafeTensorsException(path + ": header must be a JSON object");
        }
        List<Entry> entries = new ArrayList<>();
        for (Map.Entry<String, JsonNode> field : root.properties()) {
            if (field.getKey().equals(METADATA)) {
                requireMetadata(path, field.getValue());
                continue;
            }
            entries.add(parseEntry(path, field.getKey(), field.getValue()));
        }
        List<Entry> byOffset = new ArrayList<>(entries);
        // by begin, then end: a zero-size tensor at a boundary comes before the tensor that starts there
        byOffset.sort(Comparator.comparingLong(Entry::begin).thenComparingLong(Entry::end));
        long expected = 0;
        for (Entry e : byOffset) {
            if (e.begin() != expected) {
                throw new SafeTensorsException(path + ": tensor '" + e.name() + "' starts at byte " + e.begin()
                        + " of the data; expected " + expected + " (tensors must cover the data without holes or"
                        + " overlaps)");
            }
            expected = e.end();
        }
        if (expected != dataBytes) {
            throw new SafeTensorsException(path + ": tensors cover " + expected + " bytes of data; the file holds "
                    + dataBytes);
        }
        return entries;
    }

    private static void requireMetadata(Path path, JsonNode metadata) {
        if (!metadata.isObject()) {
            throw new SafeTensorsException(path + ": __metadata__ must be an object of strings");
        }
        for (JsonNode v : metadata) {
            if (!v.isTextual()) {
                throw new SafeTensorsException(path + ": __metadata__ must be an object of strings");
            }
        }
    }

    private static Entry parseEntry(Path path, String name, JsonNode node) {
        String where = path + ": tensor '" + name + "'";
        if (!node.isObject()) {
            throw new SafeTensorsException(where + " must be an object with dtype, shape and data_offsets");
        }
        JsonNode dtypeNode = node.get("dtype");
        JsonNode shapeNode = node.get("shape");
        JsonNode offsetsNode = node.get("data_offsets");
        if (dtypeNode == null || !dtypeNode.isTextual()) {
            throw new SafeTensorsException(where + " has no dtype string");
        }
        Integer elementBytes = ELEMENT_BYTES.get(dtypeNode.asText());
        if (elementBytes == null) {
            throw new SafeTensorsException(where + " has unknown dtype '" + dtypeNode.asText() + "'; known: "
                    + ELEMENT_BYTES.keySet().stream().sorted().toList());
        }
        if (shapeNode == null || !shapeNode.isArray()) {
            throw new SafeTensorsException(where + " has no shape array");
        }
        long[] shape = new long[shapeNode.size()];
        long elements = 1;
        for (int i = 0; i < shape.length; i++) {
            JsonNode d = shapeNode.get(i);
            if (!d.canConvertToLong() || !d.isIntegralNumber() || d.asLong() < 0) {
                throw new SafeTensorsException(where + " has shape " + shapeNode + "; sizes must be integers >= 0");
            }
            shape[i] = d.asLong();
            try {
                elements = Math.multiplyExact(elements, shape[i]);
            } catch (ArithmeticException e) {
                throw new SafeTensorsException(where + " has shape " + shapeNode + " whose size overflows");
            }
        }
        if (offsetsNode == null || !offsetsNode.isArray() || offsetsNode.size() != 2
                || !offsetsNode.get(0).isIntegralNumber() || !offsetsNode.get(1).isIntegralNumber()
                || !offsetsNode.get(0).canConvertToLong() || !offsetsNode.get(1).canConvertToLong()) {
            throw new SafeTensorsException(where + " needs data_offsets [begin, end] of two integers; got "
                    + offsetsNode);
        }
        long begin = offsetsNode.get(0).asLong();
        long end = offsetsNode.get(1).asLong();
        if (begin < 0 || end < begin) {
            throw new SafeTensorsException(where + " has data_offsets [" + begin + ", " + end
                    + "]; need 0 <= begin <= end");
        }
        long bytes;
        try {
            bytes = Math.multiplyExact(elements, (long) elementBytes);
        } catch (ArithmeticException e) {
            throw new SafeTensorsException(where + " has shape " + shapeNode + " whose byte size overflows");
        }
        if (end - begin != bytes) {
            throw new SafeTensorsException(where + " of " + dtypeNode.asText() + " shape " + Arrays.toString(shape)
                    + " needs " + bytes + " bytes; data_offsets [" + begin + ", " + end + "] give " + (end - begin));
        }
        return new Entry(name, dtypeNode.asText(), shape, begin, end);
    }

    /**
     * Writes {@code tensors} (in iteration order, each contiguous) to {@code path} atomically: the file appears
     * whole or not at all.
     *
     * @param path    the file to write (replaced where it exists)
     * @param tensors the tensors by name, in the order they are written
     * @throws IOException where the file cannot be written (nothing is left behind)
     */
    public static void write(Path path, SequencedMap<String, TensorView> tensors) throws IOException {
        for (Map.Entry<String, TensorView> e : tensors.entrySet()) {
            if (!e.getValue().isContiguous()) {
                throw new IllegalArgumentException("tensor '" + e.getKey() + "' must be contiguous to be written");
            }
        }
        ObjectNode header = JSON.createObjectNode();
        long offset = 0;
        for (Map.Entry<String, TensorView> e : tensors.entrySet()) {
            TensorView t = e.getValue();
            long bytes = t.numel() * t.dtype().bytes();
            ObjectNode node = header.putObject(e.getKey());
            node.put("dtype", t.dtype().safetensorsName());
            ArrayNode shape = node.putArray("shape");
            for (long d : t.shape()) {
                shape.add(d);
            }
            node.putArray("data_offsets").add(offset).add(offset + bytes);
            offset += bytes;
        }
        byte[] json = JSON.writeValueAsBytes(header);
        int padded = (json.length + 7) / 8 * 8;
        byte[] headerBytes = Arrays.copyOf(json, padded);
        Arrays.fill(headerBytes, json.length, padded, (byte) ' ');
        WholeFile.write(path, out -> {
            out.write(ByteBuffer.allocate(Long.BYTES).order(ByteOrder.LITTLE_ENDIAN).putLong(padded).array());
            out.write(headerBytes);
            for (TensorView t : tensors.values()) {
                writeElements(out, t);
            }
        });
    }

    private static void writeElements(OutputStream out, TensorView t) throws IOException {
        int elem = t.dtype().bytes();
        out.write(t.memory().asSlice(t.offset() * elem, t.numel() * elem).toArray(ValueLayout.JAVA_BYTE));
    }
}
