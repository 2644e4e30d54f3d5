/**
 * The op's public value types: dtypes, LSE modes, tensors (host views and device tensors), workspace specs and
 * one rank's validated call.
 */
package io.github.dcp4j.op;
