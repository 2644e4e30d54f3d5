/**
 * The command line (picocli): the main job and its subcommands ({@code java -jar dcp4j.jar --help} lists them).
 *
 * <p>Internal: not part of dcp4j's supported API (docs/ARCHITECTURE.md lists it); its types are public for dcp4j's
 * own packages and change without notice.
 */
package io.github.dcp4j.cli;
