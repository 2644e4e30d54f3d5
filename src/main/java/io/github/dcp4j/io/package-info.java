/**
 * Safetensors files, read strictly and written whole or not at all.
 *
 * <p>Internal: not part of dcp4j's supported API (docs/ARCHITECTURE.md lists it); its types are public for dcp4j's
 * own packages and change without notice.
 */
package io.github.dcp4j.io;
