/**
 * The benchmark: CUDA-event timing of the op in each mode and deployment, beside the floors measured in the same run
 * (docs/PERFORMANCE.md); the deployment {@code bench --ranks} names, opened with the GPUs and the rendezvous it runs
 * on ({@link io.github.dcp4j.bench.OpenedDeployment}).
 *
 * <p>Internal: not part of dcp4j's supported API (docs/ARCHITECTURE.md lists it); its types are public for dcp4j's
 * own packages and change without notice.
 */
package io.github.dcp4j.bench;
