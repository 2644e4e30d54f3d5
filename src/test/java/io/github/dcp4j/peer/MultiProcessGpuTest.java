package io.github.dcp4j.peer;

import io.github.dcp4j.LineWatcher;
import io.github.dcp4j.Tensors;
import io.github.dcp4j.cli.Main;
import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.DeviceBuffer;
import io.github.dcp4j.engine.cpu.CpuEngine;
import io.github.dcp4j.engine.cuda.CudaGroup;
import io.github.dcp4j.engine.cuda.CudaRankEngine;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.reference.Fp64Oracle;
import io.github.dcp4j.rendezvous.DirectoryRendezvous;
import io.github.dcp4j.rendezvous.JobSecret;
import io.github.dcp4j.rendezvous.Rendezvous;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.foreign.Arena;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The peer-workspace providers on real GPUs: child processes over CUDA IPC (through {@code dcp4j launch}, with and
 * without MPS: the launch line says which), external addresses, and in-process peer groups. Tests that need two or
 * more GPUs skip with the reason where fewer are present. Skipped where no CUDA driver loads.
 */
@Tag("gpu")
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class MultiProcessGpuTest {
    /**
     * {@code dcp4j launch --nproc n -- check}: a group of up to 8 ranks, each with check's default wait for a peer unless
     * {@code -Ddcp4j.test.rankTimeout} gives one, as {@code bin/sanitize all} does: there every rank starts under
     * memcheck, and 8 of them take longer to meet than the default wait allows.
     */
    private static Run checkGroup(int n) {
        String timeout = System.getProperty("dcp4j.test.rankTimeout");
        return timeout == null ? dcp4j("launch", "--nproc", "" + n, "--", "check")
                : dcp4j("launch", "--nproc", "" + n, "--", "check", "--timeout", timeout);
    }

    private static Cuda.Availability requireGpus(int n) {
        Cuda.Availability a = Cuda.availability();
        Assumptions.assumeTrue(a.available(), () -> "no CUDA device: " + a.reason());
        Assumptions.assumeTrue(a.deviceCount() >= n, () -> "needs " + n + " GPUs; this machine has "
                + a.deviceCount());
        return a;
    }

    /** Output of one in-process {@code dcp4j} run and its exit code. */
    record Run(int code, String out, String err) {
        long count(String s) {
            return out.lines().filter(l -> l.contains(s)).count();
        }
    }

    static Run dcp4j(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int code = Main.run(args, new PrintWriter(out, true), new PrintWriter(err, true));
        System.out.println("$ dcp4j " + String.join(" ", args) + "  -> exit " + code);
        System.out.println(err);
        System.out.println(out);
        return new Run(code, out.toString(), err.toString());
    }

    @ParameterizedTest(name = "{0} processes on GPU(s) r mod count")
    @ValueSource(ints = {2, 4, 8})
    void ipcGroupsPassEveryCase(int n) {
        requireGpus(1);
        Run r = checkGroup(n);
        assertEquals(0, r.code(), r.err());
        assertEquals(n, r.count("all cases passed"), r.out());
    }

    /** Every protocol variant over CUDA IPC: the conformance cases, the counter's wrap and graph replays. */
    @ParameterizedTest(name = "variant {0}")
    @ValueSource(strings = {"ll", "simple", "unfused", "auto"})
    void everyVariantPassesEveryCaseOverIpc(String variant) {
        requireGpus(1);
        Run r = dcp4j("launch", "--nproc", "4", "--", "check", "--variant", variant);
        assertEquals(0, r.code(), r.err());
        assertEquals(4, r.count("all cases passed"), r.out());
    }

    /** In every variant a rank that skips a call is named by the others, and the collective reset recovers. */
    @ParameterizedTest(name = "variant {0}")
    @ValueSource(strings = {"ll", "simple", "unfused"})
    void aRankThatSkipsACallIsNamedByTheOthersInEveryVariant(String variant) {
        requireGpus(1);
        Run r = dcp4j("launch", "--nproc", "4", "--", "check", "--variant", variant, "--inject", "skip-call:1",
                "--timeout", "2s");
        assertEquals(0, r.code(), r.err());
        assertEquals(3, r.count("source rank 1"), r.out());
        assertEquals(4, r.count("after the drill, a normal call"), r.out());
    }

    @Test
    void ranksThatDifferFromTheLaunchOrderPass() {
        requireGpus(1);
        Run r = dcp4j("launch", "--nproc", "4", "--rank-map", "2,0,3,1", "--rendezvous", "dir", "--", "check");
        assertEquals(0, r.code(), r.err());
        assertEquals(4, r.count("all cases passed"), r.out());
    }

    @Test
    void aWrongCpRankIsRefusedOnEveryRankBeforeAnyLaunch() {
        requireGpus(1);
        Run r = dcp4j("launch", "--nproc", "4", "--", "check", "--inject", "wrong-cp-rank:2");
        assertEquals(0, r.code(), r.err());
        assertEquals(4, r.count("refused before launch: the call refused on every rank"), r.out());
        assertEquals(4, r.count("rank 2: passed cp_rank 3"), r.out());
        assertEquals(4, r.count("after the drill, a normal call"), r.out());
    }

    @Test
    void aRankThatSkipsACallIsNamedByTheOthersAndAResetRecovers() {
        requireGpus(1);
        Run r = dcp4j("launch", "--nproc", "4", "--", "check", "--inject", "skip-call:1", "--timeout", "2s");
        assertEquals(0, r.code(), r.err());
        assertEquals(3, r.count("source rank 1"), r.out());
        assertEquals(4, r.count("collective reset done"), r.out());
        assertEquals(4, r.count("after the drill, a normal call"), r.out());
    }

    /** Kills rank 2 mid-run: every other rank fails within its timeout naming rank 2, and nothing is left running. */
    @Test
    void killingARankMidRunFailsTheOthersNamingIt() throws Exception {
        requireGpus(1);
        Pattern call = Pattern.compile("\\[rank 2] rank 2 \\(pid (\\d+)\\): call 3 of");
        long[] victim = {-1};
        LineWatcher watcher = new LineWatcher(l -> {
            Matcher m = call.matcher(l);
            if (m.find() && victim[0] < 0) {
                victim[0] = Long.parseLong(m.group(1));
                ProcessHandle.of(victim[0]).ifPresent(ProcessHandle::destroyForcibly);
            }
        });
        StringWriter err = new StringWriter();
        long start = System.nanoTime();
        CompletableFuture<Integer> launch = CompletableFuture.supplyAsync(() -> Main.run(new String[] {"launch",
            "--nproc", "4", "--keep-going", "--", "check", "--repeat", "100000", "--timeout", "3s"},
                new PrintWriter(watcher, true), new PrintWriter(err, true)));
        int code = launch.get(120, TimeUnit.SECONDS);
        double seconds = (System.nanoTime() - start) / 1e9;
        List<String> lines = watcher.lines();
        String out = String.join("\n", lines);
        System.out.println(err);
        System.out.println(out.lines().filter(l -> !l.contains(": call ")).reduce("", (a, b) -> a + b + "\n"));
        assertTrue(victim[0] > 0, "rank 2 never reached its third call");
        assertEquals(1, code, err.toString());
        assertTrue(err.toString().contains("rank 2 (pid " + victim[0] + ") was killed by signal 9"), err.toString());
        for (int r : new int[] {0, 1, 3}) {
            String prefix = "[rank " + r + "] dcp4j check: error: ";
            assertTrue(lines.stream().anyMatch(l -> l.startsWith(prefix)
                            && (l.contains("source rank 2") || l.contains("rank(s) [2]"))),
                    "rank " + r + " failed naming rank 2:\n" + out);
        }
        assertTrue(seconds < 60, "the group failed within its timeouts, not after " + seconds + " s");
        assertEquals(0, ProcessHandle.current().descendants().count(), "no rank is left running");
    }

    /** External addresses: the test allocates the workspaces itself (offset 256 inside each buffer). */
    @Test
    void externalAddressesMatchTheCpuEngine(@TempDir Path dir) throws Exception {
        requireGpus(1);
        int cp = 3;
        long offset = 256;
        JobSecret secret = JobSecret.of(JobSecret.generate());
        WorkspaceSpec spec = new WorkspaceSpec(2, 4, cp, 256, DType.BF16);
        List<CudaDevice> devices = new ArrayList<>();
        List<DeviceBuffer> buffers = new ArrayList<>();
        ExecutorService ranks = Executors.newFixedThreadPool(cp);
        try (Arena arena = Arena.ofShared()) {
            for (int r = 0; r < cp; r++) {
                devices.add(CudaDevice.open(0)); // one device thread per rank: each rank's run waits on its own
                DeviceBuffer b = DeviceBuffer.allocate(devices.get(r), spec.bytes() + offset);
                b.zero();
                buffers.add(b);
            }
            List<Long> bases = buffers.stream().map(DeviceBuffer::address).toList();
            Tensors.Group g = Tensors.strided(arena, new SplittableRandom(77), 2, 4, cp, 256, DType.BF16, 3.0);
            List<TensorView> out = Tensors.outputs(arena, g);
            List<Future<?>> done = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                int rank = r;
                done.add(ranks.submit(() -> {
                    try (Rendezvous rv = new DirectoryRendezvous(dir, "external-test", secret, rank, cp,
                            Duration.ofSeconds(30));
                         CudaRankEngine engine = CudaRankEngine.open(new ExternalWorkspaces(devices.get(rank), rank,
                                 bases, offset, spec.bytes()), rv, Duration.ofSeconds(10), cp)) {
                        for (int call = 0; call < 3; call++) {
                            engine.reduce(g.partialO().get(rank), g.partialLse().get(rank), out.get(rank), rank, cp,
                                    LseMode.BASE2);
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get(120, TimeUnit.SECONDS);
            }
            try (CpuEngine cpu = CpuEngine.open(spec)) {
                List<TensorView> expected = cpu.reduceAll(g.partialO(), g.partialLse(), LseMode.BASE2);
                for (int r = 0; r < cp; r++) {
                    assertMatchesCpu(g, r, expected.get(r), out.get(r));
                }
            }
        } finally {
            ranks.shutdownNow();
            buffers.forEach(DeviceBuffer::close);
            devices.forEach(CudaDevice::close);
        }
    }

    /**
     * Group consistency: rank 2's partial_o is freed while rank 2 waits in the group's check (its own checks passed,
     * so the group agrees on the call). Rank 2 then fails on its host and never launches; the others time out naming
     * it. The next call is refused on every rank, naming rank 2 and the original cause, and the collective reset
     * recovers: the call after it matches the CPU engine.
     */
    @Test
    void aRankWhosePartFailsAfterTheCheckPoisonsTheGroupNamingItsCause(@TempDir Path dir) throws Exception {
        requireGpus(1);
        int cp = 4;
        int failing = 2;
        JobSecret secret = JobSecret.of(JobSecret.generate());
        WorkspaceSpec spec = new WorkspaceSpec(2, 4, cp, 256, DType.BF16);
        List<CudaDevice> devices = new ArrayList<>();
        List<DeviceBuffer> buffers = new ArrayList<>();
        ExecutorService ranks = Executors.newFixedThreadPool(cp);
        CountDownLatch othersMayCall = new CountDownLatch(1);
        try (Arena arena = Arena.ofShared()) {
            for (int r = 0; r < cp; r++) {
                devices.add(CudaDevice.open(0));
                DeviceBuffer b = DeviceBuffer.allocate(devices.get(r), spec.bytes());
                b.zero();
                buffers.add(b);
            }
            List<Long> bases = buffers.stream().map(DeviceBuffer::address).toList();
            Tensors.Group g = Tensors.strided(arena, new SplittableRandom(78), 2, 4, cp, 256, DType.BF16, 3.0);
            List<TensorView> out = Tensors.outputs(arena, g);
            Arena doomed = Arena.ofShared();
            TensorView freed = g.partialO().get(failing).contiguousCopy(doomed);
            String[] failure = new String[cp];
            String[] refusal = new String[cp];
            List<Future<?>> done = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                int rank = r;
                done.add(ranks.submit(() -> {
                    try (Rendezvous rv = new DirectoryRendezvous(dir, "poison-test", secret, rank, cp,
                            Duration.ofSeconds(60));
                         CudaRankEngine engine = CudaRankEngine.open(new ExternalWorkspaces(devices.get(rank), rank,
                                 bases, 0, spec.bytes()), rv, Duration.ofSeconds(2), cp)) {
                        TensorView o = g.partialO().get(rank);
                        TensorView lse = g.partialLse().get(rank);
                        if (rank != failing) {
                            othersMayCall.await();
                        }
                        try {
                            engine.reduce(rank == failing ? freed : o, lse, out.get(rank), rank, cp, LseMode.BASE2);
                            failure[rank] = "completed";
                        } catch (RuntimeException e) {
                            failure[rank] = e.getClass().getSimpleName() + ": " + e.getMessage();
                        }
                        try {
                            engine.reduce(o, lse, out.get(rank), rank, cp, LseMode.BASE2);
                            refusal[rank] = "completed";
                        } catch (GroupCheck.MismatchException e) {
                            refusal[rank] = e.getMessage();
                        }
                        engine.reset();
                        engine.reduce(o, lse, out.get(rank), rank, cp, LseMode.BASE2);
                    }
                    return null;
                }));
            }
            Thread.sleep(2000);  // rank 2 has passed its own checks and waits for the others' claims
            doomed.close();
            othersMayCall.countDown();
            for (Future<?> f : done) {
                f.get(120, TimeUnit.SECONDS);
            }
            String cause = "partial_o of rank 2 is in memory that was freed";
            assertTrue(failure[failing].startsWith("IllegalStateException: " + cause), failure[failing]);
            for (int r = 0; r < cp; r++) {
                if (r != failing) {
                    assertTrue(failure[r].startsWith("PeerTimeoutException") && failure[r].contains("source rank 2"),
                            "rank " + r + ": " + failure[r]);
                }
                assertTrue(refusal[r].contains("rank 2: ") && refusal[r].contains("poisoned")
                        && refusal[r].contains(cause), "rank " + r + ": " + refusal[r]);
            }
            try (CpuEngine cpu = CpuEngine.open(spec)) {
                List<TensorView> expected = cpu.reduceAll(g.partialO(), g.partialLse(), LseMode.BASE2);
                for (int r = 0; r < cp; r++) {
                    assertMatchesCpu(g, r, expected.get(r), out.get(r));
                }
            }
        } finally {
            ranks.shutdownNow();
            buffers.forEach(DeviceBuffer::close);
            devices.forEach(CudaDevice::close);
        }
    }

    /** The in-process group with every rank on GPU 0, opened over a list of devices: one launch for all of them. */
    @Test
    void peerGroupWithRanksSharingOneGpuMatchesTheCpuEngine() {
        requireGpus(1);
        peerGroupMatchesTheCpuEngine(1);
    }

    @Test
    void peerGroupOverEveryGpuMatchesTheCpuEngine() {
        Cuda.Availability a = requireGpus(2);
        peerGroupMatchesTheCpuEngine(a.deviceCount());
    }

    @Test
    void oneProcessPerGpuPassesEveryCase() {
        Cuda.Availability a = requireGpus(2);
        Run r = checkGroup(a.deviceCount());
        assertEquals(0, r.code(), r.err());
        assertEquals(a.deviceCount(), r.count("all cases passed"), r.out());
    }

    /** As the loopback tests: within 1e-2 of fp64, and the CPU engine's output bit for bit. */
    private static void assertMatchesCpu(Tensors.Group g, int rank, TensorView cpu, TensorView gpu) {
        double err = Fp64Oracle.relativeError(gpu, Fp64Oracle.reduce(g.partialO(), g.partialLse(), rank,
                LseMode.BASE2));
        assertTrue(err <= 1e-2, "rank " + rank + ": relative error " + err + " against fp64");
        short[] a = Tensors.bits(cpu);
        short[] b = Tensors.bits(gpu);
        int differ = 0;
        for (int i = 0; i < a.length; i++) {
            differ += a[i] != b[i] ? 1 : 0;
        }
        assertEquals(0, differ, "rank " + rank + ": " + differ + " of " + a.length
                + " elements differ from the CPU engine");
    }

    /** cp = max(4, gpus) ranks, rank r on GPU r mod gpus (several ranks per GPU where fewer than 4). */
    private static void peerGroupMatchesTheCpuEngine(int gpus) {
        int cp = Math.max(4, gpus);
        List<CudaDevice> open = new ArrayList<>();
        try (Arena arena = Arena.ofShared()) {
            for (int i = 0; i < gpus; i++) {
                open.add(CudaDevice.open(i));
            }
            List<CudaDevice> byRank = new ArrayList<>();
            for (int r = 0; r < cp; r++) {
                byRank.add(open.get(r % gpus));
            }
            WorkspaceSpec spec = new WorkspaceSpec(3, 2, cp, 512, DType.BF16);
            Tensors.Group g = Tensors.strided(arena, new SplittableRandom(78), 3, 2, cp, 512, DType.BF16, 3.0);
            try (CudaGroup group = CudaGroup.open(byRank, spec, Duration.ofSeconds(10));
                 CpuEngine cpu = CpuEngine.open(spec)) {
                List<TensorView> got = null;
                for (int call = 0; call < 3; call++) {
                    got = group.reduceAll(g.partialO(), g.partialLse(), LseMode.BASE2);
                }
                List<TensorView> expected = cpu.reduceAll(g.partialO(), g.partialLse(), LseMode.BASE2);
                for (int r = 0; r < cp; r++) {
                    assertMatchesCpu(g, r, expected.get(r), got.get(r));
                }
            }
        } finally {
            open.forEach(CudaDevice::close);
        }
    }
}
