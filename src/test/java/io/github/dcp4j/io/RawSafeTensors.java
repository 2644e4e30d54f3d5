package io.github.dcp4j.io;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/** Hand-made safetensors bytes, malformed on purpose where a test wants it. */
public final class RawSafeTensors {
    private RawSafeTensors() {
    }

    /** A file from raw parts: the 8-byte header length, the header text as given, then {@code data}. */
    public static byte[] file(String header, byte[] data) {
        byte[] h = header.getBytes(StandardCharsets.UTF_8);
        return ByteBuffer.allocate(8 + h.length + data.length).order(ByteOrder.LITTLE_ENDIAN)
                .putLong(h.length).put(h).put(data).array();
    }
}
