/**
 * The op's entry points ({@link io.github.dcp4j.DcpLseReduce}: workspace size, validation, one rank's call)
 * and the engine factory ({@link io.github.dcp4j.Engines}): the fused decode context-parallel all-to-all + LSE merge
 * (docs/CONTRACT.md).
 */
package io.github.dcp4j;
