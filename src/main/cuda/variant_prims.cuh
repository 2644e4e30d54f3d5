// The primitives of the protocol variants ll, simple and unfused (docs/PROTOCOL.md, "Variants"): their PTX, each
// with its memory order in its name, and the pieces every variant kernel shares with the others (a block's rows, its
// ticket and deadline, a row's weights, batched sends, NaN rows). The merge arithmetic
// is the LL128 kernels' (ll128_prims.cuh: row_weights, accumulate_pair, pack_pair), so every variant's output is
// ExactMerge's bit for bit.
#pragma once

#include "ll128_prims.cuh"

namespace dcp4j {
namespace vptx {

// One LL line (LlLayout): 4 data bytes and their 4-byte flag in one 8-byte store, which lands whole.
__device__ __forceinline__ void st_volatile_ll_line(void* addr, uint32_t data, uint32_t flag) {
    asm volatile("st.volatile.global.v2.u32 [%0], {%1, %2};" ::"l"(addr), "r"(data), "r"(flag) : "memory");
}

// One LL line, data and flag read together by one 8-byte load.
__device__ __forceinline__ uint2 ld_volatile_ll_line(const void* addr) {
    uint2 v;
    asm volatile("ld.volatile.global.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(addr) : "memory");
    return v;
}

// A chunk flag (FencedLayout) published after every store of its chunk: release at system scope, so that a reader on
// another GPU that acquires it sees the chunk's data.
__device__ __forceinline__ void st_release_sys_flag(void* addr, uint32_t flag) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(addr), "r"(flag) : "memory");
}

// A chunk flag read with acquire at system scope: the chunk's data read after it (after the block's barrier) is the
// sender's.
__device__ __forceinline__ uint32_t ld_acquire_sys_flag(const void* addr) {
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(addr) : "memory");
    return v;
}

__device__ __forceinline__ void st_relaxed_clear_flag(void* addr) {
    asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(addr), "r"(0u) : "memory");
}

// 8 bytes of workspace written by a peer in this call (never through the non-coherent cache).
__device__ __forceinline__ uint2 ld_volatile_8(const void* addr) {
    uint2 v;
    asm volatile("ld.volatile.global.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(addr) : "memory");
    return v;
}

// Two LL lines (LlLayout) in one 16-byte store: {data 0, flag, data 1, flag}; each 8-byte half lands whole.
__device__ __forceinline__ void st_volatile_ll_pair(void* addr, uint32_t d0, uint32_t d1, uint32_t flag) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(addr), "r"(d0), "r"(flag), "r"(d1),
                 "r"(flag)
                 : "memory");
}

__device__ __forceinline__ uint32_t ld_volatile_u32(const void* addr) {
    uint32_t v;
    asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(addr) : "memory");
    return v;
}

}  // namespace vptx

constexpr int kQuadBytes = 16;                              // simple's and unfused's send unit: 8 elements
static_assert(kRowDataGranule % kQuadBytes == 0, "every row is whole quads");
static_assert(kLlLineDataBytes == 4 && kLlLineBytes == 8, "an LL line is one 8-byte store: 4 data bytes and a flag");
static_assert(kFencedWordBytes == 4, "LSE values and chunk flags are u32 words");

// One round of one thread's poll (the variants poll per thread, not per warp): the first rounds spin, then sleep,
// doubling up to kMaxSleepNs, as the LL128 kernels' back-off does; true once the deadline has passed (read every
// kDeadlineRounds sleeping rounds). No warp-wide step: the lanes of a warp poll different lines and leave their polls
// at different rounds.
__device__ __forceinline__ bool thread_back_off(int round, const Deadline& deadline) {
    if (round < kSpinRounds) {
        return false;
    }
    const int sleeping = round - kSpinRounds;
    __nanosleep(min(kFirstSleepNs << min(sleeping, 4), kMaxSleepNs));
    return sleeping % kDeadlineRounds == kDeadlineRounds - 1 && deadline.passed();
}

// What every thread of a variant block knows: its rank's arguments, its rows (index, index + B, ...), the call.
template <int N>
struct VariantBlock {
    const LaunchArgs<N>& a;
    const RankArgs& r;
    unsigned char* ws;  // this rank's workspace
    int rank;
    int index;          // this block among its rank's B: also its chunk
    int blocks;         // B
    int rows;           // rows this block owns

    __device__ VariantBlock(const LaunchArgs<N>& args)
        : a(args), r(args.ranks[blockIdx.x / (int)args.blocks_per_rank]),
          ws(args.workspaces[(int)args.ranks[blockIdx.x / (int)args.blocks_per_rank].rank]),
          rank((int)args.ranks[blockIdx.x / (int)args.blocks_per_rank].rank),
          index((int)blockIdx.x % (int)args.blocks_per_rank), blocks((int)args.blocks_per_rank),
          rows(((int)args.rows - (int)blockIdx.x % (int)args.blocks_per_rank + (int)args.blocks_per_rank - 1) /
               (int)args.blocks_per_rank) {}

    __device__ int row(int pos) const { return index + pos * blocks; }
    __device__ int cp() const { return (int)a.cp; }
    __device__ int row_bytes() const { return (int)a.data_words * kWordBytes; }

    // partial_o[row, dst, :] as bytes
    template <typename T>
    __device__ const unsigned char* input(int row, int dst) const {
        return static_cast<const unsigned char*>(r.partial_o) +
               (row_element_offset(a, row, r.o_stride_token, r.o_stride_head) + dst * r.o_stride_peer) * sizeof(T);
    }
    __device__ float input_lse(int row, int src) const {
        return __ldg(r.partial_lse + row_element_offset(a, row, r.lse_stride_token, r.lse_stride_head) +
                     src * r.lse_stride_peer);
    }
    __device__ unsigned char* output(int row) const {
        return static_cast<unsigned char*>(r.out) + (long long)row * row_bytes();
    }
};

// Rows a block merges at once, at most: warp w computes the weights of the group's row w, and the block's threads
// take the group's merge items together, so that short rows still keep every thread busy.
constexpr int kGroupRows = kWarpsPerBlock;

// The block's shared state.
struct VariantShared {
    float weights[kGroupRows][kMaxRanks];  // the weights of the group's rows, by row and source
    unsigned long long ticket;
    Deadline deadline;
};

// The rows a block merges at once for rows of `items` merge items (a thread each): as many as its threads cover, at
// least one.
__device__ __forceinline__ int group_rows(int items) {
    return max(1, min(kGroupRows, kBlockThreads / items));
}

// Memory-level parallelism: a thread of a variant kernel never waits for one load before it issues the next of the
// same step. A send issues the loads of kSendItems items, then their stores; a merge loads one item's words of
// kSourceBatch sources (Ll128.SOURCE_BATCH, the LL128 kernels' batch too), then accumulates them in source order.
// With one load in flight per thread, a block of 256 threads keeps 4 KB in flight, far fewer than the memory system
// needs to reach its bandwidth.
constexpr int kSendItems = 4;
static_assert(kSourceBatch < 32, "a batch's sources are bits of a u32");

// The sources s0 .. s0 + kSourceBatch - 1 that exist (s < cp), as bits 0 .. kSourceBatch - 1.
__device__ __forceinline__ unsigned batch_sources(int s0, int cp) {
    return (1u << min(kSourceBatch, cp - s0)) - 1u;
}

// A kernel's send items, kSendItems per thread at a time: item i = i0 + u x kBlockThreads + threadIdx.x of the batch
// starting at i0 is held in slot u between its load and its store. `Sends` has `items` (the block's count),
// `load(u, i)` and `store(u, flags)`.
template <typename Sends>
__device__ __forceinline__ void load_sends(Sends& s, int i0) {
#pragma unroll
    for (int u = 0; u < kSendItems; ++u) {
        const int i = i0 + u * kBlockThreads + (int)threadIdx.x;
        if (i < s.items) {
            s.load(u, i);
        }
    }
}

// Every send item of the block, batch by batch, each batch's loads issued before its first store; the first batch
// was loaded by the caller (before the ticket, so that its loads are in flight while the ticket is).
template <typename Sends>
__device__ __forceinline__ void send_all(Sends& s, const CallFlags& f) {
#pragma unroll 1
    for (int i0 = 0; i0 < s.items; i0 += kSendItems * kBlockThreads) {
        if (i0 != 0) {
            load_sends(s, i0);
        }
#pragma unroll
        for (int u = 0; u < kSendItems; ++u) {
            if (i0 + u * kBlockThreads + (int)threadIdx.x < s.items) {
                s.store(u, f);
            }
        }
    }
}

// Thread 0 takes the block's ticket (the epoch; the last block of the call advances it) and sets the deadline; every
// thread returns the ticket after the barrier.
__device__ __forceinline__ uint64_t variant_ticket(VariantShared& sh, unsigned char* ws, int blocks, uint64_t start_ns,
                                                   long long timeout_ns) {
    if (threadIdx.x == 0) {
        sh.ticket = take_ticket(ws, blocks);
        sh.deadline = Deadline{start_ns + (uint64_t)timeout_ns};
    }
    __syncthreads();
    return sh.ticket;
}

// 16 bytes of a caller's tensor: one load where every row start is 16-byte aligned, two 8-byte loads otherwise (row
// starts are 8-byte aligned, the contract).
__device__ __forceinline__ uint4 load_input_quad(const unsigned char* p, bool vector16) {
    if (vector16) {
        return __ldg(reinterpret_cast<const uint4*>(p));
    }
    const uint2 lo = __ldg(reinterpret_cast<const uint2*>(p));
    const uint2 hi = __ldg(reinterpret_cast<const uint2*>(p + 8));
    return make_uint4(lo.x, lo.y, hi.x, hi.y);
}

// Every output word of the row NaN (a wait of the block gave up, or the workspace is poisoned).
template <typename T>
__device__ void nan_row(unsigned char* out, int row_bytes) {
    for (int w = threadIdx.x; w * kWordBytes < row_bytes; w += kBlockThreads) {
        reinterpret_cast<uint2*>(out)[w] = make_uint2(nan_pair<T>(), nan_pair<T>());
    }
}

}  // namespace dcp4j
