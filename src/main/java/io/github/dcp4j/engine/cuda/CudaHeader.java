package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.layout.FencedLayout;
import io.github.dcp4j.layout.KernelAbi;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.layout.LlLayout;
import io.github.dcp4j.op.WeightExp;

import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Generates {@code ll128_layout.h}, the kernel's view of {@link Ll128}, {@link WeightExp} and {@link KernelAbi}, at
 * build time: every constant the kernel uses comes from the Java definition, so the two sides cannot drift apart.
 * Floats are written as hexadecimal literals, so the kernel's fp32 constants are the Java ones bit for bit.
 *
 * <p>{@code java io.github.dcp4j.layout.CudaHeader OUT.h}
 */
public final class CudaHeader {
    private CudaHeader() {
    }

    /**
     * Writes the header (the build runs this before nvcc).
     *
     * @param args the header's path
     * @throws IOException where it cannot be written
     */
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
        h.append("// Generated from io.github.dcp4j.layout.Ll128, LlLayout, FencedLayout, op.WeightExp and"
                + " layout.KernelAbi by CudaHeader: do not edit.\n#pragma once\n\nnamespace dcp4j {\n\n");
        constants(h, Ll128.class, "");
        h.append('\n');
        constants(h, LlLayout.class, "Ll");
        constants(h, FencedLayout.class, "Fenced");
        h.append('\n');
        constants(h, WeightExp.class, "");
        h.append("// Taylor<k>::kValue = 1/k!, the coefficients of op.WeightExp (compile-time constants in the code)\n")
                .append("template <int K>\nstruct Taylor;\n");
        float[] taylor = WeightExp.taylorCoefficients();
        for (int k = 0; k < taylor.length; k++) {
            h.append("template <>\nstruct Taylor<").append(k).append("> {\n    static constexpr float kValue = ")
                    .append(Float.toHexString(taylor[k])).append("f;\n};\n");
        }
        h.append('\n');
        struct(h, "RankArgs", KernelAbi.RANK_ARGS);
        h.append("template <int kRanks>\nstruct LaunchArgs {\n");
        for (KernelAbi.Field f : KernelAbi.LAUNCH_FIELDS) {
            h.append("    ").append(f.cType()).append(' ').append(f.name()).append(";\n");
        }
        h.append("    unsigned char* workspaces[kMaxRanks];\n    RankArgs ranks[kRanks];\n};\n");
        for (int capacity : KernelAbi.RANK_CAPACITIES) {
            String type = "LaunchArgs<" + capacity + ">";
            h.append("static_assert(sizeof(").append(type).append(") == ").append(KernelAbi.launchArgsBytes(capacity))
                    .append(", \"").append(type).append(" size\");\n");
            for (KernelAbi.Field f : KernelAbi.LAUNCH_FIELDS) {
                offsetAssert(h, type, f.name(), KernelAbi.offset(KernelAbi.LAUNCH_FIELDS, f.name()));
            }
            offsetAssert(h, type, "workspaces", KernelAbi.workspacesOffset());
            offsetAssert(h, type, "ranks", KernelAbi.ranksOffset());
        }
        h.append("\n}  // namespace dcp4j\n");
        return h.toString();
    }

    /** Every public constant of {@code from} as {@code k<prefix><CamelName>}. */
    private static void constants(StringBuilder h, Class<?> from, String prefix) {
        for (Field f : from.getDeclaredFields()) {
            int m = f.getModifiers();
            if (!Modifier.isStatic(m) || !Modifier.isPublic(m) || !Modifier.isFinal(m)) {
                continue;
            }
            try {
                Object v = f.get(null);
                String name = "k" + prefix + camel(f.getName());
                if (v instanceof Integer i) {
                    h.append("constexpr int ").append(name).append(" = ").append(i).append(";\n");
                } else if (v instanceof Long l) {
                    h.append("constexpr unsigned long long ").append(name).append(" = 0x")
                            .append(Long.toHexString(l)).append("ULL;\n");
                } else if (v instanceof Float x) {
                    h.append("constexpr float ").append(name).append(" = ").append(Float.toHexString(x))
                            .append("f;\n");
                }
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e);
            }
        }
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
            offsetAssert(h, name, f.name(), KernelAbi.offset(fields, f.name()));
        }
        h.append('\n');
    }

    private static void offsetAssert(StringBuilder h, String type, String field, int offset) {
        h.append("static_assert(__builtin_offsetof(").append(type).append(", ").append(field).append(") == ")
                .append(offset).append(", \"").append(type).append('.').append(field).append("\");\n");
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
