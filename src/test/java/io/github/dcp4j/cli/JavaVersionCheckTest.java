package io.github.dcp4j.cli;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class JavaVersionCheckTest {
    @Test
    void specificationVersionsOfEveryNumberingAreRead() {
        assertEquals(8, JavaVersionCheck.major("1.8"));
        assertEquals(17, JavaVersionCheck.major("17"));
        assertEquals(25, JavaVersionCheck.major("25"));
        assertEquals(26, JavaVersionCheck.major("26-ea"));
        assertEquals(0, JavaVersionCheck.major(null), "no property");
        assertEquals(0, JavaVersionCheck.major("x"), "not a number");
        assertEquals(0, JavaVersionCheck.major("99999999999"), "too long for an int");
    }

    @Test
    void anOlderJavaIsRefusedNamingItselfAndTheJavaNeeded() {
        String m = JavaVersionCheck.refusal("17", "/usr/lib/jvm/java-17");
        assertTrue(m.contains("needs Java 25"), m);
        assertTrue(m.contains("this is Java 17 (/usr/lib/jvm/java-17)"), m);
        assertTrue(JavaVersionCheck.refusal("1.8", "h").contains("this is Java 1.8"));
    }

    @Test
    void java25AndLaterRun() {
        assertNull(JavaVersionCheck.refusal("25", "h"));
        assertNull(JavaVersionCheck.refusal("26", "h"));
        assertNull(JavaVersionCheck.refusal(System.getProperty("java.specification.version"), "h"),
                "the JVM running the tests");
    }
}
