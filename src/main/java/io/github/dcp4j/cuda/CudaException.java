package io.github.dcp4j.cuda;

import jcuda.driver.CUresult;

/** A CUDA driver call failed: names the call and the driver's result. */
public final class CudaException extends RuntimeException {
    private final int result;

    public CudaException(String call, int result) {
        super(call + " failed: " + CUresult.stringFor(result) + " (" + result + ")");
        this.result = result;
    }

    /** The driver's {@code CUresult} code. */
    public int result() {
        return result;
    }
}
