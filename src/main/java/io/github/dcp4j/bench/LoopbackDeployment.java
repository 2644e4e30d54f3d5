package io.github.dcp4j.bench;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.cuda.DeviceBuffer;
import io.github.dcp4j.engine.cuda.CudaGroup;
import io.github.dcp4j.engine.cuda.KernelCall;
import io.github.dcp4j.op.DeviceTensor;
import io.github.dcp4j.op.Tensor;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import java.util.ArrayList;
import java.util.Optional;

import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.List;

/** Every rank in one launch on one GPU ({@link CudaGroup}), in the case's protocol variant. */
public final class LoopbackDeployment implements Deployment {
    private final CudaDevice device;
    private final Duration timeout;

    /**
     * Loopback groups on {@code device}, which stays the caller's.
     *
     * @param device  the GPU
     * @param timeout how long a rank waits for a peer's line
     */
    public LoopbackDeployment(CudaDevice device, Duration timeout) {
        this.device = device;
        this.timeout = timeout;
    }

    @Override
    public String name() {
        return "loopback";
    }

    @Override
    public String describe() {
        return "cp ranks in one launch on " + device;
    }

    @Override
    public List<CudaDevice> devices() {
        return List.of(device);
    }

    @Override
    public int ranksPerGpu(int cp) {
        return cp;
    }

    @Override
    public Prepared prepare(Benchmark.Case c, Arena arena) {
        BenchInputs in = BenchInputs.all(c, arena);
        WorkspaceSpec spec = BenchInputs.spec(c);
        List<DeviceBuffer> buffers = new ArrayList<>();
        CudaGroup engine = CudaGroup.open(device, spec, timeout, c.variant());
        CudaStream stream = null;
        try {
            stream = new CudaStream(device);
            List<? extends Tensor> o = c.deviceInputs() ? toDevice(in.partialO(), buffers) : in.partialO();
            List<? extends Tensor> lse = c.deviceInputs() ? toDevice(in.partialLse(), buffers) : in.partialLse();
            List<? extends Tensor> out = c.deviceInputs() ? toDevice(in.out(), buffers) : in.out();
            CudaStream onStream = stream;
            KernelCall call = engine.prepare(o, lse, out, BenchInputs.MODE, onStream);
            Optional<Runnable> eager = c.deviceInputs()
                    ? Optional.of(() -> engine.enqueue(o, lse, out, BenchInputs.MODE, onStream)) : Optional.empty();
            return new Lanes(List.of(call), () -> {
                call.checkStatus();
                call.readOutputs();
                if (c.deviceInputs()) {
                    for (int r = 0; r < c.cp(); r++) {
                        buffers.get(2 * c.cp() + r).copyTo(0, in.out().get(r).memory());
                    }
                }
                return in.maxRelativeError(allRanks(c.cp()));
            }, () -> {
                call.close();
                onStream.close();
                engine.close();
                buffers.forEach(DeviceBuffer::close);
            }, eager);
        } catch (RuntimeException e) {
            if (stream != null) {
                stream.close();
            }
            engine.close();
            buffers.forEach(DeviceBuffer::close);
            throw e;
        }
    }

    /** Each view's whole memory copied to the device and viewed there as it lies (strides and offset kept). */
    private List<DeviceTensor> toDevice(List<TensorView> views, List<DeviceBuffer> buffers) {
        List<DeviceTensor> d = new ArrayList<>();
        for (TensorView v : views) {
            DeviceBuffer b = DeviceBuffer.allocate(device, v.memory().byteSize());
            buffers.add(b);
            b.copyFrom(v.memory(), 0);
            d.add(new DeviceTensor(b.address(), device.ordinal(), v.dtype(), v.shape(), v.strides(), v.offset()));
        }
        return d;
    }

    static int[] allRanks(int cp) {
        int[] r = new int[cp];
        for (int i = 0; i < cp; i++) {
            r[i] = i;
        }
        return r;
    }
}
