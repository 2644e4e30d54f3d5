package io.github.dcp4j.layout;

import io.github.dcp4j.op.DType;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.HashSet;
import java.util.Set;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Line packing round trips, checked byte by byte against the diagram in {@link Ll128}. */
class Ll128LinesTest {
    private static final ValueLayout.OfLong LE_LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt LE_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    @Test
    void everyAllowedHeadDimPacksIntoLinesAndBack() {
        SplittableRandom random = new SplittableRandom(11);
        try (Arena arena = Arena.ofConfined()) {
            for (int headDim = 8; headDim * 2 <= Ll128.MAX_ROW_DATA_BYTES; headDim += 8) {
                RowLayout row = RowLayout.of(headDim, DType.BF16.bytes());
                MemorySegment src = arena.allocate(row.dataBytes(), 8);
                for (long i = 0; i < src.byteSize(); i++) {
                    src.set(ValueLayout.JAVA_BYTE, i, (byte) random.nextInt());
                }
                MemorySegment lines = arena.allocate(row.dataLineBytes(), Ll128.LINE_BYTES);
                for (long i = 0; i < lines.byteSize(); i++) {
                    lines.set(ValueLayout.JAVA_BYTE, i, (byte) 0xA5); // stale bytes the packing must overwrite
                }
                long flag = Ll128.dataFlag(random.nextInt());
                for (int line = 0; line < row.dataLines(); line++) {
                    int offset = line * Ll128.LINE_DATA_BYTES;
                    Ll128Lines.putDataLineRelease(lines, (long) line * Ll128.LINE_BYTES, src, offset,
                            Math.min(Ll128.LINE_DATA_BYTES, row.dataBytes() - offset), flag);
                }
                for (int line = 0; line < row.dataLines(); line++) {
                    long base = (long) line * Ll128.LINE_BYTES;
                    for (int k = 0; k < Ll128.LINE_DATA_WORDS; k++) {
                        int j = line * 15 + k; // the row's data word j lives in line j / 15, word j % 15
                        long expected = j < row.dataWords() ? src.get(LE_LONG, 8L * j) : 0L;
                        assertEquals(expected, lines.get(LE_LONG, base + 8L * k),
                                "head_dim " + headDim + " line " + line + " word " + k);
                        assertEquals(expected, Ll128Lines.getDataWordPlain(lines, base, k));
                    }
                    assertEquals(flag, lines.get(LE_LONG, base + 120), "flag is word 15 (bytes 120..127)");
                    assertEquals(flag, Ll128Lines.getDataFlagAcquire(lines, base));
                    Ll128Lines.clearDataFlagPlain(lines, base);
                    assertEquals(0L, lines.get(LE_LONG, base + 120), "a consumed flag reads zero");
                }
            }
        }
    }

    @Test
    void lseLineIsValueFlagZeroFlag() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment line = arena.allocate(16, 16);
            line.fill((byte) 0x5A);
            int bits = Float.floatToRawIntBits(-3.25f);
            Ll128Lines.putLseLineRelease(line, 0, bits, 0x1234);
            assertEquals(bits, line.get(LE_INT, 0));
            assertEquals(0x1234, line.get(LE_INT, 4));
            assertEquals(0, line.get(LE_INT, 8));
            assertEquals(0x1234, line.get(LE_INT, 12));
            assertTrue(Ll128Lines.isLseLineReadyAcquire(line, 0, 0x1234));
            assertFalse(Ll128Lines.isLseLineReadyAcquire(line, 0, 0x1235), "another call's flag never matches");
            line.set(LE_INT, 4, 0);
            assertFalse(Ll128Lines.isLseLineReadyAcquire(line, 0, 0x1234), "both flag copies must match");
            Ll128Lines.clearLseLinePlain(line, 0);
            for (int i = 0; i < 4; i++) {
                assertEquals(0, line.get(LE_INT, 4L * i));
            }
        }
    }

    /**
     * The ticket word through calls of 5 arrivals, against a model of its fields (epoch, count, era, poisoned bit):
     * the epoch wraps from 2^32 - 1 to 0 and advances the era; the era wraps from its last value to 0 and leaves the
     * poisoned bit as it was, set or clear.
     */
    @Test
    void ticketsAdvanceTheEpochAndTheEraWhereTheEpochWraps() {
        int arrivals = 5;
        for (boolean poisoned : new boolean[] {false, true}) {
            for (long era : new long[] {0, 1, 1234, Ll128.ERA_MASK - 1, Ll128.ERA_MASK}) {
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment ws = arena.allocate(Ll128.PAYLOAD_OFFSET, Ll128.PAYLOAD_OFFSET);
                    long epoch = 0xFFFF_FFFFL - 2;
                    long expectedEra = era;
                    ws.set(LE_LONG, 0, epoch | ticketHigh(0, era, poisoned));
                    for (int call = 0; call < 6; call++) {
                        for (int a = 0; a < arrivals; a++) {
                            long ticket = Ll128Lines.takeTicketVolatile(ws, arrivals);
                            assertEquals(epoch, ticket & 0xFFFF_FFFFL, "every arrival of a call sees its epoch");
                            assertEquals(ticketHigh(a, expectedEra, poisoned), ticket & 0xFFFF_FFFF_0000_0000L,
                                    "call " + call + " arrival " + a);
                            assertEquals((int) expectedEra, Ll128Lines.era(ticket));
                        }
                        if (epoch == 0xFFFF_FFFFL) {
                            expectedEra = (expectedEra + 1) & Ll128.ERA_MASK;
                        }
                        epoch = (epoch + 1) & 0xFFFF_FFFFL;
                        assertEquals(epoch | ticketHigh(0, expectedEra, poisoned), ws.get(LE_LONG, 0),
                                "after call " + call + " (era " + era + ", poisoned " + poisoned + ")");
                    }
                    assertEquals(3, epoch);
                    assertEquals((era + 1) & Ll128.ERA_MASK, expectedEra);
                }
            }
        }
    }

    private static long ticketHigh(long count, long era, boolean poisoned) {
        return (count | era << Ll128.ERA_SHIFT | (poisoned ? Ll128.POISONED_BIT : 0)) << 32;
    }

    /**
     * Keyed data flags are never zero, differ for every (era, epoch) of one key (the epochs around the wrap and the
     * eras on either side of theirs), and differ between keys.
     */
    @Test
    void keyedDataFlagsAreNeverZeroAndNeverRepeatWithinOneKey() {
        SplittableRandom random = new SplittableRandom(29);
        for (int k = 0; k < 50; k++) {
            long key = Ll128.flagKey(random.nextLong());
            long otherKey = Ll128.flagKey(random.nextLong());
            Set<Long> seen = new HashSet<>();
            for (int era : new int[] {0, 1, (int) Ll128.ERA_MASK}) {
                for (int epoch : new int[] {-3, -2, -1, 0, 1, 2, random.nextInt()}) {
                    long flag = Ll128.keyedDataFlag(key, era, epoch);
                    assertTrue(flag != 0, "key " + Long.toHexString(key) + " era " + era + " epoch " + epoch);
                    assertTrue(seen.add(flag), "era " + era + " epoch " + epoch + " repeats a flag");
                    assertTrue(flag != Ll128.keyedDataFlag(otherKey, era, epoch), "two keys give one flag");
                }
            }
        }
        assertEquals(Ll128.FLAG_KEY_BIT | 0x1234L << 32 | 0xFFFF_FFFFL,
                Ll128.keyedDataFlag(Ll128.flagKey(0), 0x1234, -1), "key XOR (era << 32 | u32 epoch)");
    }
}
