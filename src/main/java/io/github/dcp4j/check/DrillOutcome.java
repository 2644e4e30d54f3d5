package io.github.dcp4j.check;

import java.util.LinkedHashMap;
import java.util.Optional;
import java.util.SequencedMap;

/**
 * What one rank of a fault drill saw, as the one line it prints ({@link FaultDrill}) and the verdict reads back
 * ({@link DrillJudge}) from the launch's log: {@value #MARKER} then {@code key=value} pairs, values without
 * spaces, e.g. {@code drill-outcome: kind=skip rank=2 outcome=PeerTimeoutException source=3 elapsed_ms=5012}.
 * The keys are the constants below; a rank writes the facts, the verdict judges them.
 *
 * @param facts the pairs in the order printed
 */
public record DrillOutcome(SequencedMap<String, String> facts) {
    /** Starts an outcome line (after launch's {@code [rank r] } prefix). */
    public static final String MARKER = "drill-outcome:";
    /** The drill: kill, skip or starve. */
    public static final String KIND = "kind";
    /** The rank that printed the line; {@value #LOOPBACK_RANK} for all ranks of one loopback launch. */
    public static final String RANK = "rank";
    /** {@value #COMPLETED}, {@value #KILLING_ITSELF}, or the simple name of the exception the rank ended in. */
    public static final String OUTCOME = "outcome";
    /** The rank a timeout names as the one it waited for. */
    public static final String SOURCE = "source";
    /** From the start of the replay that failed (or the slowest replay, where all completed) to its end. */
    public static final String ELAPSED_MS = "elapsed_ms";
    /** Whether the rank's workspace was marked poisoned on the device after the failure. */
    public static final String POISONED = "poisoned";
    /** Whether a new call was refused, naming the poison, before the reset. */
    public static final String REFUSED = "refused";
    /** The outcome of one more replay of the failed graph before the reset (the status word must stay set). */
    public static final String AGAIN = "again";
    /** How long that replay took (a poisoned call does not wait). */
    public static final String AGAIN_MS = "again_ms";
    /** Whether, after the collective reset, a whole graph replay matched the CPU engine and the counter was right. */
    public static final String RECOVERED = "recovered";
    /** Whether every checked output matched the CPU engine bit for bit (where every replay completed). */
    public static final String MATCHED = "matched";
    /** Whether the victim's replay was still running on its stream when it sent itself SIGKILL. */
    public static final String IN_FLIGHT = "in_flight";
    /** The victim's CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, in the starve drill. */
    public static final String ACTIVE_THREADS = "active_threads";
    /** The blocks of each rank's launch (more than can be resident, for the starved rank). */
    public static final String BLOCKS_PER_RANK = "blocks_per_rank";

    /** The {@value #OUTCOME} of a rank whose every replay completed. */
    public static final String COMPLETED = "completed";
    /** The {@value #OUTCOME} of the kill drill's victim, printed just before it sends itself SIGKILL. */
    public static final String KILLING_ITSELF = "killing-itself";
    /** The {@value #RANK} of a loopback drill's one line, for every rank of its launch. */
    public static final String LOOPBACK_RANK = "all";

    /**
     * A new outcome.
     *
     * @param kind the drill
     * @param rank the rank that prints it, or {@value #LOOPBACK_RANK}
     * @return the outcome, its kind and rank set
     */
    public static DrillOutcome of(String kind, String rank) {
        DrillOutcome o = new DrillOutcome(new LinkedHashMap<>());
        return o.with(KIND, kind).with(RANK, rank);
    }

    /**
     * Adds one fact; a value with a space or an '=' is refused (the line would not parse back).
     *
     * @param key   one of the keys above
     * @param value its value, as {@link String#valueOf(Object)} writes it
     * @return this outcome
     */
    public DrillOutcome with(String key, Object value) {
        String v = String.valueOf(value);
        if (v.isEmpty() || v.contains(" ") || v.contains("=")) {
            throw new IllegalArgumentException("an outcome value must be one word without '='; got '" + v + "' for "
                    + key);
        }
        facts.put(key, v);
        return this;
    }

    /** {@return the line a rank prints} */
    public String line() {
        StringBuilder b = new StringBuilder(MARKER);
        facts.forEach((k, v) -> b.append(' ').append(k).append('=').append(v));
        return b.toString();
    }

    /**
     * The outcome on a line of a launch's log, wherever the marker stands on it (after launch's prefix).
     *
     * @param logLine one line of the log
     * @return the outcome, or empty where the line holds none
     * @throws IllegalArgumentException for a line with the marker and a malformed pair
     */
    public static Optional<DrillOutcome> parse(String logLine) {
        int at = logLine.indexOf(MARKER);
        if (at < 0) {
            return Optional.empty();
        }
        SequencedMap<String, String> facts = new LinkedHashMap<>();
        String rest = logLine.substring(at + MARKER.length()).strip();
        for (String pair : rest.isEmpty() ? new String[0] : rest.split(" +")) {
            int eq = pair.indexOf('=');
            if (eq <= 0 || eq == pair.length() - 1) {
                throw new IllegalArgumentException("a drill outcome holds key=value pairs; got '" + pair + "' in '"
                        + logLine + "'");
            }
            facts.put(pair.substring(0, eq), pair.substring(eq + 1));
        }
        return Optional.of(new DrillOutcome(facts));
    }

    /**
     * {@return the value of {@code key}, or empty}
     *
     * @param key one of the keys above
     */
    public Optional<String> get(String key) {
        return Optional.ofNullable(facts.get(key));
    }

    /**
     * {@return whether {@code key} is present and {@code value}}
     *
     * @param key   one of the keys above
     * @param value the value, as {@link String#valueOf(Object)} writes it
     */
    public boolean is(String key, Object value) {
        return String.valueOf(value).equals(facts.get(key));
    }

    /**
     * {@return the number at {@code key}, or empty where it is missing or not a number}
     *
     * @param key one of the keys above
     */
    public Optional<Long> number(String key) {
        String v = facts.get(key);
        return v != null && v.matches("-?[0-9]{1,18}") ? Optional.of(Long.parseLong(v)) : Optional.empty();
    }
}
