/**
 * The benchmark: CUDA-event timing of the op in each mode and deployment, beside the floors measured in the same run
 * (docs/PERFORMANCE.md).
 */
package io.github.dcp4j.bench;
