package io.github.dcp4j.cli;

import io.github.dcp4j.rendezvous.Rendezvous;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Callable;

@Command(name = "ping", mixinStandardHelpOptions = true,
        description = {
            "Checks the rendezvous of a multi-process group without a GPU: every rank joins (RANK, WORLD_SIZE and"
                + " the rendezvous from the environment, as `launch` sets them), exchanges its pid, and rank 0 prints"
                + " the group. --hold keeps every rank alive afterwards (for fault drills)."})
final class PingCommand implements Callable<Integer> {
    @Option(names = "--timeout", defaultValue = "30s", converter = DurationConverter.class,
            description = "How long to wait for every rank, default ${DEFAULT-VALUE}.")
    Duration timeout;

    @Option(names = "--hold", converter = DurationConverter.class,
            description = "Stay alive this long after the exchange, then meet again.")
    Duration hold;

    @Option(names = "--fail-rank", defaultValue = "-1",
            description = "This rank exits with code 3 right after the exchange (a fault drill).")
    int failRank;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws InterruptedException {
        PrintWriter out = spec.commandLine().getOut();
        if (!Rendezvous.inEnvironment(System.getenv())) {
            throw new IllegalArgumentException("ping runs as one rank of a group: start it with `dcp4j launch --nproc"
                    + " N -- ping`, or set RANK, WORLD_SIZE, DCP4J_JOB_SECRET and a rendezvous (docs/DEPLOYMENT.md)");
        }
        try (Rendezvous r = Rendezvous.fromEnvironment(System.getenv(), timeout)) {
            long pid = ProcessHandle.current().pid();
            List<byte[]> pids = r.allGather("ping", ("" + pid).getBytes(StandardCharsets.UTF_8));
            if (r.rank() == 0) {
                StringBuilder group = new StringBuilder();
                for (int i = 0; i < pids.size(); i++) {
                    group.append(i == 0 ? "" : ", ").append("rank ").append(i).append(" pid ")
                            .append(new String(pids.get(i), StandardCharsets.UTF_8));
                }
                out.printf("group of %d via %s: %s%n", r.worldSize(), r.describe(), group);
            }
            out.printf("rank %d (pid %d) joined%n", r.rank(), pid);
            out.flush();
            if (r.rank() == failRank) {
                out.printf("rank %d: failing on purpose (--fail-rank)%n", r.rank());
                out.flush();
                return 3;
            }
            if (hold != null) {
                out.printf("rank %d (pid %d) holding for %s%n", r.rank(), pid, hold);
                out.flush();
                Thread.sleep(hold);
                r.barrier("ping-after-hold");
            }
            return 0;
        }
    }
}
