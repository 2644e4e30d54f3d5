/**
 * The runs behind the main job and the {@code check}, {@code soak} and {@code drill} commands: the main job, the op
 * at the DeepSeek-V2 decode shape timed per batch with every rank checked against the fp64 oracle, in this process or
 * as one rank of a group ({@link io.github.dcp4j.check.MainJob}, one {@link io.github.dcp4j.check.MainJob.Row} per
 * batch); the conformance cases as one rank of a group, each output checked against the CPU engine and the fp64
 * oracle, the call counter's wrap, CUDA-graph replays and the collective fault drills ({@link
 * io.github.dcp4j.check.RankCheck}, its results as {@link io.github.dcp4j.check.Check} rows); the soak across the
 * counter's wrap in CUDA graphs ({@link io.github.dcp4j.check.Soak}); the GPU fault drills, one rank each ({@link
 * io.github.dcp4j.check.FaultDrill}), and their verdict from the launch's log ({@link
 * io.github.dcp4j.check.DrillJudge}). The command line parses the options, calls one entry point and prints or writes
 * what it returns.
 *
 * <p>Internal: not part of dcp4j's supported API (docs/ARCHITECTURE.md lists it); its types are public for dcp4j's
 * own packages and change without notice.
 */
package io.github.dcp4j.check;
