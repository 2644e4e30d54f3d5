package io.github.dcp4j.cli;

import io.github.dcp4j.cuda.Cuda;
import io.github.dcp4j.engine.LocalGroup;
import io.github.dcp4j.engine.cpu.CpuEngine;
import io.github.dcp4j.engine.cuda.CudaLoopbackEngine;
import io.github.dcp4j.op.WorkspaceSpec;

import java.time.Duration;

/** Which engine runs a group of ranks in this process. */
enum Engines {
    /** The CUDA engine when a driver and a GPU are present, the CPU engine otherwise. */
    auto,
    cpu,
    cuda;

    /** Opens a group on this engine; {@code auto} picks and the choice is reported by {@link #reason()}. */
    LocalGroup open(WorkspaceSpec spec, Duration timeout) {
        return switch (resolve()) {
            case cuda -> CudaLoopbackEngine.open(0, spec, timeout);
            default -> CpuEngine.open(spec, timeout);
        };
    }

    Engines resolve() {
        if (this != auto) {
            return this;
        }
        return Cuda.availability().available() ? cuda : cpu;
    }

    /** Why {@link #resolve()} chose what it chose. */
    String reason() {
        Cuda.Availability a = Cuda.availability();
        if (this == cpu) {
            return "asked for";
        }
        if (this == cuda) {
            return a.available() ? "asked for" : "asked for, but " + a.reason();
        }
        return a.available() ? "a CUDA driver and " + a.deviceCount() + " GPU(s) are present"
                : "no GPU engine here: " + a.reason();
    }
}
