package io.github.dcp4j.cli;

import io.github.dcp4j.rendezvous.EnvironmentException;
import picocli.AutoComplete;
import picocli.CommandLine;
import picocli.CommandLine.Command;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.file.NoSuchFileException;
import java.util.Properties;
import java.util.concurrent.Callable;

/** {@code java -jar target/dcp4j.jar [subcommand]}: with no subcommand, the main job. */
@Command(name = "dcp4j", mixinStandardHelpOptions = true, versionProvider = Main.Version.class,
        description = {
            "Fused decode context-parallel all-to-all + LSE merge (LL128 protocol).",
            "",
            "Without a subcommand: the main job. It runs the op at the DeepSeek-V2 decode shape (cp 8, 16 local"
                + " heads, head_dim 512, bf16) for batch 1, 8 and 64 on the best available engine, checks every"
                + " rank against an fp64 oracle, and prints engine, batch, max relative error and microseconds"
                + " per call (median)."},
        subcommands = {WorkspaceSizeCommand.class, ReduceCommand.class, SampleCommand.class, BenchCommand.class,
            LaunchCommand.class, CheckCommand.class, SoakCommand.class, DrillCommand.class, PingCommand.class,
            PlotCommand.class,
            CommandLine.HelpCommand.class, AutoComplete.GenerateCompletion.class, ManPageCommand.class})
public final class Main implements Callable<Integer> {
    /** The command tree's root; picocli fills its options. */
    public Main() {
    }

    @CommandLine.Mixin
    MainJobCommand mainJob = new MainJobCommand();

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        return mainJob.run(spec.commandLine());
    }

    /**
     * Runs the CLI and exits with its code.
     *
     * @param args the command line
     */
    public static void main(String[] args) {
        try {
            LaunchCommand.stopWithLauncher(System.getenv(), System.err);
        } catch (EnvironmentException e) {
            System.err.println("dcp4j: error: " + e.getMessage());
            System.exit(2);
        }
        System.exit(run(args, new PrintWriter(System.out, true), new PrintWriter(System.err, true)));
    }

    /**
     * Runs the CLI with the given streams and returns its exit code.
     *
     * @param args the command line
     * @param out  where the output goes
     * @param err  where errors and progress go
     * @return 0 ok, 1 failure, 2 usage error (an option, or an environment variable that a rank needs)
     */
    public static int run(String[] args, PrintWriter out, PrintWriter err) {
        CommandLine cli = new CommandLine(new Main());
        cli.setOut(out);
        cli.setErr(err);
        cli.setExecutionExceptionHandler((e, commandLine, parseResult) -> {
            String command = commandLine == cli ? "dcp4j" : "dcp4j " + commandLine.getCommandName();
            commandLine.getErr().println(command + ": error: " + describe(e));
            if (!(e instanceof IllegalArgumentException || e instanceof IllegalStateException
                    || e instanceof IOException || e instanceof UncheckedIOException)) {
                e.printStackTrace(commandLine.getErr());
            }
            // a variable a rank needs (its message names it and how to set it) is the caller's to fix, as an option is
            return e instanceof EnvironmentException ? CommandLine.ExitCode.USAGE : 1;
        });
        return cli.execute(args);
    }

    private static String describe(Exception e) {
        if (e instanceof NoSuchFileException n) {
            return "no such file: " + n.getFile();
        }
        return e.getMessage() == null ? e.toString() : e.getMessage();
    }

    /** The version and commit the build wrote (scripts/build-info), or "(development build)" where there are none. */
    static final class Version implements CommandLine.IVersionProvider {
        static final String RESOURCE = "/io/github/dcp4j/build.properties";

        @Override
        public String[] getVersion() {
            return new String[] {describe(Main.class.getResourceAsStream(RESOURCE))};
        }

        static String describe(InputStream buildInfo) {
            if (buildInfo == null) {
                return "dcp4j (development build)";
            }
            Properties p = new Properties();
            try (InputStream in = buildInfo) {
                p.load(in);
            } catch (IOException e) {
                return "dcp4j (unreadable build information: " + e.getMessage() + ")";
            }
            return "dcp4j " + p.getProperty("version", "(no version)") + " (commit "
                    + p.getProperty("commit", "unknown") + ")";
        }
    }
}
