/**
 * The CUDA engine: prepared kernel launches for one or more ranks, every rank of a group in one JVM (over one GPU,
 * loopback, or several), and one rank per process over CUDA IPC (docs/CUDA.md).
 */
package io.github.dcp4j.engine.cuda;
