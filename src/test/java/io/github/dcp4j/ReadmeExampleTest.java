package io.github.dcp4j;

import io.github.dcp4j.engine.cpu.CpuEngine;
import io.github.dcp4j.op.DType;
import io.github.dcp4j.op.LseMode;
import io.github.dcp4j.op.TensorView;
import io.github.dcp4j.op.WorkspaceSpec;
import io.github.dcp4j.reference.RandomInputs;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

/** The README's embedding example, run as written: one thread per rank, each on its own workspace. */
class ReadmeExampleTest {
    @Test
    void eachRankOnItsOwnThread() throws Exception {
        int cp = 8, heads = 16, headDim = 512, tokens = 4;
        try (Arena arena = Arena.ofShared();
             CpuEngine group = CpuEngine.open(new WorkspaceSpec(tokens, heads, cp, headDim, DType.BF16))) {
            List<TensorView> partialOs = new ArrayList<>();
            List<TensorView> partialLses = new ArrayList<>();
            TensorView[] outs = new TensorView[cp];
            List<Thread> ranks = new ArrayList<>();
            SplittableRandom random = new SplittableRandom(42);
            for (int rank = 0; rank < cp; rank++) {
                TensorView attnOut = TensorView.allocate(arena, DType.BF16, tokens, cp * heads, headDim);
                TensorView attnLse = TensorView.allocate(arena, DType.FP32, tokens, cp * heads);
                RandomInputs.fillGaussian(attnOut, random, 1.0);
                RandomInputs.fillGaussian(attnLse, random, 3.0);
                TensorView partialO = attnOut.unflatten(1, cp, heads).permute(0, 2, 1, 3);
                TensorView partialLse = attnLse.unflatten(1, cp, heads).permute(0, 2, 1);
                partialOs.add(partialO);
                partialLses.add(partialLse);
                int r = rank;
                ranks.add(Thread.ofPlatform().start(() -> outs[r] = DcpLseReduce.reduce(partialO, partialLse,
                        group.workspace(r), r, cp, LseMode.BASE2)));
            }
            for (Thread t : ranks) {
                t.join();
            }
            Tensors.Group g = new Tensors.Group(partialOs, partialLses);
            for (int r = 0; r < cp; r++) {
                assertArrayEquals(Tensors.exact(arena, g, r, LseMode.BASE2), Tensors.bits(outs[r]), "rank " + r);
            }
        }
    }
}
