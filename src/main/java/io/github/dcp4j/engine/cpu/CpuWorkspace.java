package io.github.dcp4j.engine.cpu;

import io.github.dcp4j.engine.PeerFailedException;
import io.github.dcp4j.engine.PeerTimeoutException;
import io.github.dcp4j.engine.RankWorkspace;
import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.layout.Ll128Lines;
import io.github.dcp4j.layout.RowLayout;
import io.github.dcp4j.layout.WorkspaceLayout;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.Halves;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.reference.ExactMerge;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;

/**
 * One rank of a {@link CpuEngine}: an off-heap workspace of exactly the op's size with the {@link Ll128} layout, and
 * the protocol run by the calling thread. A call takes its ticket (which advances the epoch), sends this rank's slices
 * as lines into every peer's workspace, polls its own workspace until every other source's lines are there, merges
 * them with its own slice (read from its input) in source order, and zeroes every flag it consumed.
 */
public final class CpuWorkspace implements RankWorkspace {
    /** Poll rounds that only spin before the poller starts yielding its core. */
    private static final int SPIN_ROUNDS = 64;
    /** Poll rounds that yield before the poller parks (ranks may outnumber cores). */
    private static final int YIELD_ROUNDS = 64;
    /** Longest park between polls; senders also unpark the poller as soon as they finish writing to it. */
    private static final long PARK_NANOS = 100_000;
    /** Arrivals per call: one thread, so the arrivals count only ever goes 0 -> 1 -> reset. */
    private static final int ARRIVALS_PER_CALL = 1;
    /** 16-bit elements in one 8-byte data word; element 0 in the low bits (little-endian). */
    private static final int ELEMENTS_PER_WORD = Ll128.WORD_BYTES / Short.BYTES;

    private final CpuEngine group;
    private final int rank;
    private final MemorySegment memory;
    private final AtomicBoolean inCall = new AtomicBoolean();
    private volatile Thread waiter;

    CpuWorkspace(CpuEngine group, int rank, MemorySegment memory) {
        this.group = group;
        this.rank = rank;
        this.memory = memory;
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int cpSize() {
        return group.cpSize();
    }

    @Override
    public long byteSize() {
        return memory.byteSize();
    }

    @Override
    public String engineName() {
        return CpuEngine.NAME;
    }

    /** {@return the workspace bytes themselves (white-box access, as upstream tests write {@code ws[:4]})} */
    public MemorySegment memory() {
        return memory;
    }

    /** {@return the call counter this rank's next call will use} */
    public int epoch() {
        return Ll128Lines.getEpochAcquire(memory);
    }

    boolean inCall() {
        return inCall.get();
    }

    @Override
    public void execute(ReduceCall call) {
        group.requireUsable();
        if (call.cpRank() != rank || call.cpSize() != cpSize()) {
            throw new IllegalArgumentException("call for cp_rank " + call.cpRank() + " of " + call.cpSize()
                    + " on the workspace of rank " + rank + " of " + cpSize());
        }
        WorkspaceLayout layout = WorkspaceLayout.forWorkspace(byteSize(), cpSize(), call.row());
        if (call.rows() > layout.maxRows()) {
            throw new IllegalArgumentException("partial_o has " + call.rows() + " rows; the workspace of rank " + rank
                    + " holds at most " + layout.maxRows());
        }
        TensorView partialO = TensorView.host(call.partialO(), "partial_o", CpuEngine.NAME);
        TensorView partialLse = TensorView.host(call.partialLse(), "partial_lse", CpuEngine.NAME);
        TensorView out = TensorView.host(call.out(), "out", CpuEngine.NAME);
        if (!inCall.compareAndSet(false, true)) {
            throw new IllegalStateException("the workspace of rank " + rank + " is already in a call on another"
                    + " thread; a workspace serves one ordered stream of calls: make one workspace group per stream");
        }
        try {
            // From here the call has begun for the group (its peers may be waiting for this rank): whatever fails
            // poisons the group, and stops the peers where it is not itself a wait that gave up.
            CpuEngine.requireAlive("partial_o", rank, partialO);
            CpuEngine.requireAlive("partial_lse", rank, partialLse);
            CpuEngine.requireAlive("out", rank, out);
            int epoch = (int) Ll128Lines.takeTicketVolatile(memory, ARRIVALS_PER_CALL);
            send(call, partialO, partialLse, layout, epoch);
            awaitAll(call, layout, epoch);
            mergeAndConsume(call, partialO, partialLse, out, layout, epoch);
        } catch (RuntimeException e) {
            group.poison(rank, e);
            throw e;
        } finally {
            inCall.set(false);
        }
    }

    /** Writes partial_o[row, dst, :] and partial_lse[row, dst] into every other rank dst's workspace. */
    private void send(ReduceCall call, TensorView partialO, TensorView partialLse, WorkspaceLayout layout,
                      int epoch) {
        RowLayout row = call.row();
        int slot = Ll128.slot(epoch);
        long dataFlag = Ll128.dataFlag(epoch);
        int lseFlag = Ll128.lseFlag(epoch);
        MemorySegment o = partialO.memory();
        int elem = call.dtype().bytes();
        for (int i = 1; i < cpSize(); i++) {
            int dst = (rank + i) % cpSize();
            CpuWorkspace peer = group.workspace(dst);
            for (int r = 0; r < call.rows(); r++) {
                long src = call.sliceElement(r, dst) * elem;
                for (int line = 0; line < row.dataLines(); line++) {
                    int offset = line * Ll128.LINE_DATA_BYTES;
                    int bytes = Math.min(Ll128.LINE_DATA_BYTES, row.dataBytes() - offset);
                    Ll128Lines.putDataLineRelease(peer.memory, layout.dataLineOffset(slot, rank, r, line), o,
                            src + offset, bytes, dataFlag);
                }
                int lseBits = Float.floatToRawIntBits(partialLse.loadFloat(call.lseElement(r, dst)));
                for (int g = 0; g < row.lineGroups(); g++) {
                    Ll128Lines.putLseLineRelease(peer.memory, layout.lseLineOffset(slot, rank, r, g), lseBits,
                            lseFlag);
                }
            }
            peer.wake();
        }
    }

    void wake() {
        VarHandle.fullFence();
        Thread t = waiter;
        if (t != null) {
            LockSupport.unpark(t);
        }
    }

    /**
     * Polls until every line of every other source is ready. Each source writes its rows in order, data lines then
     * LSE lines, so one cursor per source walks that order; every flag is still checked.
     */
    private void awaitAll(ReduceCall call, WorkspaceLayout layout, int epoch) {
        RowLayout row = call.row();
        int slot = Ll128.slot(epoch);
        long dataFlag = Ll128.dataFlag(epoch);
        int lseFlag = Ll128.lseFlag(epoch);
        int itemsPerRow = row.dataLines() + row.lineGroups();
        int total = call.rows() * itemsPerRow;
        int[] cursor = new int[cpSize()];
        cursor[rank] = total;
        long deadline = System.nanoTime() + group.timeout().toNanos();
        try {
            for (int round = 0; ; round++) {
                boolean pending = false;
                for (int s = 0; s < cpSize(); s++) {
                    while (cursor[s] < total && isReady(layout, slot, s, cursor[s], itemsPerRow, row.dataLines(),
                            dataFlag, lseFlag)) {
                        cursor[s]++;
                    }
                    pending |= cursor[s] < total;
                }
                if (!pending) {
                    return;
                }
                CpuEngine.Poison failed = group.stopping();
                if (failed != null) {
                    throw new PeerFailedException(rank, failed.rank(), failed.cause());
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw timeout(cursor, total, itemsPerRow, row.dataLines(), epoch, false);
                }
                if (Thread.currentThread().isInterrupted()) {
                    throw timeout(cursor, total, itemsPerRow, row.dataLines(), epoch, true);  // the flag stays set
                }
                if (round < SPIN_ROUNDS) {
                    Thread.onSpinWait();
                } else if (round < SPIN_ROUNDS + YIELD_ROUNDS) {
                    Thread.yield();
                } else if (waiter == null) {
                    waiter = Thread.currentThread();
                } else {
                    LockSupport.parkNanos(this, Math.min(PARK_NANOS, left));
                }
            }
        } finally {
            waiter = null;
        }
    }

    private boolean isReady(WorkspaceLayout layout, int slot, int src, int item, int itemsPerRow, int dataLines,
                            long dataFlag, int lseFlag) {
        int r = item / itemsPerRow;
        int k = item - r * itemsPerRow;
        if (k < dataLines) {
            return Ll128Lines.getDataFlagAcquire(memory, layout.dataLineOffset(slot, src, r, k)) == dataFlag;
        }
        return Ll128Lines.isLseLineReadyAcquire(memory, layout.lseLineOffset(slot, src, r, k - dataLines), lseFlag);
    }

    private PeerTimeoutException timeout(int[] cursor, int total, int itemsPerRow, int dataLines, int epoch,
                                         boolean interrupted) {
        int s = 0;
        while (cursor[s] >= total) {
            s++;
        }
        int r = cursor[s] / itemsPerRow;
        int k = cursor[s] - r * itemsPerRow;
        boolean lse = k >= dataLines;
        int line = lse ? k - dataLines : k;
        return interrupted ? PeerTimeoutException.interrupted(rank, s, r, line, lse, epoch)
                : new PeerTimeoutException(rank, s, r, line, lse, group.timeout(), epoch);
    }

    /**
     * Merges every row in source order 0..cp-1 (as {@link ExactMerge}), this rank's own slice straight from its input,
     * and zeroes each flag it consumed.
     */
    private void mergeAndConsume(ReduceCall call, TensorView o, TensorView partialLse, TensorView out,
                                 WorkspaceLayout layout, int epoch) {
        RowLayout row = call.row();
        int cp = cpSize();
        int slot = Ll128.slot(epoch);
        DType dtype = call.dtype();
        boolean bf16 = dtype == DType.BF16;
        float[] lse = new float[cp];
        float[] w = new float[cp];
        float[] acc = new float[row.headDim()];
        for (int r = 0; r < call.rows(); r++) {
            for (int s = 0; s < cp; s++) {
                if (s == rank) {
                    lse[s] = partialLse.loadFloat(call.lseElement(r, rank));
                    continue;
                }
                lse[s] = Float.intBitsToFloat(Ll128Lines.getLseBitsPlain(memory, layout.lseLineOffset(slot, s, r, 0)));
                for (int g = 0; g < row.lineGroups(); g++) {
                    Ll128Lines.clearLseLinePlain(memory, layout.lseLineOffset(slot, s, r, g));
                }
            }
            ExactMerge.weights(lse, cp, call.mode(), w);
            Arrays.fill(acc, 0f);
            for (int s = 0; s < cp; s++) {
                float ws = w[s];
                if (s == rank) {
                    long base = call.sliceElement(r, rank);
                    for (int d = 0; d < acc.length; d++) {
                        acc[d] = ExactMerge.accumulate(acc[d], ws, o.loadFloat(base + d));
                    }
                    continue;
                }
                int d = 0;
                for (int line = 0; line < row.dataLines(); line++) {
                    long lineOffset = layout.dataLineOffset(slot, s, r, line);
                    int words = Math.min(Ll128.LINE_DATA_WORDS, row.dataWords() - line * Ll128.LINE_DATA_WORDS);
                    for (int k = 0; k < words; k++) {
                        long word = Ll128Lines.getDataWordPlain(memory, lineOffset, k);
                        for (int e = 0; e < ELEMENTS_PER_WORD; e++, d++) {
                            short bits = (short) (word >>> (Short.SIZE * e));
                            float x = bf16 ? Halves.bf16ToFloat(bits) : Halves.fp16ToFloat(bits);
                            acc[d] = ExactMerge.accumulate(acc[d], ws, x);
                        }
                    }
                    Ll128Lines.clearDataFlagPlain(memory, lineOffset);
                }
            }
            long outBase = call.outElement(r);
            for (int d = 0; d < acc.length; d++) {
                out.storeBits(outBase + d, Halves.fromFloat(dtype, acc[d]));
            }
        }
    }
}
