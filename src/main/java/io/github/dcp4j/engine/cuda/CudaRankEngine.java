package io.github.dcp4j.engine.cuda;

import io.github.dcp4j.cuda.CudaDevice;
import io.github.dcp4j.cuda.CudaStream;
import io.github.dcp4j.engine.FirstFailure;
import io.github.dcp4j.engine.RankWorkspace;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.op.Crossovers;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.Tensor;
import io.github.dcp4j.op.Variant;
import io.github.dcp4j.op.VariantWorkspace;
import io.github.dcp4j.op.WorkspaceShape;
import io.github.dcp4j.peer.GroupCheck;
import io.github.dcp4j.peer.PeerWorkspaces;
import io.github.dcp4j.rendezvous.Rendezvous;

import java.nio.ByteBuffer;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.List;
import java.util.Objects;

/**
 * The CUDA engine for one rank of a group whose other ranks run elsewhere (other processes over CUDA IPC, or an
 * application's symmetric memory): this rank's launch of the LL128 kernel against any {@link PeerWorkspaces}.
 *
 * <p>Every call is checked on every rank before any rank launches: each rank's arguments are validated locally and
 * the verdicts and shapes exchanged through the rendezvous ({@link GroupCheck}), so that one rank passing a wrong
 * cp_rank or another shape is refused on all of them, naming it. A prepared call ({@link #prepare}) is checked once
 * and may then be run or captured into a CUDA graph many times.
 *
 * <p>A failure after the group agreed on a call (a wait that gave up, a rank whose part failed on its host) poisons
 * the rank's workspace: the group's next check is refused on every rank, naming each poisoned rank and its failure,
 * until the collective {@link #reset()}. Every check a rank can make alone (shapes, strides, device pointers, host
 * memory not freed) is made before the group's check, so that it is refused on every rank instead.
 *
 * <p>The workspace serves one ordered stream (the first one used binds it). The engine does not own the workspaces:
 * close the provider after the engine.
 */
public final class CudaRankEngine implements RankWorkspace, AutoCloseable {
    private static final SecureRandom FLAG_KEY_RANDOM = new SecureRandom();

    private final PeerWorkspaces view;
    private final Rendezvous rendezvous;
    private final Kernels kernels;
    private final Duration timeout;
    private final int blockBudget;
    private final CudaStream ownStream;
    private final StreamBinding binding;
    private final WorkspaceState state;
    /** What closing the engine closes after it (the bootstrap's workspaces and rendezvous), or nothing. */
    private final Runnable owned;
    /** The variant's regions of the workspace (one region, the whole workspace, for ll128). */
    private final VariantWorkspace variants;
    /** The contract's workspace size for the group's spec: what calls are validated against. */
    private final long contractBytes;
    /** The region the last prepared call runs in (its variant's; the whole workspace for ll128). */
    private volatile PeerWorkspaces lastRegion;

    private CudaRankEngine(PeerWorkspaces view, Rendezvous rendezvous, Duration timeout, int ranksSharingGpu,
                           Runnable owned, VariantWorkspace variants, long contractBytes, long flagKey) {
        this.variants = variants;
        this.contractBytes = contractBytes;
        this.view = view;
        this.lastRegion = RegionView.of(List.of(view), variants, variants.regions().getFirst()).getFirst();
        this.binding = new StreamBinding(view.device());
        this.owned = owned;
        this.rendezvous = rendezvous;
        this.timeout = timeout;
        this.kernels = new Kernels(view.device());
        this.blockBudget = Math.max(1, kernels.coResidentBlocks() / ranksSharingGpu);
        CudaStream stream = null;
        try {
            stream = new CudaStream(view.device());
            this.state = new WorkspaceState("rank " + view.rank() + "'s workspace", view.device(), flagKey);
        } catch (RuntimeException e) {
            if (stream != null) {
                stream.close();
            }
            kernels.close();
            throw e;
        }
        this.ownStream = stream;
    }

    /**
     * This process's rank of a group, over {@code view}'s workspaces; collective (every rank opens its engine with the
     * same workspace size and protocol, checked through {@code rendezvous} before anything else).
     *
     * @param view            this rank's view of every rank's workspace
     * @param rendezvous      the group's rendezvous, for the collective checks
     * @param timeout         how long a wait for a peer's line lasts before the call fails
     * @param ranksSharingGpu ranks of the group whose kernels run on this GPU at the same time (several processes on
     *                        one GPU): each rank's grid is capped at its share of the co-resident blocks
     * @return this rank's engine (collective: every rank opens its own)
     */
    public static CudaRankEngine open(PeerWorkspaces view, Rendezvous rendezvous, Duration timeout,
                                      int ranksSharingGpu) {
        return open(view, rendezvous, timeout, ranksSharingGpu, () -> { });
    }

    /** As {@link #open(PeerWorkspaces, Rendezvous, Duration, int)}; closing the engine then runs {@code owned}. */
    static CudaRankEngine open(PeerWorkspaces view, Rendezvous rendezvous, Duration timeout, int ranksSharingGpu,
                               Runnable owned) {
        Objects.requireNonNull(view, "view");
        // A region is at least a line; a smaller view is refused by the group's check, on every rank.
        long bytes = Math.max(view.workspaceBytes(), Ll128.LINE_BYTES);
        VariantWorkspace whole = new VariantWorkspace(Variant.LL128, Crossovers.fallback(),
                List.of(new VariantWorkspace.Region(Variant.LL128.layoutName(), 0, bytes)));
        return open(view, rendezvous, timeout, ranksSharingGpu, owned, whole, bytes);
    }

    /**
     * As {@link #open(PeerWorkspaces, Rendezvous, Duration, int)}, running the variant of {@code variants} (op.Variant)
     * on workspaces of at least {@code variants.bytes()}, with calls validated against the contract's workspace size
     * for the group's spec; collective (every rank claims the same variant, regions and contract size). The ll128 and
     * fenced regions must hold the contract's workspace (an ll region holds what it holds: {@link
     * Variant#rowsHeld}).
     *
     * @param view            this rank's view of every rank's workspace
     * @param rendezvous      the group's rendezvous, for the collective checks
     * @param timeout         how long a wait for a peer's line lasts before the call fails
     * @param ranksSharingGpu ranks of the group whose kernels run on this GPU at the same time
     * @param owned           what closing the engine closes after it
     * @param variants        the variant and its regions of the workspace
     * @param contractBytes   {@code WorkspaceSpec.bytes()} of the group's spec
     * @return this rank's engine (collective: every rank opens its own)
     */
    static CudaRankEngine open(PeerWorkspaces view, Rendezvous rendezvous, Duration timeout, int ranksSharingGpu,
                               Runnable owned, VariantWorkspace variants, long contractBytes) {
        Objects.requireNonNull(view, "view");
        Objects.requireNonNull(variants, "variants");
        Objects.requireNonNull(rendezvous, "rendezvous");
        CudaGroup.requirePositive(timeout);
        if (ranksSharingGpu < 1) {
            throw new IllegalArgumentException("ranks sharing the GPU must be >= 1; got " + ranksSharingGpu);
        }
        String problem = null;
        try {
            PeerWorkspaces.requireValid(view);
            VariantWorkspace.Region small = variants.regions().stream()
                    .filter(r -> !r.layout().equals(Variant.LL.layoutName()) && r.bytes() < contractBytes)
                    .findFirst().orElse(null);
            if (view.workspaceBytes() < variants.bytes()) {
                problem = "its workspaces of " + view.workspaceBytes() + " bytes are smaller than the "
                        + variants.bytes() + " the " + variants.variant() + " variant needs";
            } else if (small != null) {
                problem = "its " + small + " is smaller than the contract's workspace of " + contractBytes
                        + " bytes, which the " + small.layout() + " layout holds";
            } else if (view.rank() != rendezvous.rank() || view.cpSize() != rendezvous.worldSize()) {
                problem = "its workspaces are rank " + view.rank() + " of " + view.cpSize() + " but it joined the"
                        + " rendezvous as rank " + rendezvous.rank() + " of " + rendezvous.worldSize();
            }
        } catch (IllegalArgumentException e) {
            problem = e.getMessage();
        }
        GroupCheck.agree(rendezvous, "engine-open", "opening the CUDA engine on " + view.provider() + " workspaces",
                GroupCheck.Claim.of("protocol", Ll128.PROTOCOL_ID, "cp_size", view.cpSize(), "workspace_bytes",
                        view.workspaceBytes(), "contract_bytes", contractBytes, "timeout", timeout, "variant",
                        variants.variant().spelling(), "crossovers", variants.crossovers().steps().toString(),
                        "regions", variants.regions().toString()).withProblem(problem));
        return new CudaRankEngine(view, rendezvous, timeout, ranksSharingGpu, owned, variants, contractBytes,
                agreeFlagKey(rendezvous));
    }

    /**
     * The group's flag key (collective): every rank gives 64 bits from a SecureRandom and every rank takes the XOR
     * of all of them, so that the key is the same on every rank and random where any one rank's bits are.
     */
    private static long agreeFlagKey(Rendezvous rendezvous) {
        long bits = 0;
        for (byte[] b : rendezvous.allGather("flag-key", ByteBuffer.allocate(Long.BYTES).putLong(FLAG_KEY_RANDOM.nextLong()).array())) {
            if (b.length != Long.BYTES) {
                throw new IllegalStateException("a rank's flag key share has " + b.length + " bytes, not "
                        + Long.BYTES);
            }
            bits ^= ByteBuffer.wrap(b).getLong();
        }
        return Ll128.flagKey(bits);
    }

    @Override
    public int rank() {
        return view.rank();
    }

    @Override
    public int cpSize() {
        return view.cpSize();
    }

    @Override
    public long byteSize() {
        return view.workspaceBytes();
    }

    /** Calls are validated against the contract's size for the group's spec (an ll workspace is larger). */
    @Override
    public WorkspaceShape shape() {
        return new WorkspaceShape(cpSize(), rank(), contractBytes);
    }

    @Override
    public String engineName() {
        return CudaGroup.NAME;
    }

    /** {@return the variant the engine was opened for (auto: each call's own is its KernelCall's)} */
    public Variant variant() {
        return variants.variant();
    }

    /** This rank's view of each region of its workspace. */
    private List<PeerWorkspaces> regions() {
        return variants.regions().stream().flatMap(r -> RegionView.of(List.of(view), variants, r).stream()).toList();
    }

    /** This rank's view of {@code concrete}'s region of every workspace. */
    private List<PeerWorkspaces> region(Variant concrete) {
        return RegionView.of(List.of(view), variants, variants.region(concrete));
    }

    /** {@return the GPU this rank runs on} */
    public CudaDevice device() {
        return view.device();
    }

    /**
     * {@return the device-side call counter of this rank's workspace: of the region the last prepared call runs in,
     * where auto's calls run in several (each variant's region has its own counter)}
     */
    public int epoch() {
        return OwnWorkspace.epoch(lastRegion);
    }

    /**
     * Whether this rank's workspace is marked poisoned on the device: a wait of this rank gave up since the last
     * {@link #reset()}, and until it every call on the workspace writes NaN rows without waiting.
     *
     * @return true while the workspace is poisoned
     */
    public boolean poisoned() {
        return regions().stream().anyMatch(OwnWorkspace::poisoned);
    }

    /**
     * Sets every rank's device-side call counter to {@code epoch} (white-box, for counter-wrap tests); collective: the
     * ranks meet before and after the write, so that no call of another rank sees a half-changed group.
     *
     * @param epoch the counter every rank's next call will use
     */
    public void forceEpoch(int epoch) {
        state.requireUsable();
        view.device().synchronize();
        rendezvous.barrier("epoch-before");
        regions().forEach(r -> OwnWorkspace.forceEpoch(r, epoch));
        rendezvous.barrier("epoch-after");
    }

    /**
     * Checks this rank's call on every rank (collective) and prepares it on this engine's own stream; the result runs
     * ({@link KernelCall#run()}) or is captured ({@link KernelCall#launch()}) as often as wanted.
     *
     * @param partialO   this rank's partial outputs (a host view or a device tensor)
     * @param partialLse this rank's log-sum-exps
     * @param out        where the merged rows go
     * @param cpRank     this rank
     * @param cpSize     ranks in the group
     * @param mode       the LSEs' base
     * @return the prepared call; close it when done
     * @throws GroupCheck.MismatchException on every rank when any rank's arguments are invalid or disagree
     */
    public KernelCall prepare(Tensor partialO, Tensor partialLse, Tensor out, int cpRank, int cpSize,
                              LseMode mode) {
        return prepare(partialO, partialLse, out, cpRank, cpSize, mode, ownStream);
    }

    /**
     * As {@link #prepare(Tensor, Tensor, Tensor, int, int, LseMode)}, to run on {@code stream} (the caller's, see
     * {@link CudaStream#wrap}): {@link KernelCall#launch()} queues it there without waiting, also inside a capture
     * the caller began on that stream.
     *
     * @param partialO   this rank's partial outputs (a host view or a device tensor)
     * @param partialLse this rank's log-sum-exps
     * @param out        where the merged rows go
     * @param cpRank     this rank
     * @param cpSize     ranks in the group
     * @param mode       the LSEs' base
     * @param stream     the stream the call runs on
     * @return the prepared call; close it when done
     * @throws GroupCheck.MismatchException on every rank when any rank's arguments are invalid or disagree, or any
     *         rank's workspace is poisoned by an earlier failure (each such rank named with that failure; {@link
     *         #reset()} on every rank recovers)
     */
    public KernelCall prepare(Tensor partialO, Tensor partialLse, Tensor out, int cpRank, int cpSize,
                              LseMode mode, CudaStream stream) {
        state.requireOpen();
        ReduceCall call = null;
        Variant v = null;
        String problem = null;
        try {
            call = ReduceCall.validate(partialO, partialLse, out, cpRank, cpSize, mode, shape());
            KernelCall.requireLocalChecks(view.device(), call);
            binding.requireAllowed(stream);
            v = chosen(call);
            KernelCall.requireFitsRegion(v, call, region(v).getFirst().workspaceBytes());
        } catch (IllegalArgumentException | IllegalStateException | NullPointerException e) {
            problem = "passed cp_rank " + cpRank + " / cp_size " + cpSize + ": " + e.getMessage();
        }
        GroupCheck.Claim claim = problem != null ? GroupCheck.Claim.of().withProblem(problem)
                : GroupCheck.Claim.of("cp_size", call.cpSize(), "rows", call.rows(), "heads", call.heads(),
                        "head_dim", call.headDim(), "dtype", call.dtype(), "lse_mode", call.mode().spelling(),
                        "variant", v.spelling(), "flag_blocks_per_rank", flagBlocks(call, v));
        GroupCheck.agree(rendezvous, "call-check", "the call", claim.withProblem(state.poisonReason()));
        try {
            List<PeerWorkspaces> region = region(v);
            KernelCall prepared = new KernelCall(kernels, List.of(call), region, stream, blockBudget, timeout, state,
                    v, regions());
            lastRegion = region.getFirst();
            binding.bind(stream);
            return prepared;
        } catch (RuntimeException e) {
            // The others go on into a call this rank will not launch (they time out naming it); the poison names
            // the cause to every rank at the next check.
            state.poison(e);
            throw e;
        }
    }

    private Variant chosen(ReduceCall call) {
        return variants.choose(Crossovers.bytesPerRank(call.rows(), call.cpSize(), call.headDim(), call.dtype()),
                call.rows(), call.layout());
    }

    /**
     * The blocks per rank of the call where its variant keys its flags by block (simple and unfused: one flag per
     * source, destination and block, so sender and receiver must split the rows alike), which every rank must
     * agree on: each derives it from its own block budget (its GPU, its MPS share, its grid-plan property). 0 for
     * the variants whose every line carries its flag.
     */
    private int flagBlocks(ReduceCall call, Variant v) {
        return v == Variant.SIMPLE || v == Variant.UNFUSED
                ? GridPlan.forVariant(call.rows(), blockBudget, GridPlan.Tuning.fromSystemProperty()).blocksPerRank()
                : 0;
    }

    /**
     * One read of the engine's status word, after the caller has synchronised with the stream its calls ran on
     * (eager or in graph replays): if a wait of any of its calls gave up, in any variant's region, the records are read
     * and the first is raised, and the workspace stays poisoned until the collective {@link #reset()}.
     *
     * @throws io.github.dcp4j.engine.PeerTimeoutException naming the rank, source rank, row and line of the first wait
     *         that gave up
     */
    public void checkStatus() {
        state.requireOpen();
        state.check(regions(), timeout);
    }

    /** Runs one collective call (checked on every rank, launched, waited for, outputs read). */
    @Override
    public void execute(ReduceCall call) {
        reduce(call.partialO(), call.partialLse(), call.out(), call.cpRank(), call.cpSize(), call.mode());
    }

    /** As {@link #execute}, from the arguments: checked on every rank before any launches. */
    @Override
    public void reduce(Tensor partialO, Tensor partialLse, Tensor out, int cpRank, int cpSize, LseMode mode) {
        try (KernelCall c = prepare(partialO, partialLse, out, cpRank, cpSize, mode)) {
            c.run();
            c.readOutputs();
        }
    }

    /**
     * The collective reset after a failure: every rank waits until every rank's kernels have ended, re-zeroes its own
     * workspace, and waits until every rank has, before anyone sends again.
     */
    public void reset() {
        state.requireOpen();
        view.device().synchronize();
        rendezvous.barrier("reset-stopped");
        OwnWorkspace.zero(view);
        rendezvous.barrier("reset-zeroed");
        state.clearPoison();
    }

    /**
     * Frees the engine's stream and kernels; the workspaces stay the provider's, except for an engine from
     * {@link RankSetup#openRank}, which closes its workspaces, GPU and rendezvous too.
     */
    @Override
    public void close() {
        if (!state.beginClose()) {
            return;
        }
        FirstFailure.runAll(
                view.device()::synchronize,  // calls queued on callers' streams too, before anything is freed
                ownStream::close, kernels::close, state::free, owned);
    }

    @Override
    public String toString() {
        return "CUDA rank " + rank() + " of " + cpSize() + " on " + view.device() + " (" + view.provider()
                + " workspaces, variant " + variants.variant() + ", kernels from " + kernels.source() + ")";
    }
}
