package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.op.VariantWorkspace;
import io.github.dcp4j.peer.PeerWorkspaces;

import java.util.List;

/**
 * One variant's region of every rank's workspace (op.VariantWorkspace), seen as the workspace itself: the kernels,
 * the timeout records and the epoch of that variant's calls are the region's.
 *
 * @param whole  the view of the whole workspaces
 * @param region the region
 */
record RegionView(PeerWorkspaces whole, VariantWorkspace.Region region) implements PeerWorkspaces {

    /** Each view of {@code views} narrowed to {@code region}; views of a one-region workspace as they are. */
    static List<PeerWorkspaces> of(List<PeerWorkspaces> views, VariantWorkspace workspace,
                                   VariantWorkspace.Region region) {
        return workspace.regions().size() == 1 ? views
                : views.stream().<PeerWorkspaces>map(v -> new RegionView(v, region)).toList();
    }

    @Override
    public String provider() {
        return whole.provider();
    }

    @Override
    public CudaDevice device() {
        return whole.device();
    }

    @Override
    public int rank() {
        return whole.rank();
    }

    @Override
    public int cpSize() {
        return whole.cpSize();
    }

    @Override
    public long workspaceBytes() {
        return region.bytes();
    }

    @Override
    public long offset() {
        return whole.offset() + region.offset();
    }

    @Override
    public long baseAddress(int r) {
        return whole.baseAddress(r);
    }
}
