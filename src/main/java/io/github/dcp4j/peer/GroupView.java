package io.github.dcp4j.peer;

import io.github.dcp4j.cuda.CudaDevice;

import java.util.List;

/** One rank's view of workspaces a group in this process allocated (loopback, peer access); checked on creation. */
record GroupView(String provider, CudaDevice device, int rank, List<Long> baseAddresses, long workspaceBytes)
        implements PeerWorkspaces {

    GroupView {
        baseAddresses = List.copyOf(baseAddresses);
        PeerWorkspaces.requireValid(rank, baseAddresses.size(), workspaceBytes, 0, baseAddresses::get);
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
