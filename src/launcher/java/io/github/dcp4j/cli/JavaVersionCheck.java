package io.github.dcp4j.cli;

import java.lang.reflect.InvocationTargetException;

/**
 * The jar's entry point: compiled for Java 8, so that {@code java -jar dcp4j.jar} on an older JVM says which Java
 * dcp4j needs instead of failing with {@code UnsupportedClassVersionError}; on Java 25 or later it runs {@link Main}.
 */
public final class JavaVersionCheck {
    /** The Java release the rest of dcp4j is compiled for. */
    static final int REQUIRED = 25;

    private JavaVersionCheck() {
    }

    /**
     * Runs the command line where this JVM is recent enough, else exits with code 2 and says why.
     *
     * @param args the command line
     * @throws Throwable what the command line throws
     */
    public static void main(String[] args) throws Throwable {
        String spec = System.getProperty("java.specification.version");
        String refusal = refusal(spec, System.getProperty("java.home"));
        if (refusal != null) {
            System.err.println(refusal);
            System.exit(2);
        }
        try {
            Class.forName("io.github.dcp4j.cli.Main").getMethod("main", String[].class).invoke(null, (Object) args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }

    /**
     * The message for a JVM too old to run dcp4j, or null where it is recent enough.
     *
     * @param spec the JVM's {@code java.specification.version}: "1.8" for Java 8, then "9", "10", ...
     * @param home the JVM's {@code java.home}, named in the message
     * @return the message, or null
     */
    static String refusal(String spec, String home) {
        int major = major(spec);
        if (major >= REQUIRED) {
            return null;
        }
        return "dcp4j needs Java " + REQUIRED + " or later; this is Java " + spec + " (" + home + "). Run it with a"
                + " JDK " + REQUIRED + "'s java, e.g. $JAVA_HOME/bin/java -jar dcp4j.jar, with JAVA_HOME a JDK "
                + REQUIRED + " (in a checkout, `. scripts/use-jdk25` sets it).";
    }

    /** The major release of a {@code java.specification.version}; 0 where it is not one. */
    static int major(String spec) {
        if (spec == null) {
            return 0;
        }
        String s = spec.startsWith("1.") ? spec.substring(2) : spec;
        int end = 0;
        while (end < s.length() && Character.isDigit(s.charAt(end))) {
            end++;
        }
        return end == 0 || end > 9 ? 0 : Integer.parseInt(s.substring(0, end));
    }
}
