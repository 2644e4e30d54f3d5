package io.github.dcp4j.rendezvous;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Map;
import java.util.Objects;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The secret every participant of one run of a job shares ({@code DCP4J_JOB_SECRET}), required by every rendezvous:
 * every rendezvous message (a TCP hello, a rank's part of an exchange, a rendezvous file, a value in torch's store)
 * carries an HMAC-SHA256 tag over its bytes under it and names the run id derived from it, so that a message of
 * another run of the same job (a leftover file) or one written without the secret is refused by name. {@code dcp4j
 * launch} makes a fresh one per launch ({@link #generate}); under any other launcher the user sets one.
 */
public final class JobSecret {
    /** Bytes of the secret {@link #generate} makes. */
    static final int GENERATED_BYTES = 32;
    /**
     * The fewest characters a secret may have: as many as 16 random bytes (128 bits) written in hex. Only the length
     * can be checked, not where the characters came from: a secret must come from a random source.
     */
    public static final int MIN_CHARS = 32;
    /** A shell command that sets a secret with tools every Linux has: 32 random bytes as hex. */
    static final String SHELL_COMMAND = "export " + Rendezvous.DCP4J_JOB_SECRET
            + "=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n')";

    private final byte[] key;
    private final String run;

    private JobSecret(byte[] key) {
        this.key = key;
        this.run = runId(key);
    }

    /**
     * The secret {@code value} names (its UTF-8 bytes); every rank of a run must be given the same value.
     *
     * @param value the secret, at least {@link #MIN_CHARS} characters
     * @return the secret
     * @throws IllegalArgumentException where {@code value} is shorter
     */
    public static JobSecret of(String value) {
        Objects.requireNonNull(value, "value");
        if (value.length() < MIN_CHARS) {
            throw new IllegalArgumentException("a job secret must have at least " + MIN_CHARS + " characters (16"
                    + " random bytes as hex); got " + value.length());
        }
        return new JobSecret(value.getBytes(StandardCharsets.UTF_8));
    }

    /** {@return a fresh random secret, 32 random bytes as hex: what {@code dcp4j launch} gives its ranks} */
    public static String generate() {
        byte[] b = new byte[GENERATED_BYTES];
        new SecureRandom().nextBytes(b);
        return HexFormat.of().formatHex(b);
    }

    /**
     * The secret of {@code env}'s {@code DCP4J_JOB_SECRET}, read before anything is opened: where it is not set, or
     * too short, an {@link EnvironmentException} names it, says why a rank needs it and how to set it under the
     * launcher that started this rank ({@code launch}).
     */
    static JobSecret fromEnvironment(Map<String, String> env, LauncherEnvironment launch) {
        String value = env.get(Rendezvous.DCP4J_JOB_SECRET);
        if (value != null && value.length() >= MIN_CHARS) {
            return of(value);
        }
        String what = value == null ? "is not set" : value.isEmpty() ? "is empty"
                : "has " + value.length() + " characters, fewer than the " + MIN_CHARS + " a secret needs";
        throw new EnvironmentException(Rendezvous.DCP4J_JOB_SECRET, Rendezvous.DCP4J_JOB_SECRET + " " + what
                + ": rank " + launch.rank() + " joins no group without it. Every rendezvous message is authenticated"
                + " with this secret, so that nobody who can reach the store or write the rendezvous directory can"
                + " join the group or forge a rank's message. Give every rank the same random value of at least "
                + MIN_CHARS + " characters: " + SHELL_COMMAND + " before "
                + launch.exportedBefore(Rendezvous.DCP4J_JOB_SECRET)
                + "; `dcp4j launch` makes a fresh one itself");
    }

    /** The run id every message of this run names: 16 hex digits of a hash of the secret (it does not reveal it). */
    String run() {
        return run;
    }

    /** The tag of {@code bytes[0, length)}: 32 bytes. */
    byte[] tag(byte[] bytes, int length) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(key, "HmacSHA256"));
            mac.update(bytes, 0, length);
            return mac.doFinal();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is not available in this JVM", e);
        }
    }

    /** Whether {@code tag} is the tag of {@code bytes[0, length)} (compared in constant time). */
    boolean verifies(byte[] bytes, int length, byte[] tag) {
        return MessageDigest.isEqual(tag(bytes, length), tag);
    }

    /** Names the run, never the secret. */
    @Override
    public String toString() {
        return "job secret of run " + run;
    }

    private static String runId(byte[] key) {
        try {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            sha.update("dcp4j run id\0".getBytes(StandardCharsets.UTF_8));
            byte[] h = sha.digest(key);
            return HexFormat.of().formatHex(h, 0, 8);
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("SHA-256 is not available in this JVM", e);
        }
    }
}
