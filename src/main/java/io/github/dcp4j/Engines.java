package io.github.dcp4j;

import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.engine.GroupProvider;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.engine.cpu.CpuEngine;
import io.github.dcp4j.engine.cuda.CudaGroup;
import io.github.dcp4j.engine.cuda.CudaRankEngine;
import io.github.dcp4j.engine.cuda.RankSetup;
import io.github.dcp4j.op.Variant;
import io.github.dcp4j.op.WorkspaceSpec;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.ServiceLoader;
import java.util.function.Consumer;

/**
 * Opens the op's engines by name, as the CLI does: a group of every rank in this process ({@link #openGroup}), or
 * this process as one rank of a multi-process group from its environment ({@link #openRank}). An engine outside this
 * jar is found at run time as a {@link GroupProvider}: {@code tornado} names the TornadoVM engine, whose provider is in
 * the tornado jar (docs/TORNADO.md); where that jar or TornadoVM's runtime is missing, the choice is refused with the
 * reason.
 */
public final class Engines {
    private Engines() {
    }

    /** Which engine runs a group of ranks in this process. */
    public enum Choice {
        /** The CUDA engine when a driver and a GPU are present, the CPU engine otherwise. */
        AUTO("auto"),
        /** Ranks as platform threads (no GPU needed). */
        CPU("cpu"),
        /** Every rank in one launch on GPU 0 (loopback). */
        CUDA("cuda"),
        /**
         * The TornadoVM engine: the {@link GroupProvider} named {@code tornado}, in the tornado jar, run with
         * TornadoVM's argument file (tornado-config/); refused with the reason where either is missing.
         */
        TORNADO("tornado");

        private final String spelling;

        Choice(String spelling) {
            this.spelling = spelling;
        }

        /**
         * The name the CLI and the reports use.
         *
         * @return {@code auto}, {@code cpu}, {@code cuda} or {@code tornado}
         */
        public String spelling() {
            return spelling;
        }

        /**
         * The choice named {@code name}.
         *
         * @param name {@code auto}, {@code cpu}, {@code cuda} or {@code tornado}
         * @return that choice
         * @throws IllegalArgumentException for any other name, quoting it
         */
        public static Choice parse(String name) {
            for (Choice c : values()) {
                if (c.spelling.equals(name)) {
                    return c;
                }
            }
            throw new IllegalArgumentException("engine must be auto, cpu, cuda or tornado; got '" + name + "'");
        }
    }

    /**
     * What a choice comes to here: the engine ({@link Choice#CPU}, {@link Choice#CUDA} or {@link Choice#TORNADO})
     * and why.
     *
     * @param engine the engine that runs
     * @param reason why: "asked for", or what was found on this machine
     */
    public record Resolved(Choice engine, String reason) {
    }

    /**
     * The engine {@code choice} opens on this machine, and why ({@code auto} asks the driver, once).
     *
     * @param choice what the caller asks for
     * @return the engine that runs and the reason
     */
    public static Resolved resolve(Choice choice) {
        Objects.requireNonNull(choice, "choice");
        Cuda.Availability a = Cuda.availability();
        return switch (choice) {
            case CPU -> new Resolved(Choice.CPU, "asked for");
            case CUDA -> new Resolved(Choice.CUDA, a.available() ? "asked for" : "asked for, but " + a.reason());
            case TORNADO -> new Resolved(Choice.TORNADO, unavailable(Choice.TORNADO)
                    .map(why -> "asked for, but " + why).orElse("asked for"));
            case AUTO -> a.available()
                    ? new Resolved(Choice.CUDA, "a CUDA driver and " + a.deviceCount() + " GPU(s) are present")
                    : new Resolved(Choice.CPU, "no GPU engine here: " + a.reason());
        };
    }

    /**
     * A group of every rank of {@code spec} in this process, on the engine {@code choice} resolves to.
     *
     * @param choice  the engine asked for ({@link #resolve} says what it comes to)
     * @param spec    the workspaces' size: the largest call the group will make
     * @param timeout how long a rank waits for a peer's line before the call fails
     * @return the group; close it to free its workspaces
     * @throws IllegalStateException where {@code cuda} is asked for and no GPU can be used, or {@code tornado} and
     *         its provider or TornadoVM's runtime is missing (with the reason)
     */
    public static LocalGroup openGroup(Choice choice, WorkspaceSpec spec, Duration timeout) {
        return openGroup(choice, spec, timeout, Variant.LL128);
    }

    /**
     * As {@link #openGroup(Choice, WorkspaceSpec, Duration)}, running {@code variant}'s protocol. The CUDA engine runs
     * every variant; the CPU and TornadoVM engines run LL128 only, which is also what auto comes to there.
     *
     * @param choice  the engine asked for
     * @param spec    the workspaces' size: the largest call the group will make
     * @param timeout how long a rank waits for a peer's line before the call fails
     * @param variant the protocol variant (op.Variant)
     * @return the group; close it to free its workspaces
     * @throws IllegalArgumentException where the engine does not run {@code variant}
     * @throws IllegalStateException    as {@link #openGroup(Choice, WorkspaceSpec, Duration)}
     */
    public static LocalGroup openGroup(Choice choice, WorkspaceSpec spec, Duration timeout, Variant variant) {
        return switch (requireRuns(choice, variant)) {
            case CUDA -> CudaGroup.open(0, spec, timeout, variant);
            case TORNADO -> {
                Optional<String> why = unavailable(Choice.TORNADO);
                if (why.isPresent()) {
                    throw new IllegalStateException(cannotRun(Choice.TORNADO, why.get()));
                }
                yield provider(Choice.TORNADO).orElseThrow().open(spec, timeout);
            }
            default -> CpuEngine.open(spec, timeout);
        };
    }

    /**
     * The engine {@code choice} resolves to here, after checking that it runs {@code variant}: the CUDA engine runs
     * every variant; the CPU and TornadoVM engines run ll128 (and auto, which comes to ll128 there).
     *
     * @param choice  the engine asked for
     * @param variant the protocol variant asked for
     * @return the engine that runs
     * @throws IllegalArgumentException where that engine does not run the variant, naming both
     */
    public static Choice requireRuns(Choice choice, Variant variant) {
        Objects.requireNonNull(variant, "variant");
        Choice engine = resolve(choice).engine();
        if (engine != Choice.CUDA && variant != Variant.LL128 && variant != Variant.AUTO) {
            throw new IllegalArgumentException("the " + engine.spelling() + " engine runs the ll128 variant only"
                    + " (and auto, which comes to ll128 there); got variant " + variant + ": use the cuda engine");
        }
        return engine;
    }

    /** The provider of the engine {@code choice} names, where its classes are on the class path. */
    private static Optional<GroupProvider> provider(Choice choice) {
        return ServiceLoader.load(GroupProvider.class, Engines.class.getClassLoader()).stream()
                .map(ServiceLoader.Provider::get)
                .filter(p -> p.engineName().equals(choice.spelling()))
                .findFirst();
    }

    /** Why the engine {@code choice} names cannot run here: its provider missing, or the provider's reason. */
    private static Optional<String> unavailable(Choice choice) {
        return provider(choice).map(GroupProvider::unavailableReason).orElseGet(() -> Optional.of(
                "no GroupProvider named " + choice.spelling() + " is on the class path (put the tornado jar,"
                        + " target/dcp4j-<version>-tornado.jar, on it and run with TornadoVM's argument file:"
                        + " tornado-config/README.md)"));
    }

    private static String cannotRun(Choice choice, String why) {
        return "the " + choice.spelling() + " engine cannot run here: " + why;
    }

    /**
     * Whether this process was started as one rank of a multi-process group ({@code launch}, torchrun).
     *
     * @return true where the environment names a rank and a world size
     */
    public static boolean rankInEnvironment() {
        return RankSetup.inEnvironment();
    }

    /**
     * This process as one rank of a group started by {@code dcp4j launch} or torchrun (collective): the rendezvous
     * from RANK, WORLD_SIZE, DCP4J_JOB_SECRET and MASTER_ADDR / MASTER_PORT (or DCP4J_RENDEZVOUS_DIR), the GPU from
     * LOCAL_RANK, CUDA IPC workspaces sized by {@code spec}, and the engine on them; closing the engine closes the
     * rest.
     * {@code log} gets one line naming the rank, its GPU and the rendezvous.
     *
     * @param spec    the workspaces' size, the same on every rank
     * @param timeout how long a rank waits for a peer (the rendezvous allows more, for slow starts)
     * @param log     receives the line describing this rank
     * @return this rank's engine; closing it closes the workspaces, the GPU and the rendezvous
     * @throws IllegalStateException where no GPU can be used (with the reason)
     * @throws IllegalArgumentException where the group cannot carry LL128 (ranks on two nodes, GPUs not joined by
     *         NVLink); an {@link io.github.dcp4j.rendezvous.EnvironmentException} where a variable of the launcher or
     *         the rendezvous is missing, malformed or inconsistent with the others, DCP4J_JOB_SECRET among them
     *         (naming it, its value and what it may be)
     */
    public static CudaRankEngine openRank(WorkspaceSpec spec, Duration timeout, Consumer<String> log) {
        return RankSetup.openRank(spec, timeout, log);
    }

    /**
     * As {@link #openRank(WorkspaceSpec, Duration, Consumer)}, every rank running {@code variant}'s protocol (op.Variant,
     * the same on every rank, checked when the engines open); an ll or auto group's workspaces are sized for it.
     *
     * @param spec    the largest call the group will make, the same on every rank
     * @param variant the protocol variant
     * @param timeout how long a rank waits for a peer
     * @param log     receives the line describing this rank
     * @return this rank's engine; closing it closes the workspaces, the GPU and the rendezvous
     */
    public static CudaRankEngine openRank(WorkspaceSpec spec, Variant variant, Duration timeout,
                                          Consumer<String> log) {
        return RankSetup.openRank(spec, variant, timeout, log);
    }
}
