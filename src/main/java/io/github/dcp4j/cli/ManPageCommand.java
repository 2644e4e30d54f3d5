package io.github.dcp4j.cli;

import io.github.dcp4j.io.WholeFile;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;

@Command(name = "man-page", mixinStandardHelpOptions = true,
        description = "Writes the manual pages (troff, section 1) of dcp4j and of every subcommand, generated from the"
                + " same command tree as --help and the shell completion: dcp4j.1 and dcp4j-<command>.1"
                + " (read one with `man -l DIR/dcp4j-bench.1`).")
final class ManPageCommand implements Callable<Integer> {
    @Option(names = "--output", required = true, paramLabel = "DIR",
            description = "The directory to write the pages to (created where missing).")
    Path output;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        Files.createDirectories(output);
        CommandLine root = spec.root().commandLine();
        String version = String.join(" ", root.getCommandSpec().version());
        List<Path> written = new ArrayList<>();
        written.add(write(root, version));
        for (CommandLine sub : visibleSubcommands(root)) {
            written.add(write(sub, version));
        }
        PrintWriter out = spec.commandLine().getOut();
        for (Path p : written) {
            out.println(p);
        }
        out.flush();
        return 0;
    }

    /** The subcommands that --help lists (hidden ones, such as the completion script's generator, have no page). */
    static List<CommandLine> visibleSubcommands(CommandLine command) {
        return command.getSubcommands().values().stream()
                .filter(sub -> !sub.getCommandSpec().usageMessage().hidden()).toList();
    }

    /** The page's file name: dcp4j.1 for the root, dcp4j-NAME.1 for a subcommand. */
    static String fileName(CommandSpec command) {
        return pageName(command) + ".1";
    }

    private static String pageName(CommandSpec command) {
        return command.qualifiedName("-");
    }

    private Path write(CommandLine command, String version) throws IOException {
        CommandSpec c = command.getCommandSpec();
        Path file = output.resolve(fileName(c));
        String page = page(command, version);
        WholeFile.write(file, out -> out.write(page.getBytes(StandardCharsets.UTF_8)));
        return file;
    }

    /** One command's page: name, synopsis, description, options, subcommands and see-also. */
    static String page(CommandLine command, String version) {
        CommandSpec c = command.getCommandSpec();
        CommandLine.Help help = new CommandLine.Help(c, CommandLine.Help.defaultColorScheme(CommandLine.Help.Ansi.OFF));
        StringBuilder b = new StringBuilder();
        String[] description = c.usageMessage().description();
        String first = description.length == 0 ? "" : description[0];
        b.append(".TH ").append(pageName(c).toUpperCase(Locale.ROOT)).append(" 1 \"\" \"").append(text(version))
                .append("\" \"dcp4j manual\"\n");
        b.append(".SH NAME\n").append(pageName(c).replace("-", "\\-")).append(" \\- ").append(text(summary(first)))
                .append('\n');
        b.append(".SH SYNOPSIS\n.nf\n").append(text(help.synopsis(0).strip())).append("\n.fi\n");
        b.append(".SH DESCRIPTION\n");
        for (String paragraph : description) {
            b.append(paragraph.isBlank() ? ".PP\n" : text(interpolated(command, paragraph)) + "\n.PP\n");
        }
        List<OptionSpec> options = c.options().stream().filter(o -> !o.hidden()).toList();
        if (!options.isEmpty()) {
            b.append(".SH OPTIONS\n");
            for (OptionSpec o : options) {
                b.append(".TP\n.B ").append(text(String.join(", ", o.names())));
                if (o.arity().max() > 0) {
                    b.append(" \\fI").append(text(o.paramLabel())).append("\\fR");
                }
                b.append('\n');
                for (String line : o.description()) {
                    b.append(text(interpolated(command, line.replace("${DEFAULT-VALUE}",
                            String.valueOf(o.defaultValue()))))).append('\n');
                }
            }
        }
        List<CommandLine> subcommands = visibleSubcommands(command);
        if (!subcommands.isEmpty()) {
            b.append(".SH COMMANDS\n");
            for (CommandLine sub : subcommands) {
                String[] d = sub.getCommandSpec().usageMessage().description();
                b.append(".TP\n.B ").append(text(sub.getCommandName())).append('\n')
                        .append(text(summary(d.length == 0 ? "" : d[0]))).append(". See ")
                        .append(text(pageName(sub.getCommandSpec()))).append("(1).\n");
            }
        }
        b.append(".SH SEE ALSO\n");
        b.append(c.parent() == null ? "README.md and docs/ of the dcp4j repository.\n"
                : text(pageName(c.root())) + "(1)\n");
        return b.toString();
    }

    /**
     * The text with the command's variables (other than the default values, filled in above) resolved, and picocli's
     * format specifiers as the help renders them (%n a line break, %% a percent sign).
     */
    private static String interpolated(CommandLine command, String line) {
        return plain(line.replace("${COMMAND-NAME}", command.getCommandName())
                .replace("${COMMAND-FULL-NAME}", command.getCommandSpec().qualifiedName()));
    }

    private static String plain(String s) {
        return s.replace("%n", "\n").replace("%%", "%").strip();
    }

    /** The description's opening words for the NAME line: up to its first full stop, colon or parenthesis. */
    private static String summary(String description) {
        String s = plain(description);
        int end = s.length();
        for (String stop : new String[] {". ", ": ", " ("}) {
            int at = s.indexOf(stop);
            if (at >= 0 && at < end) {
                end = at;
            }
        }
        return s.substring(0, end).strip().replaceAll("\\.$", "");
    }

    /**
     * Text as troff reads it literally: backslashes escaped, hyphens as minus signs, and a line that would start with
     * a control character ('.' or ''') protected.
     */
    static String text(String s) {
        String t = s.replace("\\", "\\e").replace("-", "\\-");
        StringBuilder b = new StringBuilder();
        for (String line : t.split("\n", -1)) {
            if (!b.isEmpty()) {
                b.append('\n');
            }
            b.append(line.startsWith(".") || line.startsWith("'") ? "\\&" + line : line);
        }
        return b.toString();
    }
}
