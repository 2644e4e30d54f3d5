package io.github.dcp4j.engine.tornado;

import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.WorkspaceSpec;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.reflect.Field;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What the Java side and the prebuilt PTX tasks must agree on: the parameter indices and status values
 * (tornado_tasks.cu's constants against MergeTasks's), the array header, and the entry names TornadoVM looks up.
 * Also how a merge is named by the system property.
 */
class TornadoTasksContractTest {
    private static final Path SOURCE = Path.of("src/tornado/cuda/tornado_tasks.cu");

    private static Map<String, Long> cudaConstants() throws IOException {
        Matcher m = Pattern.compile("constexpr int (k\\w+) = (\\d+);").matcher(Files.readString(SOURCE));
        Map<String, Long> constants = new HashMap<>();
        while (m.find()) {
            constants.put(m.group(1), Long.parseLong(m.group(2)));
        }
        return constants;
    }

    /** kPTimeoutMicros -> P_TIMEOUT_MICROS, kStatusMisaligned -> STATUS_MISALIGNED. */
    private static String javaName(String cudaName) {
        String prefix = cudaName.startsWith("kP") ? "P" : "Status";
        String rest = cudaName.substring(1 + prefix.length()).replaceAll("([a-z])([A-Z])", "$1_$2");
        return (prefix + "_" + rest).toUpperCase(Locale.ROOT);
    }

    @Test
    void everyParameterIndexAndStatusOfTheCudaTasksIsMergeTasks() throws Exception {
        Map<String, Long> cuda = cudaConstants();
        int compared = 0;
        for (Map.Entry<String, Long> e : cuda.entrySet()) {
            String name = e.getKey();
            if (name.startsWith("kP") || name.startsWith("kStatus")) {
                Field f = MergeTasks.class.getField(javaName(name));
                assertEquals(((Number) f.get(null)).longValue(), e.getValue(), name + " against " + f.getName());
                compared++;
            }
        }
        assertTrue(compared >= 11, "parameter and status constants found in " + SOURCE + ": " + compared);
        assertEquals(TornadoEngine.ARRAY_HEADER, cuda.get("kArrayHeader"));
        assertEquals((long) TornadoEngine.BLOCK_THREADS, cuda.get("kTaskBlockThreads"), "the exchange's launch bounds");
        assertEquals((long) TornadoEngine.EXCHANGE_BLOCKS_PER_SM, cuda.get("kExchangeBlocksPerSm"),
                "the exchange's launch bounds");
    }

    @Test
    void everyParameterTheCudaTasksReadIsBelowTheParameterCount() throws IOException {
        for (Map.Entry<String, Long> e : cudaConstants().entrySet()) {
            if (e.getKey().startsWith("kP")) {
                assertTrue(e.getValue() < MergeTasks.PARAMS, e.getKey() + " = " + e.getValue());
            }
        }
    }

    /**
     * The prebuilt task's arguments as the graph passes them (one array each, after TornadoVM's kernel-context
     * pointer) against the kernel's parameters, by name and in order: one more, one fewer or two swapped would give the
     * kernel the wrong arrays. Each argument's array is of the class the entry name is spelled with.
     */
    @Test
    void thePrebuiltTaskPassesTheKernelsParametersInOrder() throws IOException {
        Matcher m = Pattern.compile(TornadoEngine.Prebuilt.ENTRY + "\\(([^)]*)\\)").matcher(Files.readString(SOURCE));
        assertTrue(m.find(), "no " + TornadoEngine.Prebuilt.ENTRY + "(...) in " + SOURCE);
        String[] parameters = m.group(1).split(",");
        assertTrue(parameters[0].contains("kernel context"), "the first parameter is the context: " + parameters[0]);
        List<String> kernel = new ArrayList<>();
        for (int i = 1; i < parameters.length; i++) {
            String[] words = parameters[i].trim().split("[\\s*]+");
            kernel.add(words[words.length - 1]);
        }
        List<String> passed =
                TornadoEngine.Prebuilt.ARGUMENTS.stream().map(TornadoEngine.Prebuilt.Argument::name).toList();
        assertEquals(kernel, passed, m.group(1));
        GraphArrays arrays = new GraphArrays(new WorkspaceSpec(4, 2, 4, 64, DType.BF16));
        for (TornadoEngine.Prebuilt.Argument a : TornadoEngine.Prebuilt.ARGUMENTS) {
            assertTrue(a.type().isInstance(a.array().apply(arrays)), a.name() + " is not a " + a.type().getName());
        }
    }

    /** As TornadoVM's PTXCodeUtil.buildKernelName spells it: graph_task_entry, then each argument's array class. */
    @Test
    void entryNamesAreTornadoVmsKernelNames() {
        String name = TornadoEngine.entryName("exchange", "ll128_exchange", List.of(
                uk.ac.manchester.tornado.api.types.arrays.IntArray.class,
                uk.ac.manchester.tornado.api.types.arrays.LongArray.class));
        assertEquals("dcp4j_exchange_ll128_exchange_arrays_intarray_arrays_longarray", name);
    }

    @Test
    void aMergeIsNamedAsClassColonColonMethod() {
        MergeVariant.Named example = MergeVariant.named(ExampleMerges.class.getName() + "::elementPerThread");
        assertEquals("io.github.dcp4j.engine.tornado.ExampleMerges::elementPerThread", example.name());
        assertEquals("default", MergeVariant.standard().name());
        IllegalArgumentException malformed = assertThrows(IllegalArgumentException.class,
                () -> MergeVariant.named("elementPerThread"));
        assertTrue(malformed.getMessage().startsWith("dcp4j.tornado.merge must be 'default' or Class::method"),
                malformed.getMessage());
        IllegalArgumentException noClass = assertThrows(IllegalArgumentException.class,
                () -> MergeVariant.named("no.such.Merges::merge"));
        assertTrue(noClass.getMessage().contains("not on the class path"), noClass.getMessage());
        IllegalArgumentException wrongMethod = assertThrows(IllegalArgumentException.class,
                () -> MergeVariant.named(MergeTasks.class.getName() + "::weights"));
        assertTrue(wrongMethod.getMessage().contains("no public static void method"), wrongMethod.getMessage());
    }

    @Test
    void theSystemPropertyPicksTheMerge() {
        String before = System.getProperty(MergeVariant.PROPERTY);
        try {
            System.clearProperty(MergeVariant.PROPERTY);
            assertEquals("default", MergeVariant.fromSystemProperty().name());
            System.setProperty(MergeVariant.PROPERTY, ExampleMerges.class.getName() + "::elementPerThread");
            assertEquals(ExampleMerges.class.getName() + "::elementPerThread",
                    MergeVariant.fromSystemProperty().name());
        } finally {
            if (before == null) {
                System.clearProperty(MergeVariant.PROPERTY);
            } else {
                System.setProperty(MergeVariant.PROPERTY, before);
            }
        }
    }
}
