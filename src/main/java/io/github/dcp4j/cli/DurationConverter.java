package io.github.dcp4j.cli;

import picocli.CommandLine;

import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Parses a positive duration such as {@code 500ms}, {@code 10s} or {@code 2m}. */
final class DurationConverter implements CommandLine.ITypeConverter<Duration> {
    private static final Pattern FORMAT = Pattern.compile("(\\d+)(ms|s|m)");

    @Override
    public Duration convert(String value) {
        Matcher m = FORMAT.matcher(value.trim());
        if (!m.matches() || Long.parseLong(m.group(1)) == 0) {
            throw new CommandLine.TypeConversionException("duration must be a positive number with ms, s or m,"
                    + " e.g. 500ms or 10s; got '" + value + "'");
        }
        long n = Long.parseLong(m.group(1));
        return switch (m.group(2)) {
            case "ms" -> Duration.ofMillis(n);
            case "s" -> Duration.ofSeconds(n);
            default -> Duration.ofMinutes(n);
        };
    }
}
