package io.github.dcp4j.engine.tornado;

import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.layout.RowLayout;
import io.github.dcp4j.layout.WorkspaceLayout;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.ReduceCall;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.op.WeightExp;
import uk.ac.manchester.tornado.api.types.arrays.DoubleArray;
import uk.ac.manchester.tornado.api.types.arrays.FloatArray;
import uk.ac.manchester.tornado.api.types.arrays.IntArray;
import uk.ac.manchester.tornado.api.types.arrays.LongArray;
import uk.ac.manchester.tornado.api.types.arrays.ShortArray;
import uk.ac.manchester.tornado.api.types.arrays.TornadoNativeArray;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;

/**
 * The TornadoVM arrays of one group, sized once for its workspace spec (a graph captures its arrays when it is
 * built), and the host side of a call: its parameters and index table, every rank's inputs copied in as they lie
 * (strides kept: the index table says where each slice starts), the outputs copied out. The engine's graph and the
 * CPU-side tests of {@link MergeTasks} use the same arrays and the same loading.
 */
final class GraphArrays {
    /** Every rank's workspace, rank r's at long {@code wsBase + r * wsLongs}, each 128-byte aligned on the device. */
    final LongArray ws;
    final IntArray params = new IntArray(MergeTasks.PARAMS);
    final ShortArray oIn;
    final FloatArray lseIn;
    final IntArray index;
    /** Per (destination, row, source): the LSE the exchange task received (the own one from partial_lse). */
    final FloatArray received;
    final FloatArray weights;
    /** Per (destination, row): nonzero where the exchange task's wait for that row gave up. */
    final IntArray failed;
    final ShortArray out;
    final DoubleArray tables = MergeTasks.tables(WeightExp.taylorCoefficients());
    /** Word 0: a {@code MergeTasks.STATUS_*} value once a task gave up (the prebuilt exchange task sets it). */
    final IntArray status = new IntArray(1);
    /** Per source rank: 1 where it sends (every rank, except where a timeout test leaves one out). */
    final IntArray senders;

    final int cp;
    final int maxRows;
    final long workspaceBytes;
    final int wsLongs;
    final int wsBase;
    /** Elements of one rank's partial_o region in {@link #oIn}: the packed size of the largest call. */
    final int oCapacity;
    final int lseCapacity;
    final int outCapacity;

    GraphArrays(WorkspaceSpec spec) {
        this.cp = spec.cpSize();
        this.maxRows = spec.maxRows();
        this.workspaceBytes = spec.bytes();
        this.wsLongs = Math.toIntExact(Math.ceilDiv(workspaceBytes, Ll128.LINE_BYTES) * Ll128.LINE_BYTES
                / Ll128.WORD_BYTES);
        // the data start ARRAY_HEADER bytes into the device buffer (itself aligned): the first workspace starts at
        // the next multiple of 128 bytes
        this.wsBase = (int) ((Ll128.LINE_BYTES - TornadoNativeArray.ARRAY_HEADER % Ll128.LINE_BYTES)
                % Ll128.LINE_BYTES / Ll128.WORD_BYTES);
        this.oCapacity = fitInt("partial_o elements of one rank", (long) maxRows * cp * spec.headDim());
        this.lseCapacity = maxRows * cp;
        this.outCapacity = fitInt("output elements of one rank", (long) maxRows * spec.headDim());
        this.ws = new LongArray(fitInt("workspace longs", wsBase + (long) cp * wsLongs));
        this.oIn = new ShortArray(fitInt("partial_o elements", (long) cp * oCapacity));
        this.lseIn = new FloatArray(fitInt("partial_lse elements", (long) cp * lseCapacity));
        this.index = new IntArray(fitInt("index entries", 2L * cp * maxRows * cp + (long) cp * maxRows));
        this.received = new FloatArray(fitInt("received LSEs", (long) cp * maxRows * cp));
        this.weights = new FloatArray(fitInt("weights", (long) cp * maxRows * cp));
        this.failed = new IntArray(cp * maxRows);
        this.senders = new IntArray(cp);
        this.out = new ShortArray(fitInt("output elements", (long) cp * outCapacity));
        ws.init(0L);
        failed.init(0);
        status.init(0);
        senders.init(1);
    }

    private static int fitInt(String what, long n) {
        if (n > Integer.MAX_VALUE - 64) {
            throw new IllegalArgumentException("the tornado engine's arrays are int-indexed: " + what + " = " + n
                    + " exceeds " + (Integer.MAX_VALUE - 64) + "; use a smaller workspace spec");
        }
        return (int) n;
    }

    /** Rank {@code rank}'s workspace bytes, a view of {@link #ws} (host side). */
    MemorySegment workspace(int rank) {
        return ws.getSegment().asSlice(((long) wsBase + (long) rank * wsLongs) * Ll128.WORD_BYTES, workspaceBytes);
    }

    /**
     * Loads one call of every rank (validated, in rank order, with their host views): the parameters, the index
     * table and the inputs.
     *
     * @throws IllegalArgumentException where a rank's input memory is larger than the group's region for it
     */
    void load(List<ReduceCall> calls, List<? extends TensorView> partialO, List<? extends TensorView> partialLse,
              Duration timeout) {
        ReduceCall first = calls.getFirst();
        RowLayout row = first.row();
        WorkspaceLayout layout = WorkspaceLayout.forWorkspace(workspaceBytes, cp, row);
        int rows = first.rows();
        if (rows > layout.maxRows()) {
            throw new IllegalArgumentException("partial_o has " + rows + " rows; the workspaces hold at most "
                    + layout.maxRows());
        }
        params.set(MergeTasks.P_CP, cp);
        params.set(MergeTasks.P_ROWS, rows);
        params.set(MergeTasks.P_MAX_ROWS, layout.maxRows());
        params.set(MergeTasks.P_DATA_WORDS, row.dataWords());
        params.set(MergeTasks.P_DATA_LINES, row.dataLines());
        params.set(MergeTasks.P_LINE_GROUPS, row.lineGroups());
        params.set(MergeTasks.P_BF16, first.dtype() == DType.BF16 ? 1 : 0);
        params.set(MergeTasks.P_BASE2, first.mode() == LseMode.BASE2 ? 1 : 0);
        params.set(MergeTasks.P_WS_LONGS, wsLongs);
        params.set(MergeTasks.P_WS_BASE, wsBase);
        params.set(MergeTasks.P_TIMEOUT_MICROS, (int) Math.min(Integer.MAX_VALUE, timeout.toNanos() / 1000));
        int sliceIndex = 0;
        int lseIndex = cp * rows * cp;
        int outIndex = 2 * cp * rows * cp;
        params.set(MergeTasks.P_SLICE_INDEX, sliceIndex);
        params.set(MergeTasks.P_LSE_INDEX, lseIndex);
        params.set(MergeTasks.P_OUT_INDEX, outIndex);
        for (int r = 0; r < cp; r++) {
            ReduceCall call = calls.get(r);
            copyIn("partial_o", r, partialO.get(r).memory(), oIn.getSegment(), (long) r * oCapacity * Short.BYTES,
                    (long) oCapacity * Short.BYTES);
            copyIn("partial_lse", r, partialLse.get(r).memory(), lseIn.getSegment(),
                    (long) r * lseCapacity * Float.BYTES, (long) lseCapacity * Float.BYTES);
            for (int i = 0; i < rows; i++) {
                for (int d = 0; d < cp; d++) {
                    int at = (r * rows + i) * cp + d;
                    index.set(sliceIndex + at, r * oCapacity + (int) call.sliceElement(i, d));
                    index.set(lseIndex + at, r * lseCapacity + (int) call.lseElement(i, d));
                }
                index.set(outIndex + r * rows + i, r * outCapacity + i * row.headDim());
            }
        }
    }

    private static void copyIn(String name, int rank, MemorySegment from, MemorySegment to, long offset,
                               long capacity) {
        if (from.byteSize() > capacity) {
            throw new IllegalArgumentException(name + " of rank " + rank + " lies in " + from.byteSize() + " bytes of"
                    + " memory; the tornado group copies at most " + capacity + " (the packed size of its largest"
                    + " call): pass a view of smaller memory, or a contiguous copy");
        }
        MemorySegment.copy(from, 0, to, offset, from.byteSize());
    }

    /** Copies every rank's output rows of the call last loaded into {@code outs}. */
    void store(List<ReduceCall> calls, List<? extends TensorView> outs) {
        int rows = params.get(MergeTasks.P_ROWS);
        int outIndex = params.get(MergeTasks.P_OUT_INDEX);
        for (int r = 0; r < cp; r++) {
            ReduceCall call = calls.get(r);
            TensorView o = outs.get(r);
            for (int i = 0; i < rows; i++) {
                int from = index.get(outIndex + r * rows + i);
                long to = call.outElement(i);
                for (int d = 0; d < call.headDim(); d++) {
                    o.storeBits(to + d, out.get(from + d));
                }
            }
        }
    }
}
