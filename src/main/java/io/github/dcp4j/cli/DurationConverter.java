package io.github.dcp4j.cli;

import picocli.CommandLine;

import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Parses a positive duration of at most {@link #LONGEST} such as {@code 500ms}, {@code 10s} or {@code 2m}. */
final class DurationConverter implements CommandLine.ITypeConverter<Duration> {
    /** The longest duration taken: a day (every wait of dcp4j is bounded, and its bound a kernel's nanosecond count). */
    static final Duration LONGEST = Duration.ofDays(1);
    private static final Pattern FORMAT = Pattern.compile("(\\d{1,12})(ms|s|m)");

    @Override
    public Duration convert(String value) {
        Matcher m = FORMAT.matcher(value.trim());
        Duration d = null;
        if (m.matches()) {
            long n = Long.parseLong(m.group(1));
            d = switch (m.group(2)) {
                case "ms" -> Duration.ofMillis(n);
                case "s" -> Duration.ofSeconds(n);
                default -> Duration.ofMinutes(n);
            };
        }
        if (d == null || d.isZero() || d.compareTo(LONGEST) > 0) {
            throw new CommandLine.TypeConversionException("duration must be a positive number with ms, s or m, at"
                    + " most " + LONGEST.toHours() + " hours, e.g. 500ms or 10s; got '" + value + "'");
        }
        return d;
    }
}
