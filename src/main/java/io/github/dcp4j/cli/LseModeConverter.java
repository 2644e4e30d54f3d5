package io.github.dcp4j.cli;

import io.github.dcp4j.op.LseMode;
import picocli.CommandLine;

/** Parses {@code --lse-mode}: {@code base2} or {@code basee}. */
final class LseModeConverter implements CommandLine.ITypeConverter<LseMode> {
    @Override
    public LseMode convert(String value) {
        try {
            return LseMode.parse(value);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.TypeConversionException(e.getMessage());
        }
    }
}
