/**
 * The facade over JCuda and the driver API (through FFM where JCuda lacks a call): the only package that calls the
 * driver.
 */
package io.github.dcp4j.cuda;
