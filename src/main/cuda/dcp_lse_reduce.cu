// dcp4j: the fused decode context-parallel all-to-all + LSE merge, LL128 protocol (docs/PROTOCOL.md).
//
// One launch of 256-thread blocks holds one or more ranks (loopback runs all cp ranks of one GPU in one
// launch, as consecutive slices of the grid). In every warp of a rank:
//   send:    one warp per (row, destination), the warps of a block on one destination: each warp-wide 16-byte-
//            per-lane store writes 4 whole lines straight into the destination's workspace, lane part 7 carrying data
//            word 14 and the flag; then one 16-byte LSE line per group of four lines.
//   receive: one warp per (row, group of four lines): polls every source's lines and LSE line of its group in its
//            own workspace, sources in batches of 8, merges in source order 0..cp-1, zeroes every flag it consumed,
//            writes the output.
// No fence, no readiness word, no grid barrier: readiness travels in each line. Every block must be resident at once
// (a spinning receiver must never wait for a sender that cannot start): the host sizes the grid within its share of
// the co-resident capacity (KernelCall), the bound a cooperative launch checks. Every spin is bounded by the
// launch's timeout: a wait that gives up records what it waited for in the rank's metadata, so blocks kept off the
// SMs by someone else's work end in a timeout, not a hang.
// The launch allows programmatic dependent launch: a block first waits for the stream's earlier work, and where the
// launch says so it lets the stream's next launch start its blocks at once.
//
// Layout constants and the argument structs come from ll128_layout.h, generated from the Java definition.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "ll128_layout.h"
#include "ll128_ptx.cuh"

namespace dcp4j {

// The protocol family this launcher serves; each variant is one instantiation of the kernel template.
enum class Protocol : int { kLL128 = 0 };

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = kBlockThreads / kWarpSize;
constexpr int kLanesPerLine = kLineBytes / 16;                  // 8 lanes x 16 bytes = one line
constexpr int kFlagPart = kLanesPerLine - 1;                    // lane part 7 carries word 14 and the flag
constexpr int kElemsPerWord = kWordBytes / 2;                   // 16-bit elements in one 8-byte word
constexpr int kDeadlineCheckRounds = 16;                        // polls between two reads of the global timer
constexpr unsigned kPollSleepNs = 32;                           // first back-off between polls of missing lines
constexpr unsigned kMaxPollSleepNs = 1024;                      // the back-off doubles up to this

template <typename T>
struct Half;

template <>
struct Half<__nv_bfloat16> {
    __device__ static float to_float(uint32_t bits) { return __uint_as_float(bits << 16); }
    __device__ static uint32_t from_float(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }
};

template <>
struct Half<__half> {
    __device__ static float to_float(uint32_t bits) { return __half2float(__ushort_as_half((unsigned short)bits)); }
    __device__ static uint32_t from_float(float v) { return __half_as_ushort(__float2half_rn(v)); }
};

// The merge weights' exponential: base 2 or base e of (lse - max), in fp32.
template <bool kBaseE>
__device__ __forceinline__ float lse_exp(float x) {
    return kBaseE ? expf(x) : exp2f(x);
}

__device__ __forceinline__ float sanitize(float lse) {
    return (isnan(lse) || lse == INFINITY) ? -INFINITY : lse;
}

// The call's flags and slot, from the rank's epoch (read once at entry by every block).
struct CallFlags {
    uint64_t data;
    uint32_t lse;
    int slot;
};

__device__ __forceinline__ CallFlags call_flags(uint32_t epoch) {
    uint32_t lse = epoch + 1u;
    return {kFlagTag | (uint64_t)(uint32_t)(epoch + 1u), lse == 0u ? 1u : lse, (int)(epoch & 1u)};
}

// Programmatic dependent launch (KernelLaunch launches with it): this grid may start while the stream's previous
// kernel still runs, so a block waits for that kernel (and its memory) before touching anything; without the launch
// attribute the wait returns at once.
__device__ __forceinline__ void wait_for_earlier_work() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// Lets the stream's next kernel start its blocks once every block of this grid has done this (or exited); that kernel
// waits for this one to finish before it reads anything (wait_for_earlier_work).
__device__ __forceinline__ void allow_next_launch() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

// A bounded wait: every spin of the launch gives up once timeout_ns have passed since the block started.
struct Deadline {
    uint64_t start_ns;
    uint64_t timeout_ns;
    __device__ bool passed() const { return ptx::globaltimer_ns() - start_ns > timeout_ns; }
};

// Records the first timed-out wait of this rank's call in its metadata; the host raises it as an exception.
__device__ void record_timeout(unsigned char* workspace, uint32_t kind, int source, int row, int line) {
    uint32_t* meta = reinterpret_cast<uint32_t*>(workspace);
    if (atomicCAS(meta + kTimeoutOffset / 4, 0u, kind) == 0u) {
        meta[kTimeoutSourceOffset / 4] = (uint32_t)source;
        meta[kTimeoutRowOffset / 4] = (uint32_t)row;
        meta[kTimeoutLineOffset / 4] = (uint32_t)line;
    }
}

__device__ __forceinline__ uint64_t load_word(const unsigned char* p) {
    return __ldg(reinterpret_cast<const unsigned long long*>(p));
}

// Send phase of one warp: every (row, destination) item of this rank that falls to it.
template <typename T>
__device__ void send_ll128(const LaunchArgs& a, const RankArgs& r, const CallFlags& f, int warp, int warps,
                           int lane) {
    const int part = lane % kLanesPerLine;
    const int sub = lane / kLanesPerLine;
    const int cp = (int)a.cp;
    // Items come in groups of kWarpsPerBlock consecutive rows with one destination, so the warps of a block (which
    // take consecutive items) write to one peer: an SM touches fewer peer mappings at once. Consecutive groups go to
    // different peers. Rows are counted up to a whole group; the padding items have no row.
    const int row_groups = ((int)a.rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    const int items = row_groups * cp * kWarpsPerBlock;
    for (int item = warp; item < items; item += warps) {
        const int group = item / kWarpsPerBlock;
        const int dst = group % cp;
        const int row = (group / cp) * kWarpsPerBlock + item % kWarpsPerBlock;
        if (row >= (int)a.rows) {
            continue;
        }
        const int t = row / (int)a.heads;
        const int h = row - t * (int)a.heads;
        const unsigned char* src = static_cast<const unsigned char*>(r.partial_o) +
                                   (t * r.o_stride_token + h * r.o_stride_head + dst * r.o_stride_peer) * sizeof(T);
        // the LSE value is loaded first, so that its latency overlaps the data loads
        const float lse = lane < a.line_groups ? r.partial_lse[t * r.lse_stride_token + h * r.lse_stride_head +
                                                               dst * r.lse_stride_peer]
                                               : 0.f;
        unsigned char* peer = r.peers[dst] + r.peer_offset;
        unsigned char* lines = peer + kPayloadOffset + f.slot * a.data_slot_bytes +
                               ((long long)r.rank * a.max_rows + row) * a.data_lines * kLineBytes;
        for (int g0 = 0; g0 < (int)a.line_groups; g0 += kLinesPerGroup) {
            uint64_t lo[kLinesPerGroup];
            uint64_t hi[kLinesPerGroup];
#pragma unroll
            for (int k = 0; k < kLinesPerGroup; ++k) {  // all loads first, then all stores
                const int line = (g0 + k) * kLinesPerGroup + sub;
                const int j0 = line * kLineDataWords + 2 * part;
                lo[k] = j0 < a.data_words ? load_word(src + (size_t)j0 * kWordBytes) : 0ull;
                hi[k] = part == kFlagPart ? f.data
                                          : (j0 + 1 < a.data_words ? load_word(src + (size_t)(j0 + 1) * kWordBytes)
                                                                   : 0ull);
            }
#pragma unroll
            for (int k = 0; k < kLinesPerGroup; ++k) {
                const int line = (g0 + k) * kLinesPerGroup + sub;
                if (g0 + k < a.line_groups && line < a.data_lines) {
                    ptx::st_volatile_line_part(lines + (size_t)line * kLineBytes + part * 16, lo[k], hi[k]);
                }
            }
        }
        if (lane < a.line_groups) {  // one LSE line per group, so each receiving warp finds its own copy
            unsigned char* lse_line = peer + a.lse_region_offset + f.slot * a.lse_slot_bytes +
                                      (((long long)r.rank * a.max_rows + row) * a.line_groups + lane) * kLseLineBytes;
            ptx::st_volatile_lse_line(lse_line, __float_as_uint(lse), f.lse);
        }
    }
}

// Receive phase of one warp: every (row, group) item of this rank that falls to it. Returns false on timeout.
template <typename T, bool kBaseE>
__device__ bool receive_ll128(const LaunchArgs& a, const RankArgs& r, const CallFlags& f, const Deadline& deadline,
                              int warp, int warps, int lane) {
    const int part = lane % kLanesPerLine;
    const int sub = lane / kLanesPerLine;
    const int cp = (int)a.cp;
    const int groups = (int)a.line_groups;
    const int items = (int)a.rows * groups;
    const long long lse_source_stride = a.max_rows * a.line_groups * kLseLineBytes;
    const long long line_source_stride = a.max_rows * a.data_lines * kLineBytes;
    for (int item = warp; item < items; item += warps) {
        const int row = item / groups;
        const int g = item - row * groups;
        const int line = g * kLinesPerGroup + sub;
        const bool line_valid = line < a.data_lines;

        // LSE lines of sources `lane` and `lane + 32` (absent sources count as ready with -inf) are polled together
        // with the first batch of data lines, so that a row costs one round trip when its lines are there.
        unsigned char* lse_row = r.workspace + a.lse_region_offset + f.slot * a.lse_slot_bytes +
                                 ((long long)row * a.line_groups + g) * kLseLineBytes;
        unsigned char* lse0_addr = lse_row + lane * lse_source_stride;
        unsigned char* lse1_addr = lse_row + (lane + kWarpSize) * lse_source_stride;
        float l0 = -INFINITY;
        float l1 = -INFINITY;
        bool wait0 = lane < cp;
        bool wait1 = lane + kWarpSize < cp;
        float e0 = 0.f;
        float e1 = 0.f;
        float inv = 0.f;

        float acc[2 * kElemsPerWord];
#pragma unroll
        for (int i = 0; i < 2 * kElemsPerWord; ++i) {
            acc[i] = 0.f;
        }
        const unsigned char* line0 = r.workspace + kPayloadOffset + f.slot * a.data_slot_bytes +
                                     ((long long)row * a.data_lines + line) * kLineBytes + part * 16;
        for (int s0 = 0; s0 < cp; s0 += kSourceBatch) {
            const bool first = s0 == 0;
            uint64_t lo[kSourceBatch];
            uint64_t hi[kSourceBatch];
#pragma unroll
            for (int k = 0; k < kSourceBatch; ++k) {
                lo[k] = 0ull;
                hi[k] = f.data;  // absent lines (past the row or past cp) read as ready
                if (line_valid && s0 + k < cp) {
                    ptx::ld_volatile_line_part(line0 + (s0 + k) * line_source_stride, lo[k], hi[k]);
                }
            }
            for (int round = 0;; ++round) {
                if (first) {
                    if (wait0) {
                        const uint4 v = ptx::ld_volatile_lse_line(lse0_addr);
                        if (v.y == f.lse && v.w == f.lse) {
                            l0 = __uint_as_float(v.x);
                            wait0 = false;
                        }
                    }
                    if (wait1) {
                        const uint4 v = ptx::ld_volatile_lse_line(lse1_addr);
                        if (v.y == f.lse && v.w == f.lse) {
                            l1 = __uint_as_float(v.x);
                            wait1 = false;
                        }
                    }
                }
                unsigned pending = 0u;
#pragma unroll
                for (int k = 0; k < kSourceBatch; ++k) {
                    const bool ready = __shfl_sync(kFullMask, hi[k] == f.data, lane | kFlagPart);
                    pending |= ready ? 0u : 1u << k;
                }
                const unsigned data_lanes = __ballot_sync(kFullMask, pending != 0u);
                const unsigned lse0_lanes = __ballot_sync(kFullMask, wait0);
                const unsigned lse1_lanes = __ballot_sync(kFullMask, wait1);
                if ((data_lanes | lse0_lanes | lse1_lanes) == 0u) {
                    break;
                }
                if (round % kDeadlineCheckRounds == kDeadlineCheckRounds - 1 && deadline.passed()) {
                    if (data_lanes != 0u) {
                        const int who = __ffs(data_lanes) - 1;
                        const unsigned who_pending = __shfl_sync(kFullMask, pending, who);
                        if (lane == who) {
                            record_timeout(r.workspace, kTimeoutDataLine, s0 + __ffs(who_pending) - 1, row, line);
                        }
                    } else if (lane == 0) {
                        const int source = lse0_lanes ? __ffs(lse0_lanes) - 1 : kWarpSize + __ffs(lse1_lanes) - 1;
                        record_timeout(r.workspace, kTimeoutLseLine, source, row, g);
                    }
                    return false;
                }
                // Back off, doubling: polling warps must leave the memory system to the senders they wait for.
                __nanosleep(min(kPollSleepNs << min(round, 5), kMaxPollSleepNs));
                // While a line is missing only its flag part is polled, and only that of the first missing source:
                // a waiting warp reads 16 bytes per line instead of every missing line whole. Once that flag is
                // there, every missing line is loaded whole again. A line whose flag was seen holds its whole image
                // (atomic-line assumption) until this warp zeroes the flag, so the later load reads that image.
                bool arrived = false;
                if (part == kFlagPart && pending != 0u) {
                    uint64_t flag_lo;
                    uint64_t flag_hi;
                    ptx::ld_volatile_line_part(line0 + (s0 + __ffs(pending) - 1) * line_source_stride, flag_lo,
                                               flag_hi);
                    arrived = flag_hi == f.data;
                }
                if (__shfl_sync(kFullMask, arrived, lane | kFlagPart)) {
#pragma unroll
                    for (int k = 0; k < kSourceBatch; ++k) {
                        if (pending & (1u << k)) {
                            ptx::ld_volatile_line_part(line0 + (s0 + k) * line_source_stride, lo[k], hi[k]);
                        }
                    }
                }
            }
            if (first) {
                if (lane < cp) {
                    ptx::st_volatile_clear_lse_line(lse0_addr);
                }
                if (lane + kWarpSize < cp) {
                    ptx::st_volatile_clear_lse_line(lse1_addr);
                }
                // Weights: sanitize, max (-inf -> 0), exp, sum, 1/sum (0 when every source is empty).
                const float s0v = sanitize(l0);
                const float s1v = sanitize(l1);
                float m = fmaxf(s0v, s1v);
#pragma unroll
                for (int o = kWarpSize / 2; o > 0; o /= 2) {
                    m = fmaxf(m, __shfl_xor_sync(kFullMask, m, o));
                }
                if (m == -INFINITY) {
                    m = 0.f;
                }
                e0 = lane < cp ? lse_exp<kBaseE>(s0v - m) : 0.f;
                e1 = lane + kWarpSize < cp ? lse_exp<kBaseE>(s1v - m) : 0.f;
                float sum = e0 + e1;
#pragma unroll
                for (int o = kWarpSize / 2; o > 0; o /= 2) {
                    sum += __shfl_xor_sync(kFullMask, sum, o);
                }
                inv = sum == 0.f ? 0.f : 1.f / sum;
            }
#pragma unroll
            for (int k = 0; k < kSourceBatch; ++k) {
                const int s = s0 + k;
                if (s < cp) {
                    const float w = __shfl_sync(kFullMask, s < kWarpSize ? e0 : e1, s % kWarpSize) * inv;
#pragma unroll
                    for (int e = 0; e < kElemsPerWord; ++e) {
                        acc[e] = fmaf(w, Half<T>::to_float((uint32_t)(lo[k] >> (16 * e)) & 0xffffu), acc[e]);
                    }
                    if (part != kFlagPart) {
#pragma unroll
                        for (int e = 0; e < kElemsPerWord; ++e) {
                            acc[kElemsPerWord + e] =
                                fmaf(w, Half<T>::to_float((uint32_t)(hi[k] >> (16 * e)) & 0xffffu),
                                     acc[kElemsPerWord + e]);
                        }
                    }
                    if (line_valid && part == kFlagPart) {
                        ptx::st_volatile_clear_flag(
                            const_cast<unsigned char*>(line0 + s * line_source_stride) + kWordBytes);
                    }
                }
            }
        }

        // Output words j0 (and j1 unless this is the flag part) of this lane's line.
        if (line_valid) {
            unsigned char* out_row = static_cast<unsigned char*>(r.out) + (size_t)row * a.head_dim * sizeof(T);
            const int j0 = line * kLineDataWords + 2 * part;
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int j = j0 + half;
                if (j < a.data_words && (half == 0 || part != kFlagPart)) {
                    uint64_t word = 0;
#pragma unroll
                    for (int e = 0; e < kElemsPerWord; ++e) {
                        word |= (uint64_t)Half<T>::from_float(acc[half * kElemsPerWord + e]) << (16 * e);
                    }
                    *reinterpret_cast<uint64_t*>(out_row + (size_t)j * kWordBytes) = word;
                }
            }
        }
    }
    return true;
}

template <Protocol P, typename T, bool kBaseE>
__device__ void dcp_lse_reduce(const LaunchArgs& a) {
    static_assert(P == Protocol::kLL128, "only the LL128 protocol is implemented");
    wait_for_earlier_work();  // before the epoch, the flags and the inputs are read, and before the deadline starts
    if (a.early_dependents) {
        // The next call's blocks may now take free SM slots and wait there; the host allows this only where they
        // fit beside this call's (KernelCall), so they never hold slots that a late rank's blocks need. Allowing it
        // at entry rather than after the send gives the next launch the most time to be set up.
        allow_next_launch();
    }
    const Deadline deadline{ptx::globaltimer_ns(), (uint64_t)a.timeout_ns};
    const int rank_in_launch = blockIdx.x / (int)a.blocks_per_rank;
    const int block_in_rank = blockIdx.x - rank_in_launch * (int)a.blocks_per_rank;
    const RankArgs r = a.ranks[rank_in_launch];
    uint32_t* meta = reinterpret_cast<uint32_t*>(r.workspace);
    const uint32_t epoch = *reinterpret_cast<volatile uint32_t*>(meta + kEpochOffset / 4);
    const CallFlags f = call_flags(epoch);
    const int lane = threadIdx.x % kWarpSize;
    const int warp = block_in_rank * kWarpsPerBlock + threadIdx.x / kWarpSize;
    const int warps = (int)a.blocks_per_rank * kWarpsPerBlock;

    send_ll128<T>(a, r, f, warp, warps, lane);
    receive_ll128<T, kBaseE>(a, r, f, deadline, warp, warps, lane);

    // The last block of this rank to finish resets the count and advances the epoch (device-side, so CUDA-graph
    // replays advance it). Every block read the epoch above, before this point; the next call is stream-ordered.
    __syncthreads();
    if (threadIdx.x == 0) {
        if (atomicAdd(meta + kFinishedOffset / 4, 1u) == (uint32_t)a.blocks_per_rank - 1u) {
            meta[kFinishedOffset / 4] = 0u;
            meta[kEpochOffset / 4] = epoch + 1u;
        }
    }
}

}  // namespace dcp4j

using dcp4j::LaunchArgs;
using dcp4j::Protocol;

#define DCP4J_KERNEL(name, T, BASE_E)                                                              \
    extern "C" __global__ void __launch_bounds__(dcp4j::kBlockThreads) name(const LaunchArgs args) { \
        dcp4j::dcp_lse_reduce<Protocol::kLL128, T, BASE_E>(args);                                  \
    }

DCP4J_KERNEL(dcp4j_ll128_bf16_base2, __nv_bfloat16, false)
DCP4J_KERNEL(dcp4j_ll128_bf16_basee, __nv_bfloat16, true)
DCP4J_KERNEL(dcp4j_ll128_fp16_base2, __half, false)
DCP4J_KERNEL(dcp4j_ll128_fp16_basee, __half, true)

// The launch floor: an empty kernel launched exactly as the op is (same attribute, grid and blocks).
extern "C" __global__ void __launch_bounds__(dcp4j::kBlockThreads) dcp4j_empty(const LaunchArgs args) {}
