package io.github.dcp4j.cli;

import io.github.dcp4j.cuda.Cuda;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Whether the CUDA MPS daemon runs (its control pipe exists). Without it, processes sharing one GPU take turns in
 * time slices: correct (every wait is bounded) but a cross-process handoff costs milliseconds instead of a
 * microsecond, so cross-process timings on one GPU need MPS.
 */
final class Mps {
    private Mps() {
    }

    /** The daemon's pipe directory: CUDA_MPS_PIPE_DIRECTORY, or the default /tmp/nvidia-mps. */
    static Path pipeDirectory() {
        String dir = System.getenv("CUDA_MPS_PIPE_DIRECTORY");
        return Path.of(dir == null || dir.isEmpty() ? "/tmp/nvidia-mps" : dir);
    }

    static boolean running() {
        return Files.exists(pipeDirectory().resolve("control"));
    }

    /** One line for the launch report. */
    static String describe() {
        if (!Cuda.availability().available()) {
            return "no GPU here, so MPS does not apply";
        }
        return running() ? "MPS daemon found (" + pipeDirectory() + "): ranks on one GPU run concurrently"
                : "no MPS daemon (" + pipeDirectory() + "): ranks that share a GPU take turns in time slices,"
                        + " correct but slow (start MPS for timings: docs/DEPLOYMENT.md)";
    }
}
