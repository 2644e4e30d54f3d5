/**
 * The CPU engine: a group of ranks as platform threads in one JVM, running the same protocol over the same bytes.
 */
package io.github.dcp4j.engine.cpu;
