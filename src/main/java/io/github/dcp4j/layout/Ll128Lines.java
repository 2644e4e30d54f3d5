package io.github.dcp4j.layout;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * The protocol's line operations on host memory, with the memory order in each name (as Agrona's
 * {@code putLongRelease} / {@code getLongAcquire}). A CPU store of 128 bytes is not atomic, so where the GPU writes a
 * whole line in one warp store, the host writes the data words first and the flag word last with release semantics;
 * a reader that sees the flag with acquire semantics then sees the whole line.
 */
public final class Ll128Lines {
    private Ll128Lines() {
    }

    private static final ValueLayout.OfLong WORD = ValueLayout.JAVA_LONG.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle WORD_HANDLE = WORD.varHandle();
    private static final VarHandle U32_HANDLE = U32.varHandle();

    /**
     * Writes one data line at {@code line}: {@code dataBytes} (at most 120) bytes from {@code src}, zeros up to the
     * flag word, then {@code flag}, release-stored last.
     *
     * @param workspace the rank's workspace
     * @param line      the line's byte offset in it
     * @param src       the slice's memory
     * @param srcOffset   the first byte of this line's data in it
     * @param dataBytes   the line's data bytes, at most 120
     * @param flag        the call's data flag
     */
    public static void putDataLineRelease(MemorySegment workspace, long line, MemorySegment src, long srcOffset,
                                          int dataBytes, long flag) {
        MemorySegment.copy(src, srcOffset, workspace, line, dataBytes);
        if (dataBytes < Ll128.LINE_DATA_BYTES) {
            workspace.asSlice(line + dataBytes, Ll128.LINE_DATA_BYTES - dataBytes).fill((byte) 0);
        }
        WORD_HANDLE.setRelease(workspace, line + Ll128.LINE_FLAG_OFFSET, flag);
    }

    /**
     * The flag word of the data line at {@code line}, acquire-loaded: the line's data is visible once it matches.
     *
     * @param workspace the rank's workspace
     * @param line      the line's byte offset in it
     * @return the flag word
     */
    public static long getDataFlagAcquire(MemorySegment workspace, long line) {
        return (long) WORD_HANDLE.getAcquire(workspace, line + Ll128.LINE_FLAG_OFFSET);
    }

    /**
     * Data word {@code word} (0..14) of the line at {@code line}, plain-loaded after its flag's acquire load.
     *
     * @param workspace the rank's workspace
     * @param line      the line's byte offset in it
     * @param word      the word, 0..14
     * @return its 8 bytes
     */
    public static long getDataWordPlain(MemorySegment workspace, long line, int word) {
        return workspace.get(WORD, line + (long) word * Ll128.WORD_BYTES);
    }

    /**
     * Zeroes the flag of a consumed data line, plain-stored: this rank's release stores of its next call's lines
     * publish it to the sender before the sender can reach this line's slot again (two calls later).
     *
     * @param workspace the rank's workspace
     * @param line      the line's byte offset in it
     */
    public static void clearDataFlagPlain(MemorySegment workspace, long line) {
        workspace.set(WORD, line + Ll128.LINE_FLAG_OFFSET, 0L);
    }

    /**
     * Writes the LSE line at {@code line}: {lse bits, flag, 0, flag}, the second flag release-stored last.
     *
     * @param workspace the rank's workspace
     * @param line      the line's byte offset in it
     * @param lseBits   the fp32 bits of the LSE
     * @param flag      the call's LSE flag
     */
    public static void putLseLineRelease(MemorySegment workspace, long line, int lseBits, int flag) {
        workspace.set(U32, line + Ll128.LSE_VALUE_OFFSET, lseBits);
        workspace.set(U32, line + Ll128.LSE_ZERO_OFFSET, 0);
        workspace.set(U32, line + Ll128.LSE_FLAG1_OFFSET, flag);
        U32_HANDLE.setRelease(workspace, line + Ll128.LSE_FLAG2_OFFSET, flag);
    }

    /**
     * Whether both flags of the LSE line at {@code line} equal {@code flag} (the second acquire-loaded first).
     *
     * @param workspace the rank's workspace
     * @param line      the line's byte offset in it
     * @param flag      the call's LSE flag
     * @return true when the line is there
     */
    public static boolean isLseLineReadyAcquire(MemorySegment workspace, long line, int flag) {
        return (int) U32_HANDLE.getAcquire(workspace, line + Ll128.LSE_FLAG2_OFFSET) == flag
                && workspace.get(U32, line + Ll128.LSE_FLAG1_OFFSET) == flag;
    }

    /**
     * The fp32 bits an LSE line carries, plain-loaded after its flags' acquire load.
     *
     * @param workspace the rank's workspace
     * @param line      the line's byte offset in it
     * @return the LSE's bits
     */
    public static int getLseBitsPlain(MemorySegment workspace, long line) {
        return workspace.get(U32, line + Ll128.LSE_VALUE_OFFSET);
    }

    /**
     * Zeroes a consumed LSE line (all four words, as the kernel's v4 store of zeros), plain-stored as a data flag.
     *
     * @param workspace the rank's workspace
     * @param line      the line's byte offset in it
     */
    public static void clearLseLinePlain(MemorySegment workspace, long line) {
        workspace.asSlice(line, Ll128.LSE_LINE_BYTES).fill((byte) 0);
    }

    /**
     * The rank's call counter, acquire-loaded.
     *
     * @param workspace the rank's workspace
     * @return the counter its next call will use
     */
    public static int getEpochAcquire(MemorySegment workspace) {
        return (int) U32_HANDLE.getAcquire(workspace, (long) Ll128.EPOCH_OFFSET);
    }

    /**
     * Sets the rank's call counter, release-stored (the white-box tests force it, as upstream writes ws[:4]).
     *
     * @param workspace the rank's workspace
     * @param epoch     the counter its next call will use
     */
    public static void putEpochRelease(MemorySegment workspace, int epoch) {
        U32_HANDLE.setRelease(workspace, (long) Ll128.EPOCH_OFFSET, epoch);
    }

    /**
     * The call's ticket, as every GPU block takes it at entry: one more arrival in the 64-bit word {epoch, arrivals}
     * (a volatile add); the last of {@code arrivalsPerCall} arrivals advances the epoch and resets the count in a
     * second add, keeping the poisoned bit; where the epoch wraps, that add advances the era too.
     *
     * @param workspace       the rank's workspace
     * @param arrivalsPerCall the arrivals (GPU blocks; 1 on the CPU) that make one call
     * @return the word as it was: the call's epoch in the low 32 bits
     */
    public static long takeTicketVolatile(MemorySegment workspace, int arrivalsPerCall) {
        long old = (long) WORD_HANDLE.getAndAdd(workspace, (long) Ll128.EPOCH_OFFSET, 1L << 32);
        if (((old >>> 32) & Ll128.ARRIVALS_MASK) == arrivalsPerCall - 1) {
            WORD_HANDLE.getAndAdd(workspace, (long) Ll128.EPOCH_OFFSET, lastArrivalDelta(old, arrivalsPerCall));
        }
        return old;
    }

    /**
     * What the last arrival of a call adds to the ticket word it took ({@code ticket}, as it was): one to the epoch,
     * the call's arrivals off the count; where the epoch wraps, its carry moved from the count to the era; where the
     * era wraps too, its carry taken back out of the poisoned bit. The GPU kernels add the same.
     *
     * @param ticket          the word before the last arrival's add
     * @param arrivalsPerCall the arrivals that make one call
     * @return the second add
     */
    public static long lastArrivalDelta(long ticket, int arrivalsPerCall) {
        long delta = 1L - ((long) arrivalsPerCall << 32);
        if ((int) ticket == -1) {
            delta += (1L << (32 + Ll128.ERA_SHIFT)) - (1L << 32);
            if (((ticket >>> (32 + Ll128.ERA_SHIFT)) & Ll128.ERA_MASK) == Ll128.ERA_MASK) {
                delta += Long.MIN_VALUE;  // the era's carry flipped the poisoned bit: flip it back
            }
        }
        return delta;
    }

    /**
     * The era of the call that took this ticket.
     *
     * @param ticket the ticket word the call's arrival returned
     * @return its era, 0 .. ERA_MASK
     */
    public static int era(long ticket) {
        return (int) ((ticket >>> (32 + Ll128.ERA_SHIFT)) & Ll128.ERA_MASK);
    }
}
