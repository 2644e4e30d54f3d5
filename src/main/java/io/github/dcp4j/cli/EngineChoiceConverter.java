package io.github.dcp4j.cli;

import io.github.dcp4j.Engines;
import picocli.CommandLine;

/** {@code --engine auto|cpu|cuda|tornado}. */
final class EngineChoiceConverter implements CommandLine.ITypeConverter<Engines.Choice> {
    @Override
    public Engines.Choice convert(String value) {
        try {
            return Engines.Choice.parse(value);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.TypeConversionException(e.getMessage());
        }
    }
}
