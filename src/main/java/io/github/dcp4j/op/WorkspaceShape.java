package io.github.dcp4j.op;

/**
 * What one rank's call is checked against: the workspace of rank {@code rank} in a group of {@code cpSize} ranks,
 * {@code bytes} long (the same on every rank).
 */
public record WorkspaceShape(int cpSize, int rank, long bytes) {
}
