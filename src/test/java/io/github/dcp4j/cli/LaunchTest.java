package io.github.dcp4j.cli;

import io.github.dcp4j.LineWatcher;
import io.github.dcp4j.rendezvous.JobSecret;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@code dcp4j launch} with real child JVMs, without a GPU: the rendezvous through {@code ping}, and fail-fast. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class LaunchTest {

    record Run(int code, String out, String err) {
    }

    static Run dcp4j(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int code = Main.run(args, new PrintWriter(out, true), new PrintWriter(err, true));
        return new Run(code, out.toString(), err.toString());
    }

    @Test
    void theLaunchersDcp4jPropertiesAndNoOthersArePassedToEveryRank() {
        Properties p = new Properties();
        p.setProperty("dcp4j.gridPlan", "step=3,maxBlocks=48");
        p.setProperty("dcp4j.other", "x y");
        p.setProperty("java.io.tmpdir", "/elsewhere");
        p.setProperty("dcp4jnot", "1");
        assertEquals(List.of("-Ddcp4j.gridPlan=step=3,maxBlocks=48", "-Ddcp4j.other=x y"),
                LaunchCommand.forwardedProperties(p));
        assertEquals(List.of(), LaunchCommand.forwardedProperties(new Properties()));
    }

    @Test
    void threeJvmsMeetOverTcpWithEachOutputLinePrefixedByItsRank() {
        Run r = dcp4j("launch", "--nproc", "3", "--", "ping");
        assertEquals(0, r.code(), r.err() + r.out());
        for (int rank = 0; rank < 3; rank++) {
            assertTrue(r.out().contains("[rank " + rank + "] rank " + rank + " (pid "), r.out());
        }
        assertTrue(r.out().contains("[rank 0] group of 3 via TCP store at 127.0.0.1:"), r.out());
        assertTrue(r.err().contains("launch: all 3 rank(s) exited with 0"), r.err());
        if (!io.github.dcp4j.cuda.Cuda.availability().available()) {
            assertTrue(r.err().contains("no GPU here, so MPS does not apply") && !r.err().contains("no MPS daemon"),
                    r.err());
        }
    }

    @Test
    void ranksMayDifferFromTheStartOrderInADirectoryRendezvous() {
        Run r = dcp4j("launch", "--nproc", "3", "--rendezvous", "dir", "--rank-map", "2,0,1", "--", "ping");
        assertEquals(0, r.code(), r.err() + r.out());
        assertTrue(r.out().contains("[rank 0] group of 3 via directory "), r.out());
    }

    @Test
    void aRankThatFailsStopsTheOthersAtOnce() {
        long start = System.nanoTime();
        Run r = dcp4j("launch", "--nproc", "3", "--", "ping", "--fail-rank", "1", "--hold", "60s");
        double seconds = (System.nanoTime() - start) / 1e9;
        assertEquals(1, r.code(), r.err());
        assertTrue(r.err().contains("exited with code 3"), r.err());
        assertTrue(r.err().contains("launch: stopping the other 2 rank(s)"), r.err());
        assertTrue(seconds < 40, "stopped the holding ranks, not waited " + seconds + " s");
        assertEquals(0, ProcessHandle.current().descendants().count(), "no rank is left running");
    }

    /** A child killed from outside (as by the OOM killer): the launcher names it and stops the others. */
    @Test
    void aKilledRankIsNamedAndTheOthersAreStopped() throws Exception {
        Pattern holding = Pattern.compile("\\[rank 1] rank 1 \\(pid (\\d+)\\) holding");
        long[] victim = {-1};
        LineWatcher watcher = new LineWatcher(l -> {
            Matcher m = holding.matcher(l);
            if (m.find() && victim[0] < 0) {
                victim[0] = Long.parseLong(m.group(1));
                ProcessHandle.of(victim[0]).ifPresent(ProcessHandle::destroyForcibly);
            }
        });
        StringWriter err = new StringWriter();
        long start = System.nanoTime();
        int code = CompletableFuture.supplyAsync(() -> Main.run(new String[] {"launch", "--nproc", "3", "--", "ping",
            "--hold", "60s"}, new PrintWriter(watcher, true), new PrintWriter(err, true))).get(100, TimeUnit.SECONDS);
        double seconds = (System.nanoTime() - start) / 1e9;
        assertTrue(victim[0] > 0, "rank 1 never held: " + watcher.lines());
        assertEquals(1, code, err.toString());
        assertTrue(err.toString().contains("rank 1 (pid " + victim[0] + ") was killed by signal 9"), err.toString());
        assertTrue(err.toString().contains("stopping the other 2 rank(s)"), err.toString());
        assertTrue(seconds < 40, "stopped the holding ranks, not waited " + seconds + " s");
        assertEquals(0, ProcessHandle.current().descendants().count(), "no rank is left running");
    }

    /** The launcher killed by SIGKILL (it cannot stop its ranks then): every rank notices and stops by itself. */
    @Test
    void ranksStopWhenTheirLauncherIsKilled() throws Exception {
        Process launcher = new ProcessBuilder(LaunchCommand.javaExecutable(), "--enable-native-access=ALL-UNNAMED",
                "-cp", LaunchCommand.classPath(), Main.class.getName(), "launch", "--nproc", "2", "--", "ping",
                "--hold", "90s").redirectErrorStream(true).start();
        Pattern holding = Pattern.compile("\\[rank (\\d)] rank \\d \\(pid (\\d+)\\) holding");
        List<ProcessHandle> ranks = new ArrayList<>();
        try {
            BufferedReader lines = new BufferedReader(new InputStreamReader(launcher.getInputStream(),
                    StandardCharsets.UTF_8));
            String line;
            while (ranks.size() < 2 && (line = lines.readLine()) != null) {
                Matcher m = holding.matcher(line);
                if (m.find()) {
                    ProcessHandle.of(Long.parseLong(m.group(2))).ifPresent(ranks::add);
                }
            }
            assertEquals(2, ranks.size(), "both ranks reported holding");
            launcher.destroyForcibly().waitFor();
            for (ProcessHandle rank : ranks) {
                rank.onExit().get(30, TimeUnit.SECONDS);
                assertFalse(rank.isAlive(), "rank pid " + rank.pid() + " still runs");
            }
        } finally {
            launcher.destroyForcibly();
            ranks.forEach(ProcessHandle::destroyForcibly);
        }
    }

    /** The launcher stopped by SIGTERM (Process.destroy): it stops its ranks and removes its scratch directory. */
    @Test
    void aLauncherStoppedBySigtermStopsItsRanksAndRemovesItsDirectory() throws Exception {
        Process launcher = new ProcessBuilder(LaunchCommand.javaExecutable(), "--enable-native-access=ALL-UNNAMED",
                "-cp", LaunchCommand.classPath(), Main.class.getName(), "launch", "--nproc", "2", "--rendezvous",
                "dir", "--", "ping", "--hold", "90s").redirectErrorStream(true).start();
        Pattern holding = Pattern.compile("\\[rank (\\d)] rank \\d \\(pid (\\d+)\\) holding");
        Pattern directory = Pattern.compile("rendezvous directory (\\S+)/rendezvous;");
        List<ProcessHandle> ranks = new ArrayList<>();
        Path scratch = null;
        try {
            BufferedReader lines = new BufferedReader(new InputStreamReader(launcher.getInputStream(),
                    StandardCharsets.UTF_8));
            String line;
            while (ranks.size() < 2 && (line = lines.readLine()) != null) {
                Matcher d = directory.matcher(line);
                if (d.find()) {
                    scratch = Path.of(d.group(1));
                }
                Matcher m = holding.matcher(line);
                if (m.find()) {
                    ProcessHandle.of(Long.parseLong(m.group(2))).ifPresent(ranks::add);
                }
            }
            assertEquals(2, ranks.size(), "both ranks reported holding");
            assertTrue(scratch != null && Files.isDirectory(scratch), "the launch line names its directory");
            launcher.destroy();
            assertTrue(launcher.waitFor(30, TimeUnit.SECONDS), "the launcher ends");
            for (ProcessHandle rank : ranks) {
                assertFalse(rank.isAlive(), "rank pid " + rank.pid() + " still runs after its launcher ended");
            }
            assertFalse(Files.exists(scratch), scratch + " is left behind");
        } finally {
            launcher.destroyForcibly();
            ranks.forEach(ProcessHandle::destroyForcibly);
        }
    }

    /** Usage errors (exit code 2, the option and its value named, no stack trace) before anything starts. */
    @Test
    void badLaunchArgumentsAreRefusedBeforeAnyChildStarts() {
        for (String[] c : new String[][] {
            {"--rank-map must be a permutation of 0..2; got [0, 1, 1]", "--nproc", "3", "--rank-map", "0,1,1"},
            {"--rank-map must be a permutation of 0..1; got [0, 1, 2]", "--nproc", "2", "--rank-map", "0,1,2"},
            {"--nproc must be in [1, 64] (the most ranks a group has); got 0", "--nproc", "0"},
            {"--nproc must be in [1, 64] (the most ranks a group has); got 65", "--nproc", "65"},
            {"--rendezvous must be tcp or dir; got 'mpi'", "--nproc", "2", "--rendezvous", "mpi"},
            {"--port must be in [0, 65535]; got 65536", "--nproc", "2", "--port", "65536"},
            {"--port must be in [0, 65535]; got -1", "--nproc", "2", "--port", "-1"}}) {
            List<String> args = new ArrayList<>(List.of("launch"));
            args.addAll(List.of(c).subList(1, c.length));
            args.addAll(List.of("--", "ping"));
            Run r = dcp4j(args.toArray(String[]::new));
            assertEquals(2, r.code(), args + ": " + r.err());
            assertTrue(r.err().contains(c[0]), args + ": " + r.err());
            assertFalse(r.err().contains("\tat ") || r.err().contains("rank(s) of"), "no stack trace, no rank: "
                    + r.err());
        }
        Run nested = dcp4j("launch", "--nproc", "2", "--", "launch", "--nproc", "2", "--", "ping");
        assertEquals(2, nested.code());
        assertTrue(nested.err().contains("a launched rank cannot launch again"), nested.err());
        for (String timeout : new String[] {"99999999999999999999s", "25h", "1441m", "0s", "-1s"}) {
            Run t = dcp4j("check", "--timeout", timeout);
            assertEquals(2, t.code(), timeout + ": " + t.err());
            assertTrue(t.err().contains("at most 24 hours"), t.err());
            assertFalse(t.err().contains("\tat "), "no stack trace: " + t.err());
        }
    }

    /** A rank's launcher pid that is not a number: refused naming the variable, before anything runs. */
    @Test
    void aMalformedLauncherPidIsNamed() throws Exception {
        ProcessBuilder pb = new ProcessBuilder(LaunchCommand.javaExecutable(), "--enable-native-access=ALL-UNNAMED",
                "-cp", LaunchCommand.classPath(), Main.class.getName(), "workspace-size", "--help")
                .redirectErrorStream(true);
        pb.environment().put(LaunchCommand.DCP4J_LAUNCHER_PID, "not-a-pid");
        Process p = pb.start();
        String output = new String(p.getInputStream().readAllBytes());
        assertEquals(2, p.waitFor(), output);
        assertTrue(output.contains("DCP4J_LAUNCHER_PID must be the launcher's process id"), output);
        assertFalse(output.contains("\tat "), "no stack trace: " + output);
    }

    /**
     * {@code dcp4j ARGS} in a JVM of its own whose environment has none of a launcher's or dcp4j's variables but
     * {@code env}: its exit code and its output (stdout and stderr together).
     */
    private static Run rankProcess(Map<String, String> env, String... args) throws Exception {
        List<String> command = new ArrayList<>(List.of(LaunchCommand.javaExecutable(),
                "--enable-native-access=ALL-UNNAMED", "-cp", LaunchCommand.classPath(), Main.class.getName()));
        command.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
        pb.environment().keySet().removeIf(k -> Stream.of("DCP4J_", "RANK", "WORLD_SIZE", "LOCAL_", "MASTER_",
                "OMPI_", "PMI_", "SLURM_", "TORCHELASTIC_").anyMatch(k::startsWith));
        pb.environment().putAll(env);
        Process p = pb.start();
        String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        return new Run(p.waitFor(), output, output);
    }

    /**
     * A rank whose environment has no DCP4J_JOB_SECRET, an empty one or one too short: a usage error (exit code 2)
     * naming the variable, why a rank needs it and how to set it under its launcher, before the rank connects to the
     * store, writes the directory or looks for a GPU; no stack trace.
     */
    @Test
    void aRankWithoutASecretOrWithAShortOneIsAUsageErrorNamingTheVariable(@TempDir Path dir) throws Exception {
        try (ServerSocket store = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            String port = "" + store.getLocalPort();
            Run torchrun = rankProcess(Map.of("RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "127.0.0.1",
                    "MASTER_PORT", port), "ping");
            Run mpirun = rankProcess(Map.of("OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2", "MASTER_ADDR",
                    "127.0.0.1", "MASTER_PORT", port, "DCP4J_JOB_SECRET", "short secret"), "check");
            Run srun = rankProcess(Map.of("SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_STEP_ID", "0",
                    "DCP4J_RENDEZVOUS_DIR", dir.toString(), "DCP4J_JOB_SECRET", ""), "ping");
            for (String[] c : new String[][] {
                {torchrun.out(), "dcp4j ping: error: DCP4J_JOB_SECRET is not set: rank 1 joins no group without it",
                    "before torchrun (its workers inherit it)"},
                {mpirun.out(), "dcp4j check: error: DCP4J_JOB_SECRET has 12 characters, fewer than the 32 a secret"
                    + " needs: rank 1 joins no group without it", "before mpirun, and pass it on with `mpirun -x"
                    + " DCP4J_JOB_SECRET ...`"},
                {srun.out(), "dcp4j ping: error: DCP4J_JOB_SECRET is empty: rank 1 joins no group without it",
                    "before srun, or in the batch script"}}) {
                assertTrue(c[0].contains(c[1]) && c[0].contains("export DCP4J_JOB_SECRET=$(head -c 32 /dev/urandom |"
                        + " od -An -tx1 | tr -d ' \\n') " + c[2]) && c[0].contains("`dcp4j launch` makes a fresh one"
                        + " itself"), c[0]);
                assertFalse(c[0].contains("\tat ") || c[0].contains("needs a GPU"), "no stack trace, no GPU: " + c[0]);
            }
            assertEquals(List.of(2, 2, 2), List.of(torchrun.code(), mpirun.code(), srun.code()), "usage errors");
            store.setSoTimeout(200);
            assertThrows(SocketTimeoutException.class, store::accept, "no rank connected to the store");
            try (Stream<Path> files = Files.list(dir)) {
                assertEquals(0, files.count(), "no rank wrote the rendezvous directory");
            }
        }
    }

    /**
     * A launcher or rendezvous variable with a bad value, in a rank of each command that joins a group: a usage error
     * (exit code 2) whose message names the variable, its value and what it may be, before the rank connects to the
     * store or looks for a GPU; no stack trace. {@code environment} is {@code NAME=value} pairs separated by ';' (PORT
     * stands for a listening store's port), given with a valid secret.
     */
    @ParameterizedTest(name = "{0}: {1}")
    @CsvSource(delimiter = '|', quoteCharacter = '"', textBlock = """
        ping | RANK=x;WORLD_SIZE=2;MASTER_ADDR=127.0.0.1;MASTER_PORT=PORT | dcp4j ping: error: environment variable \
        RANK must be an integer in [0, 1] (WORLD_SIZE is 2); got 'x'
        check | RANK=0;WORLD_SIZE=0;MASTER_ADDR=127.0.0.1;MASTER_PORT=PORT | dcp4j check: error: environment variable \
        WORLD_SIZE must be an integer >= 1; got '0'
        ping | RANK=1;WORLD_SIZE=4;LOCAL_RANK=3;LOCAL_WORLD_SIZE=2;MASTER_ADDR=127.0.0.1;MASTER_PORT=PORT | dcp4j \
        ping: error: environment variable LOCAL_RANK must be an integer in [0, 1] (LOCAL_WORLD_SIZE is 2); got '3'
        drill rank --kind kill | OMPI_COMM_WORLD_RANK=1;OMPI_COMM_WORLD_SIZE=2;OMPI_COMM_WORLD_LOCAL_SIZE=3 | \
        error: environment variable OMPI_COMM_WORLD_LOCAL_SIZE must be an integer in [1, 2] (OMPI_COMM_WORLD_SIZE is \
        2); got '3'
        ping | PMI_RANK=1;PMI_SIZE=2;MPI_LOCALRANKID=one;MASTER_ADDR=127.0.0.1;MASTER_PORT=PORT | dcp4j ping: error: \
        environment variable MPI_LOCALRANKID must be an integer in [0, 1] (PMI_SIZE is 2); got 'one'
        ping | SLURM_PROCID=1;SLURM_NTASKS=2;SLURM_STEP_ID=0;SLURM_JOB_ID=7;SLURM_JOB_NODELIST=gpu[x-2] | dcp4j ping: \
        error: environment variable SLURM_JOB_NODELIST must be a SLURM host list such as node[03-05,9],gpu1; got \
        'gpu[x-2]' (range 'x')
        check | SLURM_PROCID=1;SLURM_NTASKS=2;SLURM_STEP_ID=0;SLURM_TASKS_PER_NODE=2(x);SLURM_JOB_NODELIST=localhost \
        | dcp4j check: error: environment variable SLURM_TASKS_PER_NODE must be comma-separated task counts, each n \
        or n(xk) for k nodes, such as 2(x3),1; got '2(x)' (entry '2(x)')
        ping | RANK=1;WORLD_SIZE=2;MASTER_ADDR=127.0.0.1;MASTER_PORT=port | dcp4j ping: error: environment variable \
        MASTER_PORT must be a TCP port in [1, 65535]; got 'port'
        --batches 1 | RANK=1;WORLD_SIZE=2;MASTER_ADDR=127.0.0.1;MASTER_PORT=PORT;DCP4J_MASTER_PORT=65536 | dcp4j: \
        error: environment variable DCP4J_MASTER_PORT must be a TCP port in [1, 65535]; got '65536'
        bench --ranks processes | RANK=1;WORLD_SIZE=2;MASTER_ADDR=local host;MASTER_PORT=PORT | dcp4j bench: error: \
        environment variable MASTER_ADDR must be a host name or an IP address (1 to 253 of letters, digits, '.', \
        '-', '_', ':', '%', '[', ']'); got 'local host'
        soak | RANK=1;WORLD_SIZE=2;MASTER_ADDR=127.0.0.1;MASTER_PORT=PORT;TORCHELASTIC_USE_AGENT_STORE=yes | dcp4j \
        soak: error: environment variable TORCHELASTIC_USE_AGENT_STORE must be True or False (torchrun sets it); got \
        'yes'
        ping | RANK=1;WORLD_SIZE=2;MASTER_ADDR=127.0.0.1;MASTER_PORT=PORT;TORCHELASTIC_USE_AGENT_STORE=True;\
        TORCHELASTIC_RESTART_COUNT=-1 | dcp4j ping: error: environment variable TORCHELASTIC_RESTART_COUNT must be \
        an integer >= 0 (torchrun sets it); got '-1'
        ping | RANK=1;WORLD_SIZE=2;MASTER_ADDR=127.0.0.1;MASTER_PORT=PORT;DCP4J_JOB_ID= | dcp4j ping: error: \
        environment variable DCP4J_JOB_ID must be a job id of 1 to 256 characters; got an empty one
        ping | RANK=1;WORLD_SIZE=2;DCP4J_RENDEZVOUS_DIR=/nonexistent/dcp4j | dcp4j ping: error: environment variable \
        DCP4J_RENDEZVOUS_DIR must name an existing directory that every rank can write (on a file system every node \
        shares); got '/nonexistent/dcp4j', which does not exist
        workspace-size --help | DCP4J_LAUNCHER_PID=0 | dcp4j: error: DCP4J_LAUNCHER_PID must be the launcher's \
        process id, an integer >= 1 (set by `dcp4j launch`); got '0'
        """)
    void aBadLauncherVariableIsAUsageErrorNamingItItsValueAndWhatItMayBe(String command, String environment,
                                                                           String message) throws Exception {
        try (ServerSocket store = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            Map<String, String> env = new HashMap<>(Map.of("DCP4J_JOB_SECRET", JobSecret.generate()));
            for (String pair : environment.split(";")) {
                String[] kv = pair.split("=", 2);
                env.put(kv[0], kv[1].replace("PORT", "" + store.getLocalPort()));
            }
            Run r = rankProcess(env, command.split(" "));
            assertEquals(2, r.code(), r.out());
            assertTrue(r.out().contains(message), r.out());
            assertFalse(r.out().contains("\tat ") || r.out().contains("needs a GPU"), "no stack trace, no GPU: "
                    + r.out());
            store.setSoTimeout(100);
            assertThrows(SocketTimeoutException.class, store::accept, "no rank connected to the store");
        }
    }

    @Test
    void rankCommandsOutsideAGroupSayHowToStartThem() {
        Run check = dcp4j("check");
        assertEquals(1, check.code());
        assertTrue(check.err().contains("start it with `dcp4j launch --nproc N -- check`"), check.err());
        Run bench = dcp4j("bench", "--ranks", "processes");
        assertEquals(1, bench.code());
        assertTrue(bench.err().contains("dcp4j launch --nproc 8 -- bench --ranks processes"), bench.err());
    }

    /**
     * Options checked against the group's size are usage errors of every rank, before any rank joins or looks for a
     * GPU: each rank exits with 2 naming the option and its value.
     */
    @Test
    void checkOptionsThatDoNotFitTheGroupAreUsageErrorsOfEveryRank() {
        for (String[] c : new String[][] {
            {"--inject must name a rank in [0, 1] of this group of 2; got 'skip-call:2'", "--inject", "skip-call:2"},
            {"--csv in a group of 2 ranks must name a file with {rank} in it (each rank writes its own); got"
                + " 'check.csv'", "--csv", "check.csv"}}) {
            Run r = dcp4j("launch", "--nproc", "2", "--keep-going", "--", "check", c[1], c[2]);
            assertEquals(1, r.code(), r.err());
            for (int rank = 0; rank < 2; rank++) {
                assertTrue(r.out().contains("[rank " + rank + "] " + c[0]), r.out());
                assertTrue(Pattern.compile("launch: rank " + rank + " \\(pid \\d+\\) exited with code 2")
                        .matcher(r.err()).find(), r.err());
            }
            assertFalse(r.out().contains("needs a GPU") || r.out().contains("\tat "), r.out());
        }
    }

    /** Without a driver, every rank of a GPU command fails with the reason, and the launcher reports it. */
    @Test
    void withoutAGpuEveryRankOfCheckFailsWithTheReason() {
        org.junit.jupiter.api.Assumptions.assumeFalse(io.github.dcp4j.cuda.Cuda.availability().available(),
                "a GPU is present");
        Run r = dcp4j("launch", "--nproc", "2", "--", "check", "--timeout", "1s");
        assertEquals(1, r.code());
        assertTrue(r.out().contains("needs a GPU"), r.out());
    }
}
