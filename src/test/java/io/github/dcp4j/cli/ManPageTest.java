package io.github.dcp4j.cli;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The manual pages come from the command tree itself: one per command, every option listed, valid troff. */
class ManPageTest {
    /** The troff requests the pages use; any other line that starts with '.' would be text run as a request. */
    private static final Set<String> REQUESTS = Set.of(".TH", ".SH", ".TP", ".B", ".PP", ".nf", ".fi");

    @TempDir
    Path dir;

    @Test
    void everyCommandHasAPageListingEveryOptionOfItsTree() throws IOException {
        CliTest.Result r = CliTest.run("man-page", "--output", dir.toString());
        assertEquals(0, r.exitCode(), r.err());
        CommandLine root = new CommandLine(new Main());
        Set<String> expected = new TreeSet<>();
        expected.add("dcp4j.1");
        ManPageCommand.visibleSubcommands(root).forEach(sub -> expected.add("dcp4j-" + sub.getCommandName() + ".1"));
        try (var files = Files.list(dir)) {
            assertEquals(expected, new TreeSet<>(files.map(p -> p.getFileName().toString()).toList()));
        }
        for (CommandLine command : allCommands(root)) {
            String page = Files.readString(dir.resolve(ManPageCommand.fileName(command.getCommandSpec())));
            assertTrue(page.startsWith(".TH " + command.getCommandSpec().qualifiedName("-").toUpperCase() + " 1 "),
                    page.lines().findFirst().orElse(""));
            for (var option : command.getCommandSpec().options()) {
                assertTrue(page.contains(ManPageCommand.text(option.longestName())), command.getCommandName()
                        + " lists " + option.longestName());
            }
            assertFalse(page.contains("${"), "every variable resolved in " + command.getCommandName());
            assertFalse(page.contains("%n"), "every format specifier rendered in " + command.getCommandName());
            assertFalse(page.contains("\u001b"), "no terminal colour codes in " + command.getCommandName());
            for (String line : page.lines().toList()) {
                if (line.startsWith(".")) {
                    assertTrue(REQUESTS.contains(line.split(" ", 2)[0]), "a known request: " + line);
                }
            }
        }
    }

    @Test
    void textThatLooksLikeTroffIsWrittenLiterally() {
        assertEquals("a \\e b \\-\\-calls\n\\&.starts with a dot\n\\&'quoted", ManPageCommand.text(
                "a \\ b --calls\n.starts with a dot\n'quoted"));
    }

    private static List<CommandLine> allCommands(CommandLine root) {
        List<CommandLine> all = new java.util.ArrayList<>(List.of(root));
        all.addAll(ManPageCommand.visibleSubcommands(root));
        return all;
    }
}
