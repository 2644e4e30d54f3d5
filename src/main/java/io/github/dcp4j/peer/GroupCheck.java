package io.github.dcp4j.peer;

import io.github.dcp4j.rendezvous.Rendezvous;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The checks every rank runs before any launch, collectively: each rank states what it is about to do (a
 * {@link Claim}: fields all ranks must agree on, and the problems its own local checks found), the claims are
 * exchanged, and every rank reaches the same verdict. A single rank passing a wrong cp_rank or a different shape is
 * thus refused on every rank, with a message naming the rank and the field, before any rank launches.
 */
public final class GroupCheck {
    private GroupCheck() {
    }

    /**
     * What one rank claims.
     *
     * @param fields   values every rank must agree on, by name, in a fixed order
     * @param problems what this rank's local checks refused (empty if nothing)
     */
    public record Claim(Map<String, String> fields, List<String> problems) {
        /** A claim, both collections copied (unmodifiable). */
        public Claim {
            fields = Collections.unmodifiableMap(new LinkedHashMap<>(fields));
            problems = List.copyOf(problems);
        }

        /**
         * A claim without problems.
         *
         * @param nameValue field names and values, alternating
         * @return the claim
         */
        public static Claim of(Object... nameValue) {
            if (nameValue.length % 2 != 0) {
                throw new IllegalArgumentException("name/value pairs expected; got " + nameValue.length + " items");
            }
            Map<String, String> fields = new LinkedHashMap<>();
            for (int i = 0; i < nameValue.length; i += 2) {
                fields.put(String.valueOf(nameValue[i]), String.valueOf(nameValue[i + 1]));
            }
            return new Claim(fields, List.of());
        }

        /**
         * This claim with {@code problem} added.
         *
         * @param problem what a local check refused, or null for nothing
         * @return the claim with it
         */
        public Claim withProblem(String problem) {
            if (problem == null) {
                return this;
            }
            List<String> all = new ArrayList<>(problems);
            all.add(problem);
            return new Claim(fields, all);
        }

        byte[] toBytes() {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            try (DataOutputStream out = new DataOutputStream(bytes)) {
                out.writeInt(fields.size());
                for (Map.Entry<String, String> e : fields.entrySet()) {
                    out.writeUTF(e.getKey());
                    out.writeUTF(e.getValue());
                }
                out.writeInt(problems.size());
                for (String p : problems) {
                    out.writeUTF(p);
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            return bytes.toByteArray();
        }

        static Claim fromBytes(byte[] raw) {
            try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(raw))) {
                Map<String, String> fields = new LinkedHashMap<>();
                int n = in.readInt();
                for (int i = 0; i < n; i++) {
                    fields.put(in.readUTF(), in.readUTF());
                }
                List<String> problems = new ArrayList<>();
                int m = in.readInt();
                for (int i = 0; i < m; i++) {
                    problems.add(in.readUTF());
                }
                return new Claim(fields, problems);
            } catch (IOException e) {
                throw new IllegalStateException("a rank sent a malformed group check", e);
            }
        }
    }

    /** Thrown on every rank when a rank's claim disagrees; the message names each rank and what it disagreed about. */
    public static final class MismatchException extends IllegalArgumentException {
        /** Each rank's disagreement, as the message lists them. */
        private final List<String> disagreements;

        MismatchException(String what, List<String> disagreements) {
            super(what + " refused on every rank before any launch: " + String.join("; ", disagreements));
            this.disagreements = List.copyOf(disagreements);
        }

        /** {@return each rank's disagreement, as the message lists them} */
        public List<String> disagreements() {
            return disagreements;
        }
    }

    /**
     * Exchanges {@code mine} through {@code rendezvous} under {@code key} and {@link #verify}s every rank's claim.
     *
     * @param rendezvous the group's rendezvous
     * @param key        the exchange's name, the same on every rank
     * @param what       what is checked, for the message
     * @param mine       this rank's claim
     * @throws MismatchException on every rank alike, where any rank's claim disagrees or has a problem
     */
    public static void agree(Rendezvous rendezvous, String key, String what, Claim mine) {
        Objects.requireNonNull(mine, "claim");
        List<byte[]> raw = rendezvous.allGather(key, mine.toBytes());
        List<Claim> claims = new ArrayList<>(raw.size());
        for (byte[] r : raw) {
            claims.add(Claim.fromBytes(r));
        }
        verify(what, claims);
    }

    /**
     * Refuses the group's claims (index = rank) if any rank reported a problem or any field differs between ranks.
     * A field's expected value is the one most ranks claim (the lowest such rank's on a tie); each rank that differs
     * is named. A rank that reported a problem is named for it alone (its fields may be missing).
     *
     * @param what   what is checked, for the message
     * @param claims every rank's claim, by rank
     * @throws MismatchException where any claim disagrees or has a problem
     */
    public static void verify(String what, List<Claim> claims) {
        List<String> disagreements = new ArrayList<>();
        List<Claim> sound = new ArrayList<>();
        List<Integer> soundRanks = new ArrayList<>();
        for (int r = 0; r < claims.size(); r++) {
            for (String p : claims.get(r).problems()) {
                disagreements.add("rank " + r + ": " + p);
            }
            if (claims.get(r).problems().isEmpty()) {
                sound.add(claims.get(r));
                soundRanks.add(r);
            }
        }
        List<String> names = new ArrayList<>();
        for (Claim c : sound) {
            for (String name : c.fields().keySet()) {
                if (!names.contains(name)) {
                    names.add(name);
                }
            }
        }
        for (String name : names) {
            String expected = majority(sound, name);
            List<Integer> odd = new ArrayList<>();
            for (int i = 0; i < sound.size(); i++) {
                if (!Objects.equals(sound.get(i).fields().get(name), expected)) {
                    odd.add(i);
                }
            }
            for (int i : odd) {
                disagreements.add("rank " + soundRanks.get(i) + " has " + name + " " + sound.get(i).fields().get(name)
                        + " where " + (sound.size() - odd.size()) + " other rank(s) have " + expected);
            }
        }
        if (!disagreements.isEmpty()) {
            throw new MismatchException(what, disagreements);
        }
    }

    private static String majority(List<Claim> claims, String name) {
        Map<String, Integer> counts = new HashMap<>();
        String best = claims.isEmpty() ? null : claims.getFirst().fields().get(name);
        for (Claim c : claims) {
            counts.merge(String.valueOf(c.fields().get(name)), 1, Integer::sum);
        }
        for (Claim c : claims) {
            String v = c.fields().get(name);
            if (counts.get(String.valueOf(v)) > counts.get(String.valueOf(best))) {
                best = v;
            }
        }
        return best;
    }
}
