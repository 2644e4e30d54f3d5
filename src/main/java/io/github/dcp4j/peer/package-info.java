/**
 * Peer workspaces: where each rank's workspace lives and how the others reach it (one JVM over one GPU or several, CUDA
 * IPC, addresses the caller has), and the group check every rank runs before a call (docs/DEPLOYMENT.md).
 */
package io.github.dcp4j.peer;
