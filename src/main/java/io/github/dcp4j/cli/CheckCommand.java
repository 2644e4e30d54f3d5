package io.github.dcp4j.cli;

import io.github.dcp4j.check.Check;
import io.github.dcp4j.check.RankCheck;
import io.github.dcp4j.engine.cuda.RankSetup;
import io.github.dcp4j.op.Variant;
import io.github.dcp4j.reference.ConformanceCases;
import io.github.dcp4j.rendezvous.LauncherEnvironment;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.Callable;

@Command(name = "check", mixinStandardHelpOptions = true,
        description = {
            "Runs the conformance cases as one rank of a multi-process group (start it with `dcp4j launch --nproc N"
                + " -- check`, or under torchrun / a scheduler with RANK, WORLD_SIZE, DCP4J_JOB_SECRET and a"
                + " rendezvous set): CUDA IPC"
                + " workspaces, cp = the group's size, and this rank's output of every call checked against the CPU"
                + " engine and the fp64 oracle on the same inputs (every rank generates the whole group's inputs from"
                + " the seed).",
            "Cases: the conformance cases the engine tests run too (NaN and +-inf LSE rows, strided views, row-count"
                + " sequences on one workspace, bf16 and fp16, base 2 and base e), then the call counter's wrap at 2^32"
                + " and CUDA-graph replays.",
            "--inject runs a fault drill instead: wrong-cp-rank:R (rank R passes a wrong cp_rank: every rank must"
                + " refuse the call before launching), skip-call:R (rank R skips one call: the others must time out"
                + " naming it, then a collective reset must make the group usable again)."})
final class CheckCommand implements Callable<Integer> {
    @Option(names = "--timeout", defaultValue = "10s", converter = DurationConverter.class,
            description = "How long a rank waits for a peer (kernel and rendezvous), default ${DEFAULT-VALUE}.")
    Duration timeout;

    @Option(names = "--repeat", defaultValue = "1",
            description = "Runs the first case's first call this many times, printing each call (for fault drills),"
                    + " default ${DEFAULT-VALUE}.")
    int repeat;

    @Option(names = "--inject", paramLabel = "FAULT:RANK",
            description = "A fault drill: wrong-cp-rank:R or skip-call:R.")
    String inject;

    @Option(names = "--variant", defaultValue = "ll128", converter = VariantConverter.class,
            paramLabel = "ll128|ll|simple|unfused|auto", description = VariantConverter.DESCRIPTION
                    + " Every rank must name the same.")
    Variant variant;

    @Option(names = "--seed", defaultValue = "" + ConformanceCases.SEED,
            description = "Seed of every case's inputs, default ${DEFAULT-VALUE}.")
    long seed;

    @Option(names = "--csv", paramLabel = "FILE", description = "Also write this rank's checks as CSV to FILE; in a"
            + " group of several ranks FILE must hold " + RANK_PLACEHOLDER + ", which becomes the rank.")
    String csv;

    @Option(names = "--json", paramLabel = "FILE", description = "Also write this rank's checks as JSON to FILE (" +
            RANK_PLACEHOLDER + " as for --csv).")
    String json;

    /** In --csv / --json, replaced by the rank, so that the ranks of a group write one file each. */
    static final String RANK_PLACEHOLDER = "{rank}";

    @Spec
    CommandSpec spec;

    /** A parsed --inject: the fault and the rank that commits it. */
    private record Injection(RankCheck.Fault fault, int rank) {
    }

    @Override
    public Integer call() {
        PrintWriter report = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        CommandLine cli = spec.commandLine();
        if (repeat < 1) {
            throw new ParameterException(cli, "--repeat must be >= 1; got " + repeat);
        }
        Injection fault = parseInject();
        if (!RankSetup.inEnvironment()) {
            throw new IllegalArgumentException("check runs as one rank of a group: start it with `dcp4j launch --nproc"
                    + " N -- check`, or set RANK, WORLD_SIZE, DCP4J_JOB_SECRET and a rendezvous (docs/DEPLOYMENT.md)");
        }
        // the options that depend on the group are checked against the launcher's numbers, before any rank joins
        LauncherEnvironment launch = LauncherEnvironment.of(System.getenv());
        if (fault != null && fault.rank() >= launch.worldSize()) {
            throw new ParameterException(cli, "--inject must name a rank in [0, " + (launch.worldSize() - 1)
                    + "] of this group of " + launch.worldSize() + "; got '" + inject + "'");
        }
        Path csvFile;
        Path jsonFile;
        try {
            csvFile = tableFile("--csv", csv, launch.rank(), launch.worldSize());
            jsonFile = tableFile("--json", json, launch.rank(), launch.worldSize());
        } catch (IllegalArgumentException e) {
            throw new ParameterException(cli, e.getMessage(), e);  // it names the option and the value
        }
        try (RankSetup setup = RankSetup.fromEnvironment(timeout, Log.to(err))) {
            RankCheck check = new RankCheck(setup.rank(), setup.worldSize(), seed, timeout, report, variant);
            try {
                if (fault != null) {
                    return check.drill(setup, fault.fault(), fault.rank());
                }
                int failures = check.run(setup, repeat);
                report.printf("rank %d: %s%n", setup.rank(), failures == 0 ? "all cases passed"
                        : failures + " check(s) FAILED");
                report.flush();
                return failures == 0 ? 0 : 1;
            } finally {
                TableFiles.write(csvFile, jsonFile, Check.CSV_HEADER, Check::csvLine, check.checks());
            }
        }
    }

    /**
     * The file rank {@code rank} of a group of {@code ranks} writes for {@code option}: {@code file} with {@link
     * #RANK_PLACEHOLDER} replaced by the rank; null where the option is not given.
     *
     * @throws IllegalArgumentException for several ranks and a name without the placeholder (they would all write
     *                                  one file)
     */
    static Path tableFile(String option, String file, int rank, int ranks) {
        if (file == null) {
            return null;
        }
        if (ranks > 1 && !file.contains(RANK_PLACEHOLDER)) {
            throw new IllegalArgumentException(option + " in a group of " + ranks + " ranks must name a file with "
                    + RANK_PLACEHOLDER + " in it (each rank writes its own); got '" + file + "'");
        }
        return Path.of(file.replace(RANK_PLACEHOLDER, Integer.toString(rank)));
    }

    private Injection parseInject() {
        if (inject == null) {
            return null;
        }
        String[] parts = inject.split(":");
        Optional<RankCheck.Fault> fault = parts.length == 2 ? RankCheck.Fault.of(parts[0]) : Optional.empty();
        if (fault.isEmpty() || !parts[1].matches("[0-9]{1,9}")) {
            throw new ParameterException(spec.commandLine(), "--inject must be wrong-cp-rank:R or skip-call:R; got '"
                    + inject + "'");
        }
        return new Injection(fault.get(), Integer.parseInt(parts[1]));
    }
}
