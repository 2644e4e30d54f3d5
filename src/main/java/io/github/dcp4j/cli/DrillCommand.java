package io.github.dcp4j.cli;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

import java.util.concurrent.Callable;

/**
 * {@code dcp4j drill}: the GPU fault drills of the bundle's {@code bin/fault-drills} (docs/RELIABILITY.md). Hidden
 * from the command list, the man pages and the completion: it makes a rank misbehave on purpose, and its one caller
 * is that script; {@code --help} documents it.
 */
@Command(name = "drill", hidden = true, mixinStandardHelpOptions = true,
        subcommands = {DrillRank.class, DrillVerdict.class},
        description = {
            "GPU fault drills (the GPU bundle's bin/fault-drills runs them; docs/RELIABILITY.md): `drill rank` is what"
                + " each rank of `dcp4j launch --nproc N -- drill rank ...` runs, the victim rank misbehaving on"
                + " purpose; `drill verdict` checks a drill's log and prints PASS or FAIL.",
            "kill: the victim sends itself SIGKILL while a CUDA graph replay is running; the others must end in"
                + " PeerTimeoutException naming it within the timeout.",
            "skip: the victim's graph has one launch fewer; the others must time out naming it, see their workspace"
                + " poisoned and the status word stay set, and a collective reset must make the group usable again.",
            "starve: the victim runs with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (too few SMs for its blocks to be resident"
                + " at once); every rank must complete correctly or end in a named exception within the timeout."})
final class DrillCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        throw new ParameterException(spec.commandLine(), "drill needs a subcommand: rank or verdict");
    }
}
