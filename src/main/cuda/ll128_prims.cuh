// The LL128 kernel's primitives (docs/CUDA.md): line addressing, the call's flags, bounded polling, the merge
// weights, the merge and the output store, each one small device function the kernel's roles are written in.
// Constants and the argument layout come from ll128_layout.h, generated from the Java definition.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "ll128_layout.h"
#include "ll128_ptx.cuh"

namespace dcp4j {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = kBlockThreads / kWarpSize;
constexpr int kReceiveWarps = kWarpsPerBlock - kSendWarps;
constexpr int kLanesPerLine = kLineBytes / 16;                  // 8 lanes x 16 bytes = one line
constexpr int kFlagPart = kLanesPerLine - 1;                    // lane part 7 carries word 14 and the flag
constexpr int kElemsPerWord = kWordBytes / 2;                   // 16-bit elements in one 8-byte word
constexpr int kElemsPerPair = 2;                                // 16-bit elements in one 4-byte pair
constexpr int kPairsPerWord = kElemsPerWord / kElemsPerPair;
constexpr int kGroupWords = kLinesPerGroup * kLineDataWords;    // a group's 4 lines carry 60 data words
constexpr int kGroupDataBytes = kGroupWords * kWordBytes;       // 480 bytes, a multiple of 16
constexpr int kChunkGroups = 4;                                 // line groups a send stage holds (1920 bytes)
constexpr int kReceiveBarrier = 1;                              // hardware barrier of the receiving warps
constexpr int kRowTeamBarrier = 1;                              // the row kernel's team t: hardware barrier 1 + t
constexpr int kSpinRounds = 4;                                  // poll rounds without sleeping (~ 1 round trip each)
constexpr unsigned kFirstSleepNs = 64;                          // then the back-off doubles from here ...
constexpr unsigned kMaxSleepNs = 1024;                          // ... up to this
constexpr int kDeadlineRounds = 8;                              // sleeping rounds between reads of the timer
constexpr unsigned kWindowSleepNs = 256;                        // a sender ahead of the send window sleeps this ...
constexpr int kWindowRounds = 256;                              // ... at most this often, then sends anyway

static_assert(kGroupDataBytes % 16 == 0, "a group's data is whole 16-byte chunks");
static_assert(kSendWarps > 0 && kReceiveWarps > 0, "a block has both roles");

// ---- 16-bit elements ------------------------------------------------------------------------------------------

template <typename T>
struct Half;

template <>
struct Half<__nv_bfloat16> {
    static constexpr uint32_t kNanBits = 0x7fc0u;
    __device__ static float to_float(uint32_t bits) { return __uint_as_float(bits << 16); }
    __device__ static uint32_t from_float(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }
};

template <>
struct Half<__half> {
    static constexpr uint32_t kNanBits = 0x7e00u;
    __device__ static float to_float(uint32_t bits) { return __half2float(__ushort_as_half((unsigned short)bits)); }
    __device__ static uint32_t from_float(float v) { return __half_as_ushort(__float2half_rn(v)); }
};

// Two fp32 values rounded to one pair of 16-bit elements (element 0 in the low bits).
template <typename T>
__device__ __forceinline__ uint32_t pack_pair(const float* v) {
    return Half<T>::from_float(v[0]) | Half<T>::from_float(v[1]) << 16;
}

// Four fp32 values rounded to one word of 16-bit elements (element 0 in the low bits).
template <typename T>
__device__ __forceinline__ uint64_t pack_word(const float* v) {
    return pack_pair<T>(v) | (uint64_t)pack_pair<T>(v + kElemsPerPair) << 32;
}

template <typename T>
__device__ __forceinline__ uint32_t nan_pair() {
    return Half<T>::kNanBits | Half<T>::kNanBits << 16;
}

template <typename T>
__device__ __forceinline__ uint64_t nan_word() {
    return nan_pair<T>() | (uint64_t)nan_pair<T>() << 32;
}

// acc[e] += w x element e of the pair (fp32, fused, in the caller's source order).
template <typename T>
__device__ __forceinline__ void accumulate_pair(float* acc, float w, uint32_t pair) {
    acc[0] = fmaf(w, Half<T>::to_float(pair & 0xffffu), acc[0]);
    acc[1] = fmaf(w, Half<T>::to_float(pair >> 16), acc[1]);
}

// The same for the four elements of a word.
template <typename T>
__device__ __forceinline__ void accumulate_word(float* acc, float w, uint64_t word) {
    accumulate_pair<T>(acc, w, (uint32_t)word);
    accumulate_pair<T>(acc + kElemsPerPair, w, (uint32_t)(word >> 32));
}

// ---- integer division by a launch constant ----------------------------------------------------------------------

// n / d for 0 <= n < 2^31 with the multiplier and shift the host packed into `magic` (KernelCall.divisorMagic):
// a multiply-high and a shift instead of a division.
__device__ __forceinline__ int quotient(int n, long long d, long long magic) {
    return d == 1 ? n : (int)(__umulhi((unsigned)n, (unsigned)magic) >> (unsigned)(magic >> 32));
}

// ---- the call: epoch, flags, slot -----------------------------------------------------------------------------

struct CallFlags {
    uint64_t data;  // every data line's flag word (LL128 kernels; 0 in the variants', which have no data lines)
    uint32_t lse;   // both flag words of every LSE line
    int slot;
};

// The call's LSE flag and slot. The call's slot is its epoch AND `slot_mask` (the launch parameter's field): 1 where
// the group's ranks run in several launches, one of which may be a call ahead of another (the two slots keep calls
// apart); 0 where every rank of the group is in this launch, so that nothing of a call runs after its launch and one
// slot's lines stay in L2 from call to call.
__device__ __forceinline__ CallFlags call_flags(uint32_t epoch, long long slot_mask) {
    const uint32_t lse = epoch + 1u;
    return {0ull, lse == 0u ? 1u : lse, (int)(epoch & (uint32_t)slot_mask)};
}

// The LL128 kernels' flags of the call that took `ticket`: the data flag is Ll128.keyedDataFlag, the group's key
// XOR (era << 32 | epoch), since their receivers discard consumed lines rather than zero their flags
// (docs/PROTOCOL.md, "Why a stale line can never look ready").
__device__ __forceinline__ CallFlags ll128_call_flags(uint64_t ticket, long long flag_key, long long slot_mask) {
    CallFlags f = call_flags((uint32_t)ticket, slot_mask);
    const uint64_t era = (ticket >> (32 + kEraShift)) & kEraMask;
    f.data = (uint64_t)flag_key ^ (era << 32 | (uint32_t)ticket);
    return f;
}

// Where `arrival` (the word before a block's arrival) is the call's last arrival, advances the epoch and resets the
// count in one atomic add (the poisoned bit stays). The add is Ll128Lines.lastArrivalDelta: where the epoch wraps, its
// carry goes to the era instead of the count.
__device__ __forceinline__ void advance_if_last(unsigned char* workspace, uint64_t arrival, int blocks_per_rank) {
    if (((arrival >> 32) & kArrivalsMask) == (uint64_t)(blocks_per_rank - 1)) {
        uint64_t delta = 1ull - ((uint64_t)blocks_per_rank << 32);
        if ((uint32_t)arrival == 0xffffffffu) {
            delta += (1ull << (32 + kEraShift)) - (1ull << 32);
            if (((arrival >> (32 + kEraShift)) & kEraMask) == kEraMask) {
                delta += 1ull << 63;  // the era's carry flipped the poisoned bit: flip it back
            }
        }
        ptx::red_add_relaxed(workspace + kEpochOffset, delta);
    }
}

// The ticket every block of a rank takes at entry: returns {epoch, arrivals} as they were. The last block of the call
// to arrive advances the epoch, so nothing of the epoch step is left for the end of the call; the next call is
// stream-ordered after this one.
__device__ __forceinline__ uint64_t take_ticket(unsigned char* workspace, int blocks_per_rank) {
    const uint64_t old = ptx::atom_add_acq_rel(workspace + kEpochOffset, 1ull << 32);
    advance_if_last(workspace, old, blocks_per_rank);
    return old;
}

// A block's arrival at the call where the epoch was read before it: the ticket without its answer, so relaxed.
__device__ __forceinline__ void arrive(unsigned char* workspace, int blocks_per_rank) {
    advance_if_last(workspace, ptx::atom_add_relaxed(workspace + kEpochOffset, 1ull << 32), blocks_per_rank);
}

__device__ __forceinline__ bool ticket_poisoned(uint64_t ticket) { return (ticket >> 32) & kPoisonedBit; }

// ---- line addressing (the kernel's WorkspaceLayout) ---------------------------------------------------------------

// Element offset of row's (token, head) in a tensor with these token and head strides (row = token x heads + head).
template <typename Args>
__device__ __forceinline__ long long row_element_offset(const Args& a, int row, long long token_stride,
                                                        long long head_stride) {
    const int t = quotient(row, a.heads, a.heads_magic);
    return t * token_stride + (row - t * (int)a.heads) * head_stride;
}

// Offsets inside one rank's workspace, as WorkspaceLayout computes them.
template <typename Args>
struct Lines {
    const Args& a;

    __device__ long long data_line(int slot, int src, int row, int line) const {
        return kPayloadOffset + slot * a.data_slot_bytes + ((src * a.max_rows + row) * a.data_lines + line) * kLineBytes;
    }
    __device__ long long lse_line(int slot, int src, int row, int group) const {
        return a.lse_region_offset + slot * a.lse_slot_bytes +
               ((src * a.max_rows + row) * a.line_groups + group) * kLseLineBytes;
    }
    // Bytes between the same data line of two consecutive sources.
    __device__ long long data_source_stride() const { return a.max_rows * a.data_lines * kLineBytes; }
    // Bytes between the same data line, and between the same LSE line, of the two slots.
    __device__ long long data_slot_stride() const { return a.data_slot_bytes; }
    __device__ long long lse_slot_stride() const { return a.lse_slot_bytes; }
};

// ---- bounded waits ------------------------------------------------------------------------------------------------

// The moment every wait of a block gives up: its start (after the wait for earlier work) plus the launch's timeout.
struct Deadline {
    uint64_t end_ns;
    __device__ bool passed() const { return ptx::globaltimer_ns() > end_ns; }
};

// One round of a poll's back-off: the first rounds spin (a line usually lands within a round trip), then sleep,
// doubling, so that warps waiting on a late rank leave the memory system to the senders. Returns true when the
// deadline has passed (checked every kDeadlineRounds sleeping rounds). Every lane of the warp calls it in the same
// round, and the answer is the warp's: a lane that read the timer a moment after the deadline must not leave the poll
// while the others go on to its next __ballot_sync.
__device__ __forceinline__ bool back_off(int round, const Deadline& deadline) {
    if (round < kSpinRounds) {
        return false;
    }
    const int sleeping = round - kSpinRounds;
    __nanosleep(min(kFirstSleepNs << min(sleeping, 4), kMaxSleepNs));
    return sleeping % kDeadlineRounds == kDeadlineRounds - 1 && __any_sync(kFullMask, deadline.passed());
}

// Records the first timed-out wait of this rank's call in its metadata, marks the workspace poisoned and raises the
// engine's status word; the host turns the record into an exception.
__device__ void record_timeout(unsigned char* workspace, unsigned int* status, uint32_t kind, int source, int row,
                               int line, uint32_t epoch) {
    uint32_t* meta = reinterpret_cast<uint32_t*>(workspace);
    if (atomicCAS(meta + kTimeoutOffset / 4, 0u, kind) == 0u) {
        meta[kTimeoutSourceOffset / 4] = (uint32_t)source;
        meta[kTimeoutRowOffset / 4] = (uint32_t)row;
        meta[kTimeoutLineOffset / 4] = (uint32_t)line;
        meta[kTimeoutEpochOffset / 4] = epoch;
    }
    atomicOr(meta + kArrivalsOffset / 4, (uint32_t)kPoisonedBit);
    *reinterpret_cast<volatile unsigned int*>(status) = kStatusFailed;
}

// ---- merge weights ------------------------------------------------------------------------------------------------

__device__ __forceinline__ float sanitize(float lse) {
    return (isnan(lse) || lse == INFINITY) ? -INFINITY : lse;
}

// The Taylor polynomial from coefficient K up, by Horner steps with fused multiply-adds (op.WeightExp step 3).
template <int K>
__device__ __forceinline__ float taylor_horner(float f) {
    if constexpr (K == kTaylorDegree) {
        return Taylor<K>::kValue;
    } else {
        return fmaf(taylor_horner<K + 1>(f), f, Taylor<K>::kValue);
    }
}

// op.WeightExp, step by step with the same constants (no operation may be contracted or reordered: every one is an
// explicit round-to-nearest intrinsic or fma), so the weight is the CPU engine's bit for bit.
template <bool kBaseE>
__device__ __forceinline__ float weight_exp(float x) {
    const float y = kBaseE ? __fmul_rn(x, kLog2E) : x;
    if (!(y >= kZeroBelow)) {
        return 0.f;
    }
    const float n = rintf(y);
    return __fmul_rn(taylor_horner<0>(__fsub_rn(y, n)), __int_as_float(((int)n + 127) << 23));
}

// The weights of one row (ExactMerge steps 1-3): lane s holds source s's LSE in l0 and source s + 32's in l1 (-inf
// where there is none). Writes w_s for s < cp to weights[s]. Max by shuffles (exact in any order), the denominator
// summed in source order as the reference does.
template <bool kBaseE>
__device__ void row_weights(float l0, float l1, int cp, int lane, float* weights) {
    const float x0 = sanitize(l0);
    const float x1 = sanitize(l1);
    float m = fmaxf(x0, x1);
#pragma unroll
    for (int o = kWarpSize / 2; o > 0; o /= 2) {
        m = fmaxf(m, __shfl_xor_sync(kFullMask, m, o));
    }
    if (m == -INFINITY) {
        m = 0.f;
    }
    const float e0 = lane < cp ? weight_exp<kBaseE>(__fsub_rn(x0, m)) : 0.f;
    const float e1 = lane + kWarpSize < cp ? weight_exp<kBaseE>(__fsub_rn(x1, m)) : 0.f;
    float denom = 0.f;
    constexpr int kShuffles = 4;  // shuffles in flight before their adds
    for (int s0 = 0; s0 < cp; s0 += kShuffles) {
        float v[kShuffles];
#pragma unroll
        for (int k = 0; k < kShuffles; ++k) {
            v[k] = __shfl_sync(kFullMask, s0 + k < kWarpSize ? e0 : e1, (s0 + k) % kWarpSize);
        }
#pragma unroll
        for (int k = 0; k < kShuffles; ++k) {
            if (s0 + k < cp) {
                denom = __fadd_rn(denom, v[k]);
            }
        }
    }
    const float inv = denom == 0.f ? 0.f : __frcp_rn(denom);
    if (lane < cp) {
        weights[lane] = __fmul_rn(e0, inv);
    }
    if (lane + kWarpSize < cp) {
        weights[lane + kWarpSize] = __fmul_rn(e1, inv);
    }
}

// ---- output -------------------------------------------------------------------------------------------------------

// Writes one group's output words (60 at most, in `words`, shared memory) to the output row as whole 16-byte stores
// per lane where every row start is 16-byte aligned, 8-byte stores otherwise. `count` words, an even number.
__device__ __forceinline__ void store_output_group(unsigned char* out, const uint64_t* words, int count, bool vector16,
                                                   int lane) {
    if (vector16) {
        if (2 * lane < count) {
            const ulonglong2 v = *reinterpret_cast<const ulonglong2*>(words + 2 * lane);
            *reinterpret_cast<ulonglong2*>(out + 16 * lane) = v;
        }
    } else {
        for (int i = lane; i < count; i += kWarpSize) {
            *reinterpret_cast<uint64_t*>(out + kWordBytes * i) = words[i];
        }
    }
}

}  // namespace dcp4j
