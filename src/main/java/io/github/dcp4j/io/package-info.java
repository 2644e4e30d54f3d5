/**
 * Safetensors files, read strictly and written whole or not at all.
 */
package io.github.dcp4j.io;
