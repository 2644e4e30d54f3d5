package io.github.dcp4j.peer;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.DeviceBuffer;

import java.util.List;

/** One rank's view of workspaces a group in this process allocated (loopback, peer access); checked on creation. */
record GroupView(String provider, CudaDevice device, int rank, List<Long> baseAddresses, long workspaceBytes)
        implements PeerWorkspaces {

    GroupView {
        baseAddresses = List.copyOf(baseAddresses);
        PeerWorkspaces.requireValid(rank, baseAddresses.size(), workspaceBytes, 0, baseAddresses::get);
    }

    /** Rank {@code rank}'s view of {@code buffers} (rank r's workspace is buffer r, at offset 0). */
    static GroupView of(String provider, CudaDevice device, int rank, List<DeviceBuffer> buffers) {
        if (rank < 0 || rank >= buffers.size()) {
            throw new IllegalArgumentException("rank must be in [0, " + buffers.size() + "); got " + rank);
        }
        return new GroupView(provider, device, rank, buffers.stream().map(DeviceBuffer::address).toList(),
                buffers.getFirst().byteSize());
    }

    @Override
    public int cpSize() {
        return baseAddresses.size();
    }

    @Override
    public long offset() {
        return 0;
    }

    @Override
    public long baseAddress(int r) {
        return baseAddresses.get(r);
    }
}
