package io.github.dcp4j.op;

import io.github.dcp4j.layout.Ll128;
import io.github.dcp4j.layout.RowLayout;
import io.github.dcp4j.layout.WorkspaceLayout;

import java.util.Arrays;
import java.util.Objects;

/**
 * One rank's validated arguments: everything an engine needs, with the row addressing worked out. Only
 * {@link #validate} makes one, so an engine never sees an argument that breaks the op's contract.
 *
 * <p>Rows: every point of the leading shape of {@code partial_o [..., cp, D]} is one reduction row. A 4-D
 * {@code [T, H, cp, D]} view may have any strides whose last one is 1 (row = t x H + h); other ranks are contiguous
 * and flattened to {@code [rows, cp, D]}. The output is {@code [rows, D]}, contiguous. Each tensor may be in host
 * memory ({@link TensorView}) or device memory ({@link DeviceTensor}); which ones an engine takes is its own check.
 *
 * @param partialO   {@code [..., cp, D]} fp16 or bf16
 * @param partialLse {@code [..., cp]} fp32, leading dims equal to partialO's
 * @param out        {@code [rows, D]} contiguous, dtype of partialO
 * @param cpRank     this rank
 * @param cpSize     ranks in the group
 * @param mode       base of the LSEs
 * @param layout     the workspace's layout for this call's rows (its row slice's layout included)
 * @param rows       reduction rows (T x H)
 * @param heads      H: rows per token (1 where partialO is not 4-D)
 * @param oStrides   element strides of partialO along (token, head, peer)
 * @param lseStrides element strides of partialLse along (token, head, peer)
 */
public record ReduceCall(Tensor partialO, Tensor partialLse, Tensor out, int cpRank, int cpSize, LseMode mode,
                         WorkspaceLayout layout, int rows, int heads, long[] oStrides, long[] lseStrides) {

    /**
     * The most reduction rows one call takes: the rows of a call are counted in an int. A workspace's layout allows
     * fewer ({@link WorkspaceLayout#mostRows}).
     */
    public static final int MAX_ROWS = Integer.MAX_VALUE;

    /** A call as {@link #validate} builds it (the stride arrays are copied). */
    public ReduceCall {
        oStrides = oStrides.clone();
        lseStrides = lseStrides.clone();
    }

    /**
     * The strides of partialO along (token, head, peer).
     *
     * @return a copy, in elements
     */
    @Override
    public long[] oStrides() {
        return oStrides.clone();
    }

    /**
     * The strides of partialLse along (token, head, peer).
     *
     * @return a copy, in elements
     */
    @Override
    public long[] lseStrides() {
        return lseStrides.clone();
    }

    /**
     * The row slice's layout.
     *
     * @return how one row of one source lies in lines
     */
    public RowLayout row() {
        return layout.row();
    }

    /**
     * Elements of one head.
     *
     * @return D
     */
    public int headDim() {
        return layout.row().headDim();
    }

    /**
     * The element type of partialO and the output.
     *
     * @return fp16 or bf16
     */
    public DType dtype() {
        return partialO.dtype();
    }

    /**
     * Element index (in partialO's memory) of the first element of {@code partial_o[row, peer, :]}.
     *
     * @param rowIndex the reduction row, {@code 0 <= rowIndex < rows}
     * @param peer     the rank the slice belongs to
     * @return that element's index in partialO's memory
     */
    public long sliceElement(int rowIndex, int peer) {
        int t = rowIndex / heads;
        int h = rowIndex - t * heads;
        return partialO.offset() + t * oStrides[0] + h * oStrides[1] + peer * oStrides[2];
    }

    /**
     * Element index (in partialLse's memory) of {@code partial_lse[row, peer]}.
     *
     * @param rowIndex the reduction row
     * @param peer     the rank the value belongs to
     * @return that element's index in partialLse's memory
     */
    public long lseElement(int rowIndex, int peer) {
        int t = rowIndex / heads;
        int h = rowIndex - t * heads;
        return partialLse.offset() + t * lseStrides[0] + h * lseStrides[1] + peer * lseStrides[2];
    }

    /**
     * Element index (in out's memory) of {@code out[row, 0]}.
     *
     * @param rowIndex the reduction row
     * @return that element's index in out's memory
     */
    public long outElement(int rowIndex) {
        return out.offset() + (long) rowIndex * headDim();
    }

    /**
     * The output shape for {@code partialO}'s shape: leading dims flattened, then head_dim.
     *
     * @param partialO a rank's partial outputs, {@code [..., cp, D]}
     * @return {@code [rows, D]}
     * @throws IllegalArgumentException where partialO has fewer than 3 dims, or more rows than {@link #MAX_ROWS}
     */
    public static long[] outputShape(Tensor partialO) {
        long[] s = partialO.shape();
        if (s.length < 3) {
            throw new IllegalArgumentException("partial_o must be [..., cp_size, head_dim] with >= 3 dims; got shape "
                    + Arrays.toString(s));
        }
        return new long[] {rowsOf(s), s[s.length - 1]};
    }

    /**
     * The reduction rows of a partial_o shape {@code [..., cp, D]}: the product of its leading dims, computed
     * without overflow (zero where any of them is zero).
     *
     * @throws IllegalArgumentException naming partial_o, its shape and {@link #MAX_ROWS} where the product exceeds it
     */
    private static long rowsOf(long[] oShape) {
        long rows;
        try {
            rows = Strides.numel(Arrays.copyOf(oShape, oShape.length - 2));
        } catch (IllegalArgumentException e) {
            throw tooManyRows(oShape, MAX_ROWS, "more than " + Long.MAX_VALUE);
        }
        if (rows > MAX_ROWS) {
            throw tooManyRows(oShape, MAX_ROWS, Long.toString(rows));
        }
        return rows;
    }

    private static IllegalArgumentException tooManyRows(long[] oShape, int most, String got) {
        return new IllegalArgumentException("partial_o rows (the product of the leading dims of shape "
                + Arrays.toString(oShape) + ") must be at most " + most + "; got " + got);
    }

    /**
     * Every check of one rank's call, those against its workspace included, and the call with the workspace's
     * layout. Each error names the argument, its value and what is allowed; dtype errors are {@link DTypeException}s.
     * Nothing is read from or written to any memory here.
     *
     * @param partialO   this rank's partial outputs
     * @param partialLse this rank's log-sum-exps
     * @param out        where the merged rows go
     * @param cpRank     this rank
     * @param cpSize     ranks in the group
     * @param mode       the LSEs' base
     * @param workspace  the rank's workspace the call runs on
     * @return the validated call, with the workspace's layout
     * @throws IllegalArgumentException naming the first argument refused
     */
    public static ReduceCall validate(Tensor partialO, Tensor partialLse, Tensor out, int cpRank, int cpSize,
                                      LseMode mode, WorkspaceShape workspace) {
        Objects.requireNonNull(workspace, "workspace");
        ReduceCall call = validate(partialO, partialLse, out, cpRank, cpSize, mode);
        if (workspace.cpSize() != cpSize) {
            throw new IllegalArgumentException("cp_size must match the workspace group's size " + workspace.cpSize()
                    + "; got " + cpSize);
        }
        if (workspace.rank() != cpRank) {
            throw new IllegalArgumentException("cp_rank must be the workspace's rank " + workspace.rank() + "; got "
                    + cpRank);
        }
        WorkspaceLayout layout = WorkspaceLayout.forWorkspace(workspace.bytes(), cpSize, call.row());
        if (call.rows() > layout.maxRows()) {
            throw new IllegalArgumentException("partial_o has " + call.rows() + " rows; the workspace holds at most "
                    + layout.maxRows() + " (max_tokens x local_heads it was sized for)");
        }
        return new ReduceCall(partialO, partialLse, out, cpRank, cpSize, mode, layout, call.rows(), call.heads(),
                call.oStrides, call.lseStrides);
    }

    /**
     * Checks every argument against the op's contract, in the order upstream does, and returns the call with the
     * layout of a workspace that holds exactly its rows (for references that need no workspace). Each error names
     * the argument, its value and what is allowed; dtype errors are {@link DTypeException}s. Nothing is read from or
     * written to any memory here.
     *
     * @param partialO   this rank's partial outputs
     * @param partialLse this rank's log-sum-exps
     * @param out        where the merged rows go
     * @param cpRank     this rank
     * @param cpSize     ranks in the group
     * @param mode       the LSEs' base
     * @return the validated call, with the layout of a workspace of exactly its rows
     * @throws IllegalArgumentException naming the first argument refused
     */
    public static ReduceCall validate(Tensor partialO, Tensor partialLse, Tensor out, int cpRank, int cpSize,
                                      LseMode mode) {
        Objects.requireNonNull(partialO, "partial_o");
        Objects.requireNonNull(partialLse, "partial_lse");
        Objects.requireNonNull(out, "out");
        Objects.requireNonNull(mode, "lse_mode must be 'base2' or 'basee'; got null");
        if (cpSize < 1 || cpSize > Ll128.MAX_RANKS) {
            throw new IllegalArgumentException("cp_size must be in [1, " + Ll128.MAX_RANKS + "]; got " + cpSize);
        }
        if (cpRank < 0 || cpRank >= cpSize) {
            throw new IllegalArgumentException("cp_rank must be in [0, " + cpSize + "); got " + cpRank);
        }
        DType dtype = DType.requireHalf("partial_o", partialO.dtype());
        if (partialLse.dtype() != DType.FP32) {
            throw new DTypeException("partial_lse dtype must be fp32; got " + partialLse.dtype());
        }
        int rank = partialO.rank();
        long[] oShape = partialO.shape();
        if (rank < 3) {
            throw new IllegalArgumentException("partial_o must be [..., cp_size, head_dim] with >= 3 dims; got shape "
                    + Arrays.toString(oShape));
        }
        if (oShape[rank - 2] != cpSize) {
            throw new IllegalArgumentException("partial_o cp axis (dim " + (rank - 2) + ") must equal cp_size "
                    + cpSize + "; got shape " + Arrays.toString(oShape));
        }
        long headDimLong = oShape[rank - 1];
        if (headDimLong > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("head_dim must fit in an int; got " + headDimLong);
        }
        RowLayout row = RowLayout.of((int) headDimLong, dtype.bytes());
        long[] lseShape = partialLse.shape();
        long[] expectedLse = Arrays.copyOf(oShape, rank - 1);
        if (!Arrays.equals(lseShape, expectedLse)) {
            throw new IllegalArgumentException("partial_lse shape must be partial_o's leading dims + cp_size, "
                    + Arrays.toString(expectedLse) + "; got " + Arrays.toString(lseShape));
        }
        if (partialO.stride(rank - 1) != 1 && row.headDim() > 1) {
            throw new IllegalArgumentException("partial_o last dimension must be contiguous (stride 1); got strides "
                    + Arrays.toString(partialO.strides()));
        }
        int rows = Math.toIntExact(rowsOf(oShape));
        if (rows == 0) {
            throw new IllegalArgumentException("partial_o has zero rows (shape " + Arrays.toString(oShape)
                    + "); zero-token inputs are not supported: skip the call on every rank");
        }
        if (rows > WorkspaceLayout.mostRows(cpSize)) {
            throw tooManyRows(oShape, WorkspaceLayout.mostRows(cpSize), rows + " (rows x max(cp_size, 32) must fit"
                    + " in an int at cp_size " + cpSize + ")");
        }
        long[] oStrides;
        long[] lseStrides;
        int heads;
        if (rank == 4) {
            heads = Math.toIntExact(oShape[1]);  // at most rows
            oStrides = new long[] {partialO.stride(0), partialO.stride(1), partialO.stride(2)};
            lseStrides = new long[] {partialLse.stride(0), partialLse.stride(1), partialLse.stride(2)};
        } else {
            if (!partialO.isContiguous()) {
                throw new IllegalArgumentException("partial_o must be contiguous unless it is 4-D [T, H, cp, D];"
                        + " got shape " + Arrays.toString(oShape) + " strides " + Arrays.toString(partialO.strides()));
            }
            if (!partialLse.isContiguous()) {
                throw new IllegalArgumentException("partial_lse must be contiguous unless it is 3-D [T, H, cp];"
                        + " got shape " + Arrays.toString(lseShape) + " strides "
                        + Arrays.toString(partialLse.strides()));
            }
            heads = 1;
            oStrides = new long[] {(long) cpSize * row.headDim(), 0, row.headDim()};
            lseStrides = new long[] {cpSize, 0, 1};
        }
        long[] rowSizes = rank == 4 ? new long[] {oShape[0], oShape[1], oShape[2]} : new long[] {rows, 1, cpSize};
        requireRowAlignment(partialO, rowSizes, oStrides);
        long[] outShape = {rows, row.headDim()};
        if (out.dtype() != dtype) {
            throw new DTypeException("out dtype must be partial_o's, " + dtype + "; got " + out.dtype());
        }
        if (!Arrays.equals(out.shape(), outShape) || !out.isContiguous()) {
            throw new IllegalArgumentException("out must be contiguous " + Arrays.toString(outShape) + "; got shape "
                    + Arrays.toString(out.shape()) + " strides " + Arrays.toString(out.strides()));
        }
        requireFirstByteAligned("out", out, Ll128.ROW_ALIGNMENT);
        requireFirstByteAligned("partial_lse", partialLse, Float.BYTES);
        return new ReduceCall(partialO, partialLse, out, cpRank, cpSize, mode, new WorkspaceLayout(cpSize, rows, row),
                rows, heads, oStrides, lseStrides);
    }

    /** The address of a tensor's memory, where it has one: native host memory or device memory (0 for heap memory). */
    private static long address(Tensor t) {
        return switch (t) {
            case TensorView v -> v.memory().isNative() ? v.memory().address() : 0;
            case DeviceTensor d -> d.address();
        };
    }

    /**
     * The kernel reads partial_lse with 4-byte loads and writes out's rows with 8-byte stores: their first bytes
     * must be aligned so (out's rows then are, its rows being whole 16-byte granules). Host views are copied into
     * aligned device buffers, so only their element offset matters there.
     */
    private static void requireFirstByteAligned(String name, Tensor t, int alignment) {
        long base = t instanceof DeviceTensor d ? d.address() : 0;
        if ((base + t.offset() * t.dtype().bytes()) % alignment != 0) {
            throw new IllegalArgumentException(name + " must start " + alignment + "-byte aligned; got offset "
                    + t.offset() + (base != 0 ? " at address 0x" + Long.toHexString(base) : ""));
        }
    }

    /** Row starts are offset + t x s0 + h x s1 + p x s2 for every index within {@code sizes}: all 8-byte aligned. */
    private static void requireRowAlignment(Tensor partialO, long[] sizes, long[] rowStrides) {
        int elem = partialO.dtype().bytes();
        long alignment = Ll128.ROW_ALIGNMENT;
        long address = address(partialO);  // 0 for heap memory, which the CPU engine alone reads
        boolean aligned = partialO.offset() * elem % alignment == 0 && address % alignment == 0;
        for (int i = 0; i < 3; i++) {
            if (sizes[i] > 1 && rowStrides[i] * elem % alignment != 0) {
                aligned = false;
            }
        }
        if (!aligned) {
            throw new IllegalArgumentException("every row of partial_o must start " + alignment + "-byte aligned;"
                    + " got offset " + partialO.offset() + " and strides " + Arrays.toString(partialO.strides())
                    + " in elements of " + elem + " bytes"
                    + (address != 0 ? " at address 0x" + Long.toHexString(address) : ""));
        }
    }
}
