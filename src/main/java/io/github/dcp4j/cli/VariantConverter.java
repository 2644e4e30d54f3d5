package io.github.dcp4j.cli;

import io.github.dcp4j.op.Variant;
import picocli.CommandLine;

/** {@code --variant ll128|ll|simple|unfused|auto}. */
final class VariantConverter implements CommandLine.ITypeConverter<Variant> {
    /** The option's description, one definition for every command that takes it. */
    static final String DESCRIPTION = "Protocol variant (docs/PROTOCOL.md): ll128 (the default), ll, simple, unfused,"
            + " or auto (per call by its bytes per rank, from the crossovers measured for the GPU's architecture,"
            + " else ll128). The CPU engine runs ll128 only.";

    @Override
    public Variant convert(String value) {
        try {
            return Variant.parse(value);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.TypeConversionException(e.getMessage());
        }
    }
}
