package io.github.dcp4j.cli;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.rendezvous.EnvironmentException;
import io.github.dcp4j.rendezvous.JobSecret;
import io.github.dcp4j.rendezvous.Rendezvous;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

@Command(name = "launch", mixinStandardHelpOptions = true,
        description = {
            "Starts N child JVMs, one rank each, running `dcp4j <subcommand ...>` with the rendezvous wired (RANK,"
                + " WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT as torchrun sets them, and a"
                + " fresh random DCP4J_JOB_SECRET for this launch; rank r"
                + " uses GPU LOCAL_RANK mod the GPU count). Their output is streamed with a [rank r] prefix.",
            "Fails fast: when a rank exits with an error or dies, the other ranks are stopped and launch exits with 1"
                + " (--keep-going waits for every rank instead); when launch itself dies (even by SIGKILL), every rank"
                + " stops. Several ranks on one GPU run concurrently only under the MPS daemon; launch says whether it"
                + " found one. The launcher's dcp4j.* system properties (e.g. -Ddcp4j.gridPlan=...) reach every rank.",
            "Example: dcp4j launch --nproc 8 -- bench --ranks processes"})
final class LaunchCommand implements Callable<Integer> {
    /** How long stopped ranks get to exit before they are killed. */
    private static final long STOP_GRACE_MS = 2_000;
    /** The launcher's pid, in every rank's environment: a rank whose launcher is gone stops. */
    static final String DCP4J_LAUNCHER_PID = "DCP4J_LAUNCHER_PID";
    /** A rank's exit code when its launcher is gone. */
    static final int LAUNCHER_GONE_EXIT = 4;
    /** The system properties a launcher passes on to its ranks start with this. */
    static final String DCP4J_PROPERTY_PREFIX = "dcp4j.";

    @Option(names = "--nproc", required = true, description = "Ranks (child JVMs) to start.")
    int nproc;

    @Option(names = "--rendezvous", defaultValue = "tcp",
            description = "tcp (rank 0 serves a store on MASTER_PORT) or dir (a fresh shared directory), default"
                    + " ${DEFAULT-VALUE}.")
    String rendezvous;

    @Option(names = "--port", defaultValue = "0", description = "TCP rendezvous port; 0 (default) picks a free one.")
    int port;

    @Option(names = "--rank-map", split = ",", paramLabel = "R0,R1,...",
            description = "The rank of each child in start order (a permutation of 0..N-1); default the identity."
                    + " LOCAL_RANK, and so the GPU, stays the start index.")
    List<Integer> rankMap;

    @Option(names = "--keep-going", description = "Wait for every rank even after one failed.")
    boolean keepGoing;

    @Parameters(arity = "1..*", paramLabel = "SUBCOMMAND", description = "The dcp4j subcommand each rank runs, after"
            + " `--`.")
    List<String> command;

    @Spec
    CommandSpec spec;

    private final Object printLock = new Object();

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        int[] ranks = checkArguments();
        Path scratch = Files.createTempDirectory("dcp4j-launch-");
        String job = "launch-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        List<Process> children = new CopyOnWriteArrayList<>();
        // SIGTERM or SIGINT: the JVM runs this hook, not the finally below. A child started after the hook has read
        // the list stops by itself once the launcher is gone (stopWithLauncher).
        Thread stopper = new Thread(() -> {
            stopAll(List.copyOf(children));
            try {
                deleteTree(scratch);
            } catch (UncheckedIOException e) {
                err.println("launch: " + e.getMessage() + ": " + e.getCause().getMessage());
                err.flush();
            }
        });
        Runtime.getRuntime().addShutdownHook(stopper);
        try {
            Map<String, String> wiring = wiring(scratch, job);
            err.printf("launch: %d rank(s) of `dcp4j %s`, rendezvous %s; %s%n", nproc, String.join(" ", command),
                    wiring.containsKey(Rendezvous.DCP4J_RENDEZVOUS_DIR)
                            ? "directory " + wiring.get(Rendezvous.DCP4J_RENDEZVOUS_DIR)
                            : "TCP 127.0.0.1:" + wiring.get(Rendezvous.MASTER_PORT), Mps.describe());
            err.flush();
            List<Thread> pumps = new ArrayList<>();
            for (int i = 0; i < nproc; i++) {
                Process p = start(i, ranks[i], wiring, scratch.resolve("rank-" + ranks[i]));
                children.add(p);
                pumps.add(pump(p, ranks[i], out));
            }
            int status = await(children, ranks, err);
            for (Thread t : pumps) {
                t.join(STOP_GRACE_MS);
            }
            return status;
        } finally {
            stopAll(children);
            try {
                Runtime.getRuntime().removeShutdownHook(stopper);
            } catch (IllegalStateException shuttingDown) {
                // the launcher itself is being stopped: the hook stops the children
            }
            deleteTree(scratch);
        }
    }

    /** The ranks in start order, after checking every option: a bad value is a usage error (exit code 2). */
    private int[] checkArguments() {
        CommandLine cli = spec.commandLine();
        if (nproc < 1 || nproc > Ll128.MAX_RANKS) {
            throw new ParameterException(cli, "--nproc must be in [1, " + Ll128.MAX_RANKS + "] (the most ranks a"
                    + " group has); got " + nproc);
        }
        if (!rendezvous.equals("tcp") && !rendezvous.equals("dir")) {
            throw new ParameterException(cli, "--rendezvous must be tcp or dir; got '" + rendezvous + "'");
        }
        if (port < 0 || port > 65535) {
            throw new ParameterException(cli, "--port must be in [0, 65535]; got " + port);
        }
        if (command.getFirst().equals("launch")) {
            throw new ParameterException(cli, "a launched rank cannot launch again: give a subcommand such as check"
                    + " or bench after --");
        }
        int[] ranks = new int[nproc];
        if (rankMap == null) {
            for (int i = 0; i < nproc; i++) {
                ranks[i] = i;
            }
            return ranks;
        }
        if (rankMap.size() != nproc || !Set.copyOf(rankMap).equals(Set.copyOf(identity(nproc)))) {
            throw new ParameterException(cli, "--rank-map must be a permutation of 0.." + (nproc - 1) + "; got "
                    + rankMap);
        }
        for (int i = 0; i < nproc; i++) {
            ranks[i] = rankMap.get(i);
        }
        return ranks;
    }

    private static List<Integer> identity(int n) {
        List<Integer> l = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            l.add(i);
        }
        return l;
    }

    /** The environment every rank shares: world size, job id, this launch's secret and the rendezvous. */
    private Map<String, String> wiring(Path scratch, String job) throws IOException {
        Map<String, String> env = new LinkedHashMap<>();
        env.put(Rendezvous.WORLD_SIZE, "" + nproc);
        env.put(Rendezvous.LOCAL_WORLD_SIZE, "" + nproc);
        env.put(Rendezvous.DCP4J_JOB_ID, job);
        env.put(Rendezvous.DCP4J_JOB_SECRET, JobSecret.generate());
        if (rendezvous.equals("dir")) {
            Path dir = Files.createDirectory(scratch.resolve("rendezvous"));
            env.put(Rendezvous.DCP4J_RENDEZVOUS_DIR, dir.toString());
        } else {
            int p = port != 0 ? port : freePort();
            env.put(Rendezvous.MASTER_ADDR, "127.0.0.1");
            env.put(Rendezvous.MASTER_PORT, "" + p);
            env.put(Rendezvous.DCP4J_MASTER_PORT, "" + p);
        }
        return env;
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private Process start(int index, int rank, Map<String, String> wiring, Path tmp) throws IOException {
        Files.createDirectories(tmp);
        List<String> cmd = new ArrayList<>();
        cmd.add(javaExecutable());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        // each child extracts JCuda's natives into its own directory: concurrent extraction into one races
        cmd.add("-Djava.io.tmpdir=" + tmp);
        cmd.addAll(forwardedProperties(System.getProperties()));
        cmd.add("-cp");
        cmd.add(classPath());
        cmd.add(Main.class.getName());
        cmd.addAll(command);
        ProcessBuilder b = new ProcessBuilder(cmd).redirectErrorStream(true);
        Map<String, String> env = b.environment();
        env.remove(Rendezvous.DCP4J_RENDEZVOUS_DIR);
        env.putAll(wiring);
        env.put(Rendezvous.RANK, "" + rank);
        env.put(Rendezvous.LOCAL_RANK, "" + index);
        env.put(DCP4J_LAUNCHER_PID, "" + ProcessHandle.current().pid());
        return b.start();
    }

    /**
     * In a rank started by {@code launch}: stops this JVM (exit code {@value #LAUNCHER_GONE_EXIT}) as soon as the
     * launcher is gone. A launcher killed by SIGKILL cannot stop its ranks, and nothing else would: they would run
     * their job to the end with nobody reading their output. Halts rather than exits, so that no shutdown hook can keep
     * the rank alive. A value that is no process id is an {@link EnvironmentException}.
     */
    static void stopWithLauncher(Map<String, String> env, PrintStream err) {
        String pid = env.get(DCP4J_LAUNCHER_PID);
        if (pid == null) {
            return;
        }
        // pid 0 is no process: it would be taken for a launcher already gone, and the rank would stop at once
        if (!pid.matches("[0-9]{1,18}") || Long.parseLong(pid) < 1) {
            throw new EnvironmentException(DCP4J_LAUNCHER_PID, DCP4J_LAUNCHER_PID + " must be the launcher's process"
                    + " id, an integer >= 1 (set by `dcp4j launch`); got '" + pid + "'");
        }
        Runnable stop = () -> {
            err.println("dcp4j: launch (pid " + pid + ") is gone; this rank stops");
            err.flush();
            Runtime.getRuntime().halt(LAUNCHER_GONE_EXIT);
        };
        ProcessHandle.of(Long.parseLong(pid)).ifPresentOrElse(launcher -> launcher.onExit().thenRun(stop), stop);
    }

    /**
     * The {@code -D} options that give a rank the launcher's own dcp4j.* system properties (the kernel experiment
     * overrides, docs/CUDA.md), so that every rank of a group plans its calls alike; in key order.
     */
    static List<String> forwardedProperties(Properties properties) {
        return properties.stringPropertyNames().stream()
                .filter(k -> k.startsWith(DCP4J_PROPERTY_PREFIX))
                .sorted()
                .map(k -> "-D" + k + "=" + properties.getProperty(k))
                .toList();
    }

    static String javaExecutable() {
        return ProcessHandle.current().info().command()
                .orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    }

    /** This JVM's class path plus the code sources of dcp4j and its dependencies (a test runner may hide them). */
    static String classPath() {
        Set<String> entries = new LinkedHashSet<>(List.of(System.getProperty("java.class.path")
                .split(File.pathSeparator)));
        for (Class<?> c : new Class<?>[] {Main.class, CommandLine.class, jcuda.Pointer.class, ObjectMapper.class,
            JsonFactory.class}) {
            var source = c.getProtectionDomain().getCodeSource();
            if (source != null) {
                try {
                    entries.add(Path.of(source.getLocation().toURI()).toString());
                } catch (URISyntaxException e) {
                    throw new IllegalStateException("cannot locate the classes of " + c.getName(), e);
                }
            }
        }
        entries.remove("");
        return String.join(File.pathSeparator, entries);
    }

    private Thread pump(Process p, int rank, PrintWriter out) {
        return Thread.ofPlatform().daemon().name("dcp4j-launch-rank-" + rank).start(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(),
                    StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    synchronized (printLock) {
                        out.println("[rank " + rank + "] " + line);
                        out.flush();
                    }
                }
            } catch (IOException e) {
                synchronized (printLock) {
                    out.println("[rank " + rank + "] (output lost: " + e.getMessage() + ")");
                    out.flush();
                }
            }
        });
    }

    /** Waits for the ranks; on the first failure stops the others unless --keep-going. Returns the exit code. */
    private int await(List<Process> children, int[] ranks, PrintWriter err) throws InterruptedException {
        boolean[] done = new boolean[children.size()];
        int failed = 0;
        boolean stopping = false;
        int remaining = children.size();
        while (remaining > 0) {
            for (int i = 0; i < children.size(); i++) {
                Process p = children.get(i);
                if (done[i] || !p.waitFor(20, TimeUnit.MILLISECONDS)) {
                    continue;
                }
                done[i] = true;
                remaining--;
                int code = p.exitValue();
                if (code == 0) {
                    continue;
                }
                failed++;
                synchronized (printLock) {
                    if (stopping) {
                        err.printf("launch: rank %d (pid %d) stopped%n", ranks[i], p.pid());
                    } else {
                        err.printf("launch: rank %d (pid %d) %s%n", ranks[i], p.pid(), describeExit(code));
                    }
                    if (!keepGoing && !stopping && remaining > 0) {
                        err.printf("launch: stopping the other %d rank(s)%n", remaining);
                    }
                    err.flush();
                }
                if (!keepGoing && !stopping) {
                    stopping = true;
                    stopAll(children);
                }
            }
        }
        synchronized (printLock) {
            err.printf("launch: %s%n", failed == 0 ? "all " + children.size() + " rank(s) exited with 0"
                    : failed + " of " + children.size() + " rank(s) failed");
            err.flush();
        }
        return failed == 0 ? 0 : 1;
    }

    private static String describeExit(int code) {
        if (code > 128) {
            return "was killed by signal " + (code - 128) + " (exit code " + code + ")";
        }
        return "exited with code " + code;
    }

    /** Stops every child and whatever it started: asks all first, kills those still alive after the grace period. */
    private static void stopAll(List<Process> children) {
        List<ProcessHandle> family = new ArrayList<>();
        for (Process p : children) {
            if (p.isAlive()) {
                family.addAll(p.descendants().toList());
                p.destroy();
            }
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(STOP_GRACE_MS);
        for (Process p : children) {
            try {
                long left = deadline - System.nanoTime();
                if (left <= 0 || !p.waitFor(left, TimeUnit.NANOSECONDS)) {
                    p.destroyForcibly();
                }
            } catch (InterruptedException e) {
                p.destroyForcibly();
                Thread.currentThread().interrupt();
            }
        }
        family.forEach(ProcessHandle::destroyForcibly);
    }

    /**
     * Removes the scratch tree; synchronized because the shutdown hook and the main thread's {@code finally} may both
     * run it at once, and a walk that meets a file the other just removed would stop half-way.
     */
    private static synchronized void deleteTree(Path root) {
        if (!Files.exists(root, LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(root)) {
            for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot remove the launch's scratch directory " + root, e);
        }
    }
}
