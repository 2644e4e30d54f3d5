/**
 * The command line (picocli): the main job, reduce, sample, bench, check, launch, ping and workspace-size.
 */
package io.github.dcp4j.cli;
