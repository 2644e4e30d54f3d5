/**
 * How the ranks of a group in several processes meet: a bounded all-gather in a directory, through a store of
 * dcp4j's own or torchrun's, the launchers' variables, and the sealed messages every rank checks (docs/DEPLOYMENT.md).
 */
package io.github.dcp4j.rendezvous;
