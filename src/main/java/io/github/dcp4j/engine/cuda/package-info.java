/**
 * The CUDA engine: prepared kernel launches for one or more ranks, loopback (every rank on one GPU), one rank per
 * process over CUDA IPC, and one JVM driving every GPU (docs/CUDA.md).
 */
package io.github.dcp4j.engine.cuda;
