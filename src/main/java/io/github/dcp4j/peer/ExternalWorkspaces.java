package io.github.dcp4j.peer;

import io.github.dcp4j.cuda.CudaDevice;

import java.util.List;
import java.util.Objects;

/**
 * Workspaces the application already has (a symmetric heap: an NCCL window, NVSHMEM, a VMM mapping of its own):
 * every rank's buffer base address as mapped in this process, the workspace offset inside each buffer and the
 * workspace size. dcp4j allocates and maps nothing and frees nothing; the application keeps the memory alive and
 * zeroed before the first call (a fresh workspace must be all zero, as {@code cudaMemset}).
 *
 * @param device         the GPU this rank runs on (its context maps every address)
 * @param rank           this rank
 * @param baseAddresses  rank r's buffer base address at index r
 * @param offset         workspace offset inside every buffer
 * @param workspaceBytes bytes of every workspace, as {@code DcpLseReduce.workspaceSize}
 */
public record ExternalWorkspaces(CudaDevice device, int rank, List<Long> baseAddresses, long offset,
                                 long workspaceBytes) implements PeerWorkspaces {

    /** The application's workspaces, checked: sizes, offsets and every address 128-byte aligned. */
    public ExternalWorkspaces {
        Objects.requireNonNull(device, "device");
        Objects.requireNonNull(baseAddresses, "baseAddresses");
        baseAddresses = List.copyOf(baseAddresses);
        PeerWorkspaces.requireValid(rank, baseAddresses.size(), workspaceBytes, offset, baseAddresses::get);
    }

    @Override
    public String provider() {
        return "external";
    }

    @Override
    public int cpSize() {
        return baseAddresses.size();
    }

    @Override
    public long baseAddress(int r) {
        return baseAddresses.get(r);
    }
}
