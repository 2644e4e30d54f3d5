package io.github.dcp4j.engine.tornado;

import io.github.dcp4j.engine.GroupProvider;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.WorkspaceSpec;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;
import java.util.ServiceLoader;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The engine factory's way to the tornado engine, in a JVM without TornadoVM's argument file (the test JVM): the
 * provider is found through ServiceLoader, says why it cannot run, and opening refuses with that reason; arguments are
 * checked before the runtime is asked.
 */
class TornadoProviderTest {
    private static final WorkspaceSpec SPEC = new WorkspaceSpec(2, 2, 4, 128, DType.BF16);

    @Test
    void theProviderIsFoundByItsNameAndSaysWhyItCannotRunHere() {
        List<GroupProvider> tornado = ServiceLoader.load(GroupProvider.class).stream().map(ServiceLoader.Provider::get)
                .filter(p -> p.engineName().equals("tornado")).toList();
        assertEquals(1, tornado.size(), "one provider named tornado");
        String why = tornado.getFirst().unavailableReason().orElseThrow();
        assertTrue(why.startsWith("TornadoVM's runtime did not start in this JVM"), why);
        assertTrue(why.contains("tornado-config/make-argfile"), why);
    }

    @Test
    void openingWithoutTheRuntimeIsRefusedWithTheReason() {
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> new TornadoProvider().open(SPEC, Duration.ofSeconds(1)));
        assertTrue(e.getMessage().startsWith("TornadoVM's runtime did not start in this JVM"), e.getMessage());
    }

    @Test
    void argumentsAreCheckedFirst() {
        TornadoEngine.Options options = new TornadoEngine.Options(MergeVariant.standard(), false, false);
        IllegalArgumentException zero = assertThrows(IllegalArgumentException.class,
                () -> TornadoEngine.open(SPEC, Duration.ZERO, options));
        assertEquals("timeout must be positive; got PT0S", zero.getMessage());
        assertThrows(NullPointerException.class, () -> TornadoEngine.open(null, Duration.ofSeconds(1), options));
        assertThrows(NullPointerException.class, () -> new TornadoEngine.Options(null, false, false));
    }
}
