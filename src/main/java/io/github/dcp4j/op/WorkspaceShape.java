package io.github.dcp4j.op;

/**
 * What one rank's call is checked against: the workspace of rank {@code rank} in a group of {@code cpSize} ranks,
 * {@code bytes} long (the same on every rank).
 *
 * @param cpSize ranks in the group
 * @param rank   the rank whose workspace this is
 * @param bytes  the workspace's size in bytes
 */
public record WorkspaceShape(int cpSize, int rank, long bytes) {
}
