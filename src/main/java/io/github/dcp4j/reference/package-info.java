/**
 * The definitions the engines are checked against: the exact merge (bit for bit), the fp64 oracle, random
 * attention-shaped inputs and the conformance cases.
 */
package io.github.dcp4j.reference;
