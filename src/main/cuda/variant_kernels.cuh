// The protocol variants beside LL128 (docs/PROTOCOL.md, "Variants"; op.Variant): ll, simple and unfused, each behind
// the same launch parameter (LaunchArgs, with the variant's region sizes in data_slot_bytes, lse_region_offset and
// lse_slot_bytes), the same ticket, flags, bounded waits, timeout records and NaN rows as the LL128 kernels, and the
// same merge (variant_prims.cuh), so that their outputs equal ExactMerge's bit for bit.
//
// Every kernel runs 256-thread blocks, B = blocks_per_rank per rank, block b owning the rows b, b + B, ... in both
// roles. The fused ones (ll, simple) send every row of the block before they wait for any, and need every block of
// every rank resident at once, as the LL128 kernels do (the host sizes the grid). None lets the next launch start
// early: a variant's launches are ordered as a stream orders kernels.
//   ll:      every 4 bytes of a slice travel with their own 4-byte flag (LlLayout); the receiver polls each line.
//   simple:  slices copied raw with 16-byte stores into the peer's slot (FencedLayout), then, after a block barrier,
//            one release flag per (source, destination, block); the receiving block acquires its flags, then reads.
//   unfused: a copy kernel that sends as simple does, every slice (the own one too, into the own workspace), and a
//            merge kernel, after it on the stream, that acquires the flags and merges from the workspace alone.
#pragma once

#include "variant_prims.cuh"

namespace dcp4j {

// ---- ll -------------------------------------------------------------------------------------------------------------

// ll's send items of a block: a row's (peer, k) pairs, k < words: word k of the peer's slice (two LL lines, one
// 16-byte store); k == words: the row's LSE line for the peer.
template <int N, typename T>
struct LlSends {
    const VariantBlock<N>& b;
    int words;     // 8-byte words of a slice
    int per_peer;  // a peer's items of a row: its words and its LSE line
    int per_row;
    int items;
    uint2 held[kSendItems];
    int row[kSendItems];
    int dst[kSendItems];
    int k[kSendItems];

    __device__ explicit LlSends(const VariantBlock<N>& block)
        : b(block), words((int)block.a.data_words), per_peer(words + 1), per_row((block.cp() - 1) * per_peer),
          items(block.rows * per_row) {}

    __device__ __forceinline__ void load(int u, int i) {
        const int pos = i / per_row;
        const int peer = (i - pos * per_row) / per_peer;
        const int d = peer < b.rank ? peer : peer + 1;
        row[u] = b.row(pos);
        dst[u] = d;
        k[u] = i - pos * per_row - peer * per_peer;
        held[u] = k[u] < words ? __ldg(reinterpret_cast<const uint2*>(b.template input<T>(row[u], d)) + k[u])
                               : make_uint2(__float_as_uint(b.input_lse(row[u], d)), 0u);
    }

    __device__ __forceinline__ void store(int u, const CallFlags& f) const {
        const LaunchArgs<N>& a = b.a;
        const long long src_row = b.rank * a.max_rows + row[u];
        if (k[u] < words) {
            vptx::st_volatile_ll_pair(a.workspaces[dst[u]] + kPayloadOffset + f.slot * a.data_slot_bytes +
                                          (src_row * 2 * words + 2 * k[u]) * kLlLineBytes,
                                      held[u].x, held[u].y, f.lse);
        } else {
            vptx::st_volatile_ll_line(a.workspaces[dst[u]] + a.lse_region_offset + f.slot * a.lse_slot_bytes +
                                          src_row * kLlLineBytes,
                                      held[u].x, f.lse);
        }
    }
};

template <int N, typename T, bool kBaseE>
__device__ void ll_reduce(const LaunchArgs<N>& a) {
    __shared__ VariantShared sh;
    ptx::grid_dependency_wait();  // before the ticket, the flags and the inputs are read, and before the deadline
    const uint64_t start_ns = ptx::globaltimer_ns();
    const VariantBlock<N> b(a);
    LlSends<N, T> sends(b);
    load_sends(sends, 0);  // in flight while the ticket is
    const uint64_t ticket = variant_ticket(sh, b.ws, b.blocks, start_ns, a.timeout_ns);
    const uint32_t epoch = (uint32_t)ticket;
    const CallFlags f = call_flags(epoch, a.slot_mask);
    bool gave_up = ticket_poisoned(ticket);  // the workspace may hold a failed call's lines: nothing is read
    if (gave_up && threadIdx.x == 0) {
        *reinterpret_cast<volatile unsigned int*>(a.status) = kStatusFailed;
    }
    send_all(sends, f);  // a poisoned rank still sends

    // Receive and merge, a group of rows at a time; a merge item is one (row, LL line) of the group, a thread each:
    // one pair of output elements. A thread issues the loads of its first item's lines (every source of the first
    // batch) before the weights, so that they are in flight while warp w polls row w's LSE lines (lane l those of
    // sources l and l + 32) and computes the row's weights; then it polls what is still missing, zeroes the lines
    // and merges the pair in source order, kSourceBatch sources at a time.
    const int cp = b.cp();
    const int lines = 2 * sends.words;  // LL lines of a slice: one pair of elements each
    const int per_group = group_rows(lines);
    const int warp = threadIdx.x / kWarpSize;
    const int lane = threadIdx.x % kWarpSize;
    // Source s's LSE for `row`: the own from partial_lse, another's LSE line polled and zeroed. False on timeout.
    const auto lse_of = [&](int s, int row, float& value) {
        if (s == b.rank) {
            value = b.input_lse(row, s);
            return true;
        }
        unsigned char* line = b.ws + a.lse_region_offset + f.slot * a.lse_slot_bytes +
                              (s * a.max_rows + row) * kLlLineBytes;
#pragma unroll 1
        for (int round = 0;; ++round) {
            const uint2 v = vptx::ld_volatile_ll_line(line);
            if (v.y == f.lse) {
                value = __uint_as_float(v.x);
                ptx::st_volatile_clear_flag(line);
                return true;
            }
            if (thread_back_off(round, sh.deadline)) {
                record_timeout(b.ws, a.status, kTimeoutLseLine, s, row, 0, epoch);
                return false;
            }
        }
    };
    // Source s's LL line l of `row` in this rank's workspace.
    const auto line_at = [&](int s, int row, int l) {
        return b.ws + kPayloadOffset + f.slot * a.data_slot_bytes + ((s * a.max_rows + row) * lines + l) * kLlLineBytes;
    };
    // The sources of the batch from s0 whose lines are polled: all but the own rank, whose pair comes from
    // partial_o (`own`).
    const auto polled = [&](int s0) {
        const unsigned self = b.rank - s0;
        return batch_sources(s0, cp) & ~(self < (unsigned)kSourceBatch ? 1u << self : 0u);
    };
    // got[j]: source s0 + j's line of the thread's item, {data, flag}, loaded for the sources of `sources`.
    uint2 got[kSourceBatch];
    uint32_t own = 0u;
    const auto issue = [&](int s0, int row, int l, unsigned sources) {
#pragma unroll
        for (int j = 0; j < kSourceBatch; ++j) {
            if (sources >> j & 1u) {
                got[j] = vptx::ld_volatile_ll_line(line_at(s0 + j, row, l));
            }
        }
    };
    const auto issue_item = [&](int row, int l) {
        own = __ldg(reinterpret_cast<const uint32_t*>(b.template input<T>(row, b.rank)) + l);
        issue(0, row, l, polled(0));
    };
    // Merges line l of group row k (`row`): true, or false once a wait gave up (recorded; the pair is NaN).
    const auto merge_line = [&](int k, int row, int l, bool first_issued) {
        float acc[kElemsPerPair] = {0.f, 0.f};
        bool ok = true;
        if (!first_issued) {
            issue_item(row, l);
        }
#pragma unroll 1
        for (int s0 = 0; s0 < cp && ok; s0 += kSourceBatch) {
            unsigned missing = polled(s0);
            if (s0 != 0) {
                issue(s0, row, l, missing);
            }
#pragma unroll 1
            for (int round = 0;; ++round) {
#pragma unroll
                for (int j = 0; j < kSourceBatch; ++j) {
                    if ((missing >> j & 1u) && got[j].y == f.lse) {
                        missing &= ~(1u << j);
                    }
                }
                if (missing == 0u) {
                    break;
                }
                if (thread_back_off(round, sh.deadline)) {
                    record_timeout(b.ws, a.status, kTimeoutDataLine, s0 + __ffs(missing) - 1, row, l, epoch);
                    ok = false;
                    break;
                }
                issue(s0, row, l, missing);
            }
            if (ok) {
#pragma unroll
                for (int j = 0; j < kSourceBatch; ++j) {
                    const int s = s0 + j;
                    if (s < cp) {
                        if (s != b.rank) {
                            ptx::st_volatile_clear_flag(line_at(s, row, l));
                        }
                        accumulate_pair<T>(acc, sh.weights[k][s], s == b.rank ? own : got[j].x);
                    }
                }
            }
        }
        reinterpret_cast<uint32_t*>(b.output(row))[l] = ok ? pack_pair<T>(acc) : nan_pair<T>();
        return ok;
    };
    const auto nan_rows = [&](int pos0, int n) {
        for (int k = 0; k < n; ++k) {
            nan_row<T>(b.output(b.row(pos0 + k)), b.row_bytes());
        }
    };
#pragma unroll 1
    for (int pos0 = 0; pos0 < b.rows; pos0 += per_group) {
        const int n = min(per_group, b.rows - pos0);
        if (gave_up) {
            nan_rows(pos0, n);
            continue;
        }
        const int items = n * lines;
        if ((int)threadIdx.x < items) {
            const int k = threadIdx.x / lines;
            issue_item(b.row(pos0 + k), threadIdx.x - k * lines);
        }
        bool ok = true;
        if (warp < n) {
            const int row = b.row(pos0 + warp);
            float l0 = -INFINITY;
            float l1 = -INFINITY;
            if (lane < cp) {
                ok = lse_of(lane, row, l0);
            }
            if (ok && lane + kWarpSize < cp) {
                ok = lse_of(lane + kWarpSize, row, l1);
            }
            row_weights<kBaseE>(l0, l1, cp, lane, sh.weights[warp]);  // every lane, also one whose poll gave up
        }
        if (__syncthreads_or(!ok)) {
            gave_up = true;
            nan_rows(pos0, n);
            continue;
        }
#pragma unroll 1
        for (int i = threadIdx.x; i < items && ok; i += kBlockThreads) {
            const int k = i / lines;
            ok = merge_line(k, b.row(pos0 + k), i - k * lines, i == (int)threadIdx.x);
        }
        if (__syncthreads_or(!ok)) {  // also keeps the weights until every thread has merged the group
            gave_up = true;
            nan_rows(pos0, n);
        }
    }
}

// ---- simple and unfused: fence and flag ---------------------------------------------------------------------------

// The FencedLayout offsets of a launch (its region sizes passed in the LL128 fields' places).
template <int N>
struct Fenced {
    const LaunchArgs<N>& a;

    __device__ long long data(int slot, int src, int row) const {
        return kPayloadOffset + slot * a.data_slot_bytes + (src * a.max_rows + row) * (a.data_words * kWordBytes);
    }
    __device__ long long lse(int slot, int src, int row) const {
        return a.lse_region_offset + slot * a.lse_slot_bytes + (src * a.max_rows + row) * kFencedWordBytes;
    }
    __device__ long long flag(int slot, int src, int chunk) const {
        return a.lse_region_offset + (kNumSlots + slot) * a.lse_slot_bytes +
               (src * a.max_rows + chunk) * kFencedWordBytes;
    }
};

// simple's and unfused's send items of a block: a row's (destination, k) pairs, k < quads: quad k of the slice as
// one raw 16-byte store; k == quads: the row's LSE value. Destinations: every other rank, and the own one too where
// `to_self` (unfused).
template <int N, typename T>
struct FencedSends {
    const VariantBlock<N>& b;
    bool to_self;
    int quads;
    int per_dst;  // a destination's items of a row: its quads and its LSE value
    int per_row;
    int items;
    uint4 held[kSendItems];
    int row[kSendItems];
    int dst[kSendItems];
    int k[kSendItems];

    __device__ FencedSends(const VariantBlock<N>& block, bool self)
        : b(block), to_self(self), quads(block.row_bytes() / kQuadBytes), per_dst(quads + 1),
          per_row((self ? block.cp() : block.cp() - 1) * per_dst), items(block.rows * per_row) {}

    __device__ __forceinline__ void load(int u, int i) {
        const int pos = i / per_row;
        const int d = (i - pos * per_row) / per_dst;
        row[u] = b.row(pos);
        dst[u] = to_self || d < b.rank ? d : d + 1;
        k[u] = i - pos * per_row - d * per_dst;
        held[u] = k[u] < quads
                      ? load_input_quad(b.template input<T>(row[u], dst[u]) + k[u] * kQuadBytes, b.a.vector16)
                      : make_uint4(__float_as_uint(b.input_lse(row[u], dst[u])), 0u, 0u, 0u);
    }

    __device__ __forceinline__ void store(int u, const CallFlags& f) const {
        const Fenced<N> at{b.a};
        unsigned char* to = b.a.workspaces[dst[u]];
        if (k[u] < quads) {
            *reinterpret_cast<uint4*>(to + at.data(f.slot, b.rank, row[u]) + k[u] * kQuadBytes) = held[u];
        } else {
            *reinterpret_cast<uint32_t*>(to + at.lse(f.slot, b.rank, row[u])) = held[u].x;
        }
    }
};

// Sends every item of `sends` (its first batch loaded by the caller); then, after the block's barrier, thread d
// publishes destination d's flag of this block's chunk.
template <int N, typename T>
__device__ void fenced_send(FencedSends<N, T>& sends, const CallFlags& f) {
    const VariantBlock<N>& b = sends.b;
    const Fenced<N> at{b.a};
    send_all(sends, f);
    __syncthreads();  // every store of the chunk is performed relative to the threads that publish its flags
    for (int dst = threadIdx.x; dst < b.cp(); dst += kBlockThreads) {
        if (dst != b.rank || sends.to_self) {
            vptx::st_release_sys_flag(b.a.workspaces[dst] + at.flag(f.slot, b.rank, b.index), f.lse);
        }
    }
}

// Acquires this block's chunk flag from every source (the own rank too where `from_self`), zeroing each, then merges
// the block's rows from the workspace (the own rank's slice from partial_o where not `from_self`). `gave_up`: the
// workspace is poisoned, so nothing is read and every row is NaN.
template <int N, typename T, bool kBaseE>
__device__ void fenced_receive(const VariantBlock<N>& b, VariantShared& sh, const CallFlags& f, uint32_t epoch,
                               bool gave_up, bool from_self) {
    const LaunchArgs<N>& a = b.a;
    const Fenced<N> at{a};
    const int cp = b.cp();
    bool ok = true;
    if (!gave_up) {
        for (int s = threadIdx.x; s < cp; s += kBlockThreads) {
            if (s == b.rank && !from_self) {
                continue;
            }
            unsigned char* flag = b.ws + at.flag(f.slot, s, b.index);
#pragma unroll 1
            for (int round = 0;; ++round) {
                if (vptx::ld_acquire_sys_flag(flag) == f.lse) {
                    vptx::st_relaxed_clear_flag(flag);
                    break;
                }
                if (thread_back_off(round, sh.deadline)) {
                    record_timeout(b.ws, a.status, kTimeoutDataLine, s, b.row(0), 0, epoch);
                    ok = false;
                    break;
                }
            }
        }
    }
    gave_up = __syncthreads_or(gave_up || !ok);  // the acquires, then the barrier, then every thread's reads
    // A group of rows at a time; a merge item is one (row, 8-byte word) of the group, a thread each. A thread loads
    // its first item's words (every source of the first batch) before the weights, so that they are in flight while
    // warp w reads row w's LSE values and computes its weights; then it merges the word in source order,
    // kSourceBatch sources at a time.
    const int words = (int)a.data_words;
    const int per_group = group_rows(words);
    const int warp = threadIdx.x / kWarpSize;
    const int lane = threadIdx.x % kWarpSize;
    const auto lse_of = [&](int s, int row) {
        return s == b.rank && !from_self ? b.input_lse(row, s)
                                         : __uint_as_float(vptx::ld_volatile_u32(b.ws + at.lse(f.slot, s, row)));
    };
    // got[j]: source s0 + j's word w of `row` (the own rank's from partial_o where not `from_self`).
    uint2 got[kSourceBatch];
    const auto load_words = [&](int s0, int row, int w) {
#pragma unroll
        for (int j = 0; j < kSourceBatch; ++j) {
            const int s = s0 + j;
            if (s < cp) {
                got[j] = s == b.rank && !from_self
                             ? __ldg(reinterpret_cast<const uint2*>(b.template input<T>(row, s)) + w)
                             : vptx::ld_volatile_8(b.ws + at.data(f.slot, s, row) + w * kWordBytes);
            }
        }
    };
#pragma unroll 1
    for (int pos0 = 0; pos0 < b.rows; pos0 += per_group) {
        const int n = min(per_group, b.rows - pos0);
        if (gave_up) {
            for (int k = 0; k < n; ++k) {
                nan_row<T>(b.output(b.row(pos0 + k)), b.row_bytes());
            }
            continue;
        }
        const int items = n * words;
        if ((int)threadIdx.x < items) {
            const int k = threadIdx.x / words;
            load_words(0, b.row(pos0 + k), threadIdx.x - k * words);
        }
        if (warp < n) {
            const int row = b.row(pos0 + warp);
            const float l0 = lane < cp ? lse_of(lane, row) : -INFINITY;
            const float l1 = lane + kWarpSize < cp ? lse_of(lane + kWarpSize, row) : -INFINITY;
            row_weights<kBaseE>(l0, l1, cp, lane, sh.weights[warp]);
        }
        __syncthreads();
#pragma unroll 1
        for (int i = threadIdx.x; i < items; i += kBlockThreads) {
            const int k = i / words;
            const int w = i - k * words;
            const int row = b.row(pos0 + k);
            float acc[kElemsPerWord] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 1
            for (int s0 = 0; s0 < cp; s0 += kSourceBatch) {
                if (s0 != 0 || i != (int)threadIdx.x) {
                    load_words(s0, row, w);
                }
#pragma unroll
                for (int j = 0; j < kSourceBatch; ++j) {
                    if (s0 + j < cp) {
                        accumulate_pair<T>(acc, sh.weights[k][s0 + j], got[j].x);
                        accumulate_pair<T>(acc + kElemsPerPair, sh.weights[k][s0 + j], got[j].y);
                    }
                }
            }
            reinterpret_cast<uint2*>(b.output(row))[w] =
                make_uint2(pack_pair<T>(acc), pack_pair<T>(acc + kElemsPerPair));
        }
        __syncthreads();  // the weights stay until every thread has merged the group
    }
}

template <int N, typename T, bool kBaseE>
__device__ void simple_reduce(const LaunchArgs<N>& a) {
    __shared__ VariantShared sh;
    ptx::grid_dependency_wait();
    const uint64_t start_ns = ptx::globaltimer_ns();
    const VariantBlock<N> b(a);
    FencedSends<N, T> sends(b, false);
    load_sends(sends, 0);  // in flight while the ticket is
    const uint64_t ticket = variant_ticket(sh, b.ws, b.blocks, start_ns, a.timeout_ns);
    const uint32_t epoch = (uint32_t)ticket;
    const CallFlags f = call_flags(epoch, a.slot_mask);
    const bool poisoned = ticket_poisoned(ticket);
    if (poisoned && threadIdx.x == 0) {
        *reinterpret_cast<volatile unsigned int*>(a.status) = kStatusFailed;
    }
    fenced_send(sends, f);  // a poisoned rank still sends
    fenced_receive<N, T, kBaseE>(b, sh, f, epoch, poisoned, false);
}

// unfused, kernel 1: takes the call's ticket (advancing the epoch) and sends every slice, the own one included.
template <int N, typename T>
__device__ void unfused_copy(const LaunchArgs<N>& a) {
    __shared__ VariantShared sh;
    ptx::grid_dependency_wait();
    const VariantBlock<N> b(a);
    FencedSends<N, T> sends(b, true);
    load_sends(sends, 0);  // in flight while the ticket is
    const uint64_t ticket = variant_ticket(sh, b.ws, b.blocks, ptx::globaltimer_ns(), a.timeout_ns);
    if (ticket_poisoned(ticket) && threadIdx.x == 0) {
        *reinterpret_cast<volatile unsigned int*>(a.status) = kStatusFailed;
    }
    fenced_send(sends, call_flags((uint32_t)ticket, a.slot_mask));
}

// unfused, kernel 2: after kernel 1 on the stream, so the epoch word holds this call's epoch + 1.
template <int N, typename T, bool kBaseE>
__device__ void unfused_merge(const LaunchArgs<N>& a) {
    __shared__ VariantShared sh;
    ptx::grid_dependency_wait();
    const uint64_t start_ns = ptx::globaltimer_ns();
    const VariantBlock<N> b(a);
    if (threadIdx.x == 0) {
        sh.ticket = *reinterpret_cast<volatile unsigned long long*>(b.ws + kEpochOffset);
        sh.deadline = Deadline{start_ns + (uint64_t)a.timeout_ns};
    }
    __syncthreads();
    const uint32_t epoch = (uint32_t)sh.ticket - 1u;
    fenced_receive<N, T, kBaseE>(b, sh, call_flags(epoch, a.slot_mask), epoch, ticket_poisoned(sh.ticket), true);
}

}  // namespace dcp4j

#define DCP4J_VARIANT_KERNEL(name, N, T, BASE_E, body)                                                      \
    extern "C" __global__ void __launch_bounds__(dcp4j::kBlockThreads, dcp4j::kMinBlocksPerSm)            \
        name(const __grid_constant__ dcp4j::LaunchArgs<N> args) {                                           \
        dcp4j::body<N, T, BASE_E>(args);                                                                    \
    }

#define DCP4J_COPY_KERNEL(name, N, T)                                                                       \
    extern "C" __global__ void __launch_bounds__(dcp4j::kBlockThreads, dcp4j::kMinBlocksPerSm)            \
        name(const __grid_constant__ dcp4j::LaunchArgs<N> args) {                                           \
        dcp4j::unfused_copy<N, T>(args);                                                                    \
    }

// Built for the largest launch capacity alone (Kernels.capacity): every launch fits it, and each instantiation adds
// to the jar's size.
#define DCP4J_VARIANT_FAMILY(variant, body)                                                                 \
    DCP4J_VARIANT_KERNEL(dcp4j_##variant##_bf16_base2_r64, 64, __nv_bfloat16, false, body)                  \
    DCP4J_VARIANT_KERNEL(dcp4j_##variant##_bf16_basee_r64, 64, __nv_bfloat16, true, body)                   \
    DCP4J_VARIANT_KERNEL(dcp4j_##variant##_fp16_base2_r64, 64, __half, false, body)                         \
    DCP4J_VARIANT_KERNEL(dcp4j_##variant##_fp16_basee_r64, 64, __half, true, body)

DCP4J_VARIANT_FAMILY(ll, ll_reduce)
DCP4J_VARIANT_FAMILY(simple, simple_reduce)
DCP4J_VARIANT_FAMILY(unfusedmerge, unfused_merge)
DCP4J_COPY_KERNEL(dcp4j_unfusedcopy_bf16_r64, 64, __nv_bfloat16)
DCP4J_COPY_KERNEL(dcp4j_unfusedcopy_fp16_r64, 64, __half)
