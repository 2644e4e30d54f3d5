package io.github.dcp4j.cuda;

import jcuda.driver.CUresult;

/** A CUDA driver call failed: names the call and the driver's result. */
public final class CudaException extends RuntimeException {
    /** The driver's {@code CUresult} code. */
    private final int result;

    /**
     * A failed driver call.
     *
     * @param call   the call, as the message names it
     * @param result the driver's {@code CUresult} code
     */
    public CudaException(String call, int result) {
        super(call + " failed: " + CUresult.stringFor(result) + " (" + result + ")");
        this.result = result;
    }

    /** {@return the driver's {@code CUresult} code} */
    public int result() {
        return result;
    }
}
