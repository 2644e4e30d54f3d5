/**
 * The facade over JCuda and the driver API (through FFM where JCuda lacks a call), and over the driver's management
 * library NVML (through FFM, for how GPUs are linked): the only package that calls the driver.
 */
package io.github.dcp4j.cuda;
