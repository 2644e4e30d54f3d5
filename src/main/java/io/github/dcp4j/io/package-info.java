/**
 * Safetensors files, read strictly and written whole or not at all, and {@code reduce}'s run of the op over one
 * ({@link io.github.dcp4j.io.ReduceFile}).
 *
 * <p>Internal: not part of dcp4j's supported API (docs/ARCHITECTURE.md lists it); its types are public for dcp4j's
 * own packages and change without notice.
 */
package io.github.dcp4j.io;
