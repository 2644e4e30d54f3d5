/**
 * What every engine shares: one rank's workspace, a group of ranks in this process, and the timeout of a wait
 * that gave up.
 */
package io.github.dcp4j.engine;
