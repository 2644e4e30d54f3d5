package io.github.dcp4j.layout;

import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Generates {@code ll128_layout.h}, the kernel's view of {@link Ll128} and {@link KernelAbi}, at build time: every
 * constant the kernel uses comes from the Java definition, so the two sides cannot drift apart.
 *
 * <p>{@code java io.github.dcp4j.layout.CudaHeader OUT.h}
 */
public final class CudaHeader {
    private CudaHeader() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: CudaHeader OUT.h");
            System.exit(2);
        }
        Path out = Path.of(args[0]);
        Files.createDirectories(out.toAbsolutePath().getParent());
        Files.writeString(out, generate());
    }

    static String generate() {
        StringBuilder h = new StringBuilder();
        h.append("// Generated from io.github.dcp4j.layout.Ll128 and KernelAbi by CudaHeader: do not edit.\n")
                .append("#pragma once\n\nnamespace dcp4j {\n\n");
        for (Field f : Ll128.class.getDeclaredFields()) {
            int m = f.getModifiers();
            if (!Modifier.isStatic(m) || !Modifier.isPublic(m) || !Modifier.isFinal(m)) {
                continue;
            }
            try {
                Object v = f.get(null);
                if (v instanceof Integer i) {
                    h.append("constexpr int k").append(camel(f.getName())).append(" = ").append(i).append(";\n");
                } else if (v instanceof Long l) {
                    h.append("constexpr unsigned long long k").append(camel(f.getName())).append(" = 0x")
                            .append(Long.toHexString(l)).append("ULL;\n");
                }
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e);
            }
        }
        h.append('\n');
        struct(h, "RankArgs", KernelAbi.RANK_ARGS);
        struct(h, "LaunchArgs", KernelAbi.LAUNCH_ARGS);
        h.append("}  // namespace dcp4j\n");
        return h.toString();
    }

    private static void struct(StringBuilder h, String name, List<KernelAbi.Field> fields) {
        h.append("struct ").append(name).append(" {\n");
        for (KernelAbi.Field f : fields) {
            h.append("    ").append(f.cType()).append(' ').append(f.name()).append(";\n");
        }
        h.append("};\n");
        h.append("static_assert(sizeof(").append(name).append(") == ").append(KernelAbi.size(fields))
                .append(", \"").append(name).append(" size\");\n");
        for (KernelAbi.Field f : fields) {
            h.append("static_assert(__builtin_offsetof(").append(name).append(", ").append(f.name()).append(") == ")
                    .append(KernelAbi.offset(fields, f.name())).append(", \"").append(name).append('.')
                    .append(f.name()).append("\");\n");
        }
        h.append('\n');
    }

    /** MAX_RANKS -> MaxRanks. */
    private static String camel(String constant) {
        StringBuilder b = new StringBuilder();
        for (String part : constant.toLowerCase().split("_")) {
            b.append(Character.toUpperCase(part.charAt(0))).append(part.substring(1));
        }
        return b.toString();
    }
}
