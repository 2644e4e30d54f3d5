package io.github.dcp4j.bench;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.engine.cuda.KernelCall;

import java.lang.foreign.Arena;
import java.util.List;
import java.util.Optional;
import java.util.function.DoubleSupplier;

/**
 * Where the benchmark's ranks run: all in one launch on one GPU (loopback), one launch per GPU from this JVM
 * (threads, peer access), or one rank per process (processes, CUDA IPC). The benchmark times the launches of this
 * process and takes, per case, the maximum over ranks of each rank's median.
 */
public interface Deployment {

    /** {@return loopback, threads or processes} */
    String name();

    /** {@return one line for the report} */
    String describe();

    /** {@return the GPUs this process launches on (lane order)} */
    List<CudaDevice> devices();

    /**
     * Ranks whose kernels share the busiest GPU (the byte floor's share of the group's bytes).
     *
     * @param cp ranks in the group
     * @return ranks on the busiest GPU
     */
    int ranksPerGpu(int cp);

    /** {@return whether this process prints the report (rank 0 of a group of processes; else the only process)} */
    default boolean reports() {
        return true;
    }

    /**
     * Why L2-flushed cases cannot be measured soundly in this deployment, if they cannot (by default they can): the
     * flush is timed alone and subtracted, which needs it to run as fast beside the op as alone.
     *
     * @return why, where flushed cases are left out; empty where they are sound
     */
    default Optional<String> flushedCasesUnsound() {
        return Optional.empty();
    }

    /**
     * This process's launches of one case; collective across processes.
     *
     * @param c     the case
     * @param arena where the inputs' memory comes from
     * @return the prepared launches; close them when the case is done
     */
    Prepared prepare(Benchmark.Case c, Arena arena);

    /**
     * The maximum of {@code value} over every process of the group (collective; by default one process: itself).
     *
     * @param what  the exchange's name
     * @param value this process's value
     * @return the largest over the processes
     */
    default double maxOverProcesses(String what, double value) {
        return value;
    }

    /** One case's launches in this process, with a check of the outputs. */
    interface Prepared extends AutoCloseable {
        /** {@return one launch per lane (each on its own stream); all lanes must run together} */
        List<KernelCall> lanes();

        /**
         * After the runs: raises any recorded timeout, reads the outputs, and returns their largest relative error
         * against fp64 (NaN where not checked).
         *
         * @return that error
         */
        double checkOutputs();

        /** {@return the whole eager call as an embedder makes it, where it is more than the lane's launch} */
        default Optional<Runnable> eagerCall() {
            return Optional.empty();
        }

        @Override
        void close();
    }

    /**
     * A {@link Prepared} from its parts: the lanes, the output check, and what closing releases.
     *
     * @param lanes     one launch per lane
     * @param check     the output check
     * @param release   what closing releases
     * @param eagerCall the whole eager call, where it is more than the lane's launch
     */
    record Lanes(List<KernelCall> lanes, DoubleSupplier check, Runnable release, Optional<Runnable> eagerCall)
            implements Prepared {
        /**
         * Lanes whose eager call is the lane's launch.
         *
         * @param lanes   one launch per lane
         * @param check   the output check
         * @param release what closing releases
         */
        public Lanes(List<KernelCall> lanes, DoubleSupplier check, Runnable release) {
            this(lanes, check, release, Optional.empty());
        }

        @Override
        public double checkOutputs() {
            return check.getAsDouble();
        }

        @Override
        public void close() {
            release.run();
        }
    }
}
