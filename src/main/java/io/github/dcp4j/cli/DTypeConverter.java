package io.github.dcp4j.cli;

import io.github.dcp4j.op.DType;
import picocli.CommandLine;

/** Parses {@code --dtype}: the op's half types only. */
final class DTypeConverter implements CommandLine.ITypeConverter<DType> {
    @Override
    public DType convert(String value) {
        if (value.equalsIgnoreCase("bf16")) {
            return DType.BF16;
        }
        if (value.equalsIgnoreCase("fp16")) {
            return DType.FP16;
        }
        throw new CommandLine.TypeConversionException("dtype must be bf16 or fp16; got '" + value + "'");
    }
}
