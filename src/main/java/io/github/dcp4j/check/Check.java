package io.github.dcp4j.check;

import java.util.Locale;

/**
 * One check of one rank (public accessors: it is also the JSON's shape). Output checks give the relative error
 * against fp64 and the elements that differ from the CPU engine; the others (counters, refusals) NaN and 0.
 *
 * @param rank              the rank that made the check
 * @param check             what was checked, as printed
 * @param passed            whether it passed
 * @param relativeError     the output's relative error (L2) against the fp64 oracle, or NaN
 * @param elementsDiffering the output's elements whose bits differ from the CPU engine's, or 0
 * @param elements          the output's elements, or 0
 */
public record Check(int rank, String check, boolean passed, double relativeError, long elementsDiffering,
                    long elements) {
    /** The header line of the checks as CSV. */
    public static final String CSV_HEADER = "rank,check,passed,rel_err,elements_differing,elements";

    /** {@return this check as one CSV line, the name quoted} */
    public String csvLine() {
        return String.format(Locale.ROOT, "%d,\"%s\",%b,%.6e,%d,%d", rank, check.replace("\"", "\"\""), passed,
                relativeError, elementsDiffering, elements);
    }
}
