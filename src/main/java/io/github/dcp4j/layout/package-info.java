/**
 * The LL128 protocol defined once: constants and flags, a row's line layout, the workspace's offsets, the
 * line operations with their memory orders, and the kernel's launch parameter (docs/PROTOCOL.md).
 */
package io.github.dcp4j.layout;
