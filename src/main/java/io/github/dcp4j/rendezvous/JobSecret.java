package io.github.dcp4j.rendezvous;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.HexFormat;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The secret every participant of one run of a job shares ({@code DCP4J_JOB_SECRET}; {@code dcp4j launch} makes a
 * fresh one per launch): every rendezvous message (a TCP hello, a rendezvous file) carries an HMAC-SHA256 tag over its
 * bytes under it, and the run id derived from it, so a message of another run of the same job (a leftover file) or
 * one written without the secret is refused by name. Without a secret ({@link #NONE}) messages carry no tag and the
 * run id is empty: anyone who can reach the store or write the directory can join.
 */
final class JobSecret {
    /** Bytes of the secret {@link #generate} makes. */
    static final int GENERATED_BYTES = 32;
    /** The fewest characters a secret may have. */
    static final int MIN_CHARS = 16;
    static final JobSecret NONE = new JobSecret(null);

    private final byte[] key;
    private final String run;

    private JobSecret(byte[] key) {
        this.key = key;
        this.run = key == null ? "" : runId(key);
    }

    /** The secret {@code value} names (its UTF-8 bytes), or {@link #NONE} where it is null or empty. */
    static JobSecret of(String value) {
        if (value == null || value.isEmpty()) {
            return NONE;
        }
        if (value.length() < MIN_CHARS) {
            throw new IllegalArgumentException(Rendezvous.DCP4J_JOB_SECRET + " must have at least " + MIN_CHARS
                    + " characters; got " + value.length());
        }
        return new JobSecret(value.getBytes(StandardCharsets.UTF_8));
    }

    /** A fresh random secret, as hex: what {@code dcp4j launch} gives its ranks. */
    static String generate() {
        byte[] b = new byte[GENERATED_BYTES];
        new SecureRandom().nextBytes(b);
        return HexFormat.of().formatHex(b);
    }

    boolean present() {
        return key != null;
    }

    /** The run id every message of this run names: 16 hex digits of a hash of the secret (it does not reveal it). */
    String run() {
        return run;
    }

    /** The tag of {@code bytes[0, length)}: 32 bytes, or none without a secret. */
    byte[] tag(byte[] bytes, int length) {
        if (key == null) {
            return new byte[0];
        }
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
