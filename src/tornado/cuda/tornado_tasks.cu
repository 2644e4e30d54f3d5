// The TornadoVM engine's prebuilt PTX task: what its Java tasks cannot express. `ll128_exchange` takes the call's
// ticket (every block arrives, the last arrival advances each rank's epoch), stores the row slices as LL128 lines,
// one warp-wide 16-byte-per-lane volatile store per 4 lines with the flag in the same store, then polls every line a
// destination expects with volatile loads, bounded by a %globaltimer deadline, zeroes every flag it saw, and on a
// timeout leaves the record the other engines leave (docs/TORNADO.md). scripts/build-tornado-ptx compiles this file
// to PTX for TornadoVM's header (ISA 7.6, sm_86) and the engine renames the entry as TornadoVM names it.
//
// TornadoVM passes a prebuilt kernel the kernel-context pointer, then one u64 per argument: an array's is the start
// of its device buffer, whose data begin kArrayHeader bytes later. Every index below is a long (u64) or element index
// into that data; the layout is MergeTasks's (its P_* parameter indices are the kP* constants here, compared by
// TornadoTasksContractTest) and Ll128's (ll128_layout.h, generated from it). GraphArrays bounds every index of the
// call's items (cp x rows x cp and below) to int.
#include <cstdint>

#include "ll128_layout.h"
#include "ll128_prims.cuh"
#include "ll128_ptx.cuh"

namespace {

using namespace dcp4j;

// TornadoNativeArray.ARRAY_HEADER, which the engine checks at open.
constexpr int kArrayHeader = 16;

// TornadoEngine.BLOCK_THREADS and EXCHANGE_BLOCKS_PER_SM: the exchange's blocks and how many the engine launches per
// SM, which must all be resident at once (receivers poll for senders). The launch bounds hold the kernel to the
// registers that many blocks leave each thread (80, the most 6 blocks leave), so that they always fit. On an H100
// (docs/perf/log/2026-12-07.md, 23:45 UTC) 6 blocks ran the layer shape faster than 4 at every batch and than 8 (which
// needs 4 lines polled at once to fit 64 registers) at batch 1 and 16, 2% slower than 8 at 256.
constexpr int kTaskBlockThreads = 128;
constexpr int kExchangeBlocksPerSm = 6;
static_assert(kMaxRanks <= kTaskBlockThreads, "a block's threads read every rank's epoch, one each");

// Memory-level parallelism: a warp sends kSendItems items at a time, kGroupsAtOnce line groups of each (every load
// of such a batch issued before the first store), and a thread's receive item polls kLinesAtOnce lines at once.
constexpr int kSendItems = 2;
constexpr int kGroupsAtOnce = 4;
constexpr int kLinesAtOnce = 8;

// MergeTasks's parameter indices.
constexpr int kPCp = 0;
constexpr int kPRows = 1;
constexpr int kPMaxRows = 2;
constexpr int kPDataWords = 3;
constexpr int kPDataLines = 4;
constexpr int kPLineGroups = 5;
constexpr int kPWsLongs = 8;
constexpr int kPWsBase = 9;
constexpr int kPSliceIndex = 10;
constexpr int kPLseIndex = 11;
constexpr int kPTimeoutMicros = 13;

// MergeTasks.STATUS_MISALIGNED: the workspace array's data do not put rank 0's workspace on 128 bytes.
constexpr int kStatusMisaligned = 2;

template <class T>
__device__ __forceinline__ T* data(void* buffer) {
    return reinterpret_cast<T*>(static_cast<char*>(buffer) + kArrayHeader);
}

struct Layout {
    const int* p;
    uint64_t* ws;

    __device__ int cp() const { return p[kPCp]; }
    __device__ int rows() const { return p[kPRows]; }
    __device__ int lines() const { return p[kPDataLines]; }
    __device__ int groups() const { return p[kPLineGroups]; }

    __device__ uint64_t* workspace(int rank) const {
        return ws + p[kPWsBase] + static_cast<long long>(rank) * p[kPWsLongs];
    }
    __device__ uint64_t* dataLine(int dst, int slot, int src, int row, int line) const {
        long long slotLongs = static_cast<long long>(cp()) * p[kPMaxRows] * lines() * kLineWords;
        return workspace(dst) + kLineWords + slot * slotLongs
               + ((static_cast<long long>(src) * p[kPMaxRows] + row) * lines() + line) * kLineWords;
    }

    __device__ uint64_t* lseLine(int dst, int slot, int src, int row, int group) const {
        long long lseRegion = kLineWords + 2LL * cp() * p[kPMaxRows] * lines() * kLineWords;
        long long slotLongs = static_cast<long long>(cp()) * p[kPMaxRows] * groups() * (kLseLineBytes / kWordBytes);
        return workspace(dst) + lseRegion + slot * slotLongs
               + ((static_cast<long long>(src) * p[kPMaxRows] + row) * groups() + group) * (kLseLineBytes / kWordBytes);
    }
};

// The flags of the call at `epoch`: its LSE flag and slot as the CUDA engine's (call_flags, both slots in use), and its
// data flag kFlagTag | (epoch + 1), never zero, where the CUDA engine's is keyed: here every flag seen is zeroed by its
// reader (docs/TORNADO.md), so a zero flag never looks ready.
__device__ __forceinline__ CallFlags exchangeFlags(uint32_t epoch) {
    CallFlags f = call_flags(epoch, 1);
    f.data = kFlagTag | (epoch + 1u);
    return f;
}

// Data word k of a row slice that starts at element `start` of partial_o (4 little-endian 16-bit elements).
__device__ __forceinline__ uint64_t sliceWord(const uint16_t* o, int start, int k) {
    const uint16_t* e = o + start + 4 * k;
    if ((reinterpret_cast<uintptr_t>(e) & 7) == 0) {
        return *reinterpret_cast<const uint64_t*>(e);
    }
    return static_cast<uint64_t>(e[0]) | static_cast<uint64_t>(e[1]) << 16 | static_cast<uint64_t>(e[2]) << 32
           | static_cast<uint64_t>(e[3]) << 48;
}

// Rank 0's workspace must start on 128 bytes: the line stores are 16-byte vector stores and a line is 128 bytes.
__device__ __forceinline__ bool aligned(const Layout& l, int* status) {
    if ((reinterpret_cast<uintptr_t>(l.workspace(0)) & (kLineBytes - 1)) != 0) {
        status[0] = kStatusMisaligned;
        return false;
    }
    return true;
}

// Marks the row failed and leaves the other engines' record of the first wait of `dst` that gave up (record_timeout:
// the record, the poisoned bit, the status word).
__device__ void giveUp(const Layout& l, int dst, int src, int row, int line, uint32_t kind, uint32_t epoch, int* failed,
                       int* status) {
    failed[dst * l.rows() + row] = 1;
    record_timeout(reinterpret_cast<unsigned char*>(l.workspace(dst)), reinterpret_cast<unsigned int*>(status), kind,
                   src, row, line, epoch);
}

}  // namespace

// The exchange of one call, one kernel. Every block first reads every rank's epoch into shared memory and arrives
// (thread r at rank r's metadata word, as the CUDA engine's blocks do: the last of the grid's arrivals advances the
// epoch, the poisoned bit kept), so the Java tasks after it find each epoch one past the call's. Then every thread
// stores its share of the lines: one warp per (source, row, destination), lane part 7's second word of every 4 lines
// the flag, lane 0 the row's LSE line per line group; sources whose senders[] entry is 0 send nothing (the timeout
// test's missing rank). Then it polls its share of the lines every destination expects: one thread per (destination,
// row, source), bounded volatile polls of every data line's flag word and every LSE line, each zeroed once seen (so
// that between calls every flag is zero), the row's LSE into received[(dst * rows + row) * cp + src] (the own one from
// partial_lse), the deadline kPTimeoutMicros after the thread's sends, one for all its polls. A wait that gives up
// leaves the timeout record, the poisoned bit, failed[dst * rows + row] and the status word. Grid-stride over the
// items: the launch grid is fixed per graph, and no larger than what is resident at once (kExchangeBlocksPerSm), so
// every sender runs while receivers poll. One kernel rather than a send and a receive task: TornadoVM 5.2.1 gives
// every prebuilt task of a graph the installed code of the graph's first task, so a graph holds one prebuilt task,
// and it comes first.
extern "C" __global__ void __launch_bounds__(kTaskBlockThreads, kExchangeBlocksPerSm)
    ll128_exchange(const void* /* kernel context */, void* params, void* workspaces, void* partialO, void* partialLse,
                   void* index, void* senders, void* received, void* failed, void* status) {
    __shared__ uint32_t epochs[kMaxRanks];
    const Layout l{data<const int>(params), data<uint64_t>(workspaces)};
    int* st = data<int>(status);
    if (!aligned(l, st)) {
        return;  // every block returns here: no epoch advances, nothing is sent
    }
    const int cp = l.cp();
    const int rows = l.rows();
    if (static_cast<int>(threadIdx.x) < cp) {
        epochs[threadIdx.x] = static_cast<uint32_t>(ptx::ld_relaxed_u64(l.workspace(threadIdx.x)));
    }
    // Thread r read rank r's word before its own arrival there, so before the last arrival advances it; the barrier
    // puts every epoch in shared memory before any thread uses one.
    __syncthreads();
    if (static_cast<int>(threadIdx.x) < cp) {
        arrive(reinterpret_cast<unsigned char*>(l.workspace(threadIdx.x)), static_cast<int>(gridDim.x));
    }
    const int threads = static_cast<int>(gridDim.x * blockDim.x);
    const int first = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);

    const uint16_t* o = data<const uint16_t>(partialO);
    const float* lse = data<const float>(partialLse);
    const int* idx = data<const int>(index);
    const int* sends = data<const int>(senders);
    const int lines = l.lines();
    const int groups = l.groups();
    const int words = l.p[kPDataWords];
    const int lane = threadIdx.x & 31;
    const int part = lane & 7;
    // Sends, kSendItems warp items at a time (items base, base + warps, ...): their slice starts and LSE values are
    // loaded first, then kGroupsAtOnce line groups of each item's lines, then those are stored, so that a warp waits
    // for one round trip per batch of groups rather than one per line group.
    const int warps = threads >> 5;
    const int sendItems = cp * rows * cp;
    for (int base = first >> 5; base < sendItems; base += kSendItems * warps) {
        bool sending[kSendItems];
        int src[kSendItems];
        int row[kSendItems];
        int dst[kSendItems];
        int start[kSendItems];
        uint32_t lseBits[kSendItems];
#pragma unroll
        for (int u = 0; u < kSendItems; ++u) {
            const int item = base + u * warps;  // (src * rows + row) * cp + dst, the index tables' order
            const int sr = item / cp;
            dst[u] = item - sr * cp;
            src[u] = sr / rows;
            row[u] = sr - src[u] * rows;
            sending[u] = item < sendItems && dst[u] != src[u] && sends[src[u]] != 0;
            if (sending[u]) {
                start[u] = idx[l.p[kPSliceIndex] + item];
                lseBits[u] = lane == 0 ? __float_as_uint(lse[idx[l.p[kPLseIndex] + item]]) : 0u;
            }
        }
        for (int group0 = 0; group0 < groups; group0 += kGroupsAtOnce) {
            uint64_t lo[kSendItems][kGroupsAtOnce];
            uint64_t hi[kSendItems][kGroupsAtOnce];
#pragma unroll
            for (int u = 0; u < kSendItems; ++u) {
#pragma unroll
                for (int g = 0; g < kGroupsAtOnce; ++g) {
                    const int line = (group0 + g) * kLinesPerGroup + (lane >> 3);
                    const int k0 = line * kLineDataWords + 2 * part;
                    lo[u][g] = sending[u] && line < lines && k0 < words ? sliceWord(o, start[u], k0) : 0;
                    hi[u][g] = sending[u] && line < lines && part != 7 && k0 + 1 < words
                                   ? sliceWord(o, start[u], k0 + 1) : 0;
                }
            }
#pragma unroll
            for (int u = 0; u < kSendItems; ++u) {
                if (!sending[u]) {
                    continue;
                }
                const CallFlags f = exchangeFlags(epochs[src[u]]);
#pragma unroll
                for (int g = 0; g < kGroupsAtOnce; ++g) {
                    const int group = group0 + g;
                    const int line = group * kLinesPerGroup + (lane >> 3);
                    if (line < lines) {
                        ptx::st_volatile_line_part(l.dataLine(dst[u], f.slot, src[u], row[u], line) + 2 * part,
                                                   lo[u][g], part == 7 ? f.data : hi[u][g]);
                    }
                    if (lane == 0 && group < groups) {
                        ptx::st_volatile_lse_line(l.lseLine(dst[u], f.slot, src[u], row[u], group), lseBits[u],
                                                  f.lse);
                    }
                }
            }
        }
    }

    int* fail = data<int>(failed);
    float* got = data<float>(received);
    const uint64_t timeoutNs = static_cast<uint64_t>(l.p[kPTimeoutMicros]) * 1000;
    const int receiveItems = cp * rows * cp;
    // One deadline for all the thread's polls, so that a call fails within the timeout whatever its items.
    const uint64_t deadline = ptx::globaltimer_ns() + timeoutNs;
    for (int item = first; item < receiveItems; item += threads) {  // (dst * rows + row) * cp + src
        const int dr = item / cp;
        const int src = item - dr * cp;
        const int dst = dr / rows;
        const int row = dr - dst * rows;
        if (src == dst) {
            got[item] = lse[idx[l.p[kPLseIndex] + item]];
            continue;
        }
        const uint32_t epoch = epochs[dst];
        const CallFlags f = exchangeFlags(epoch);
        // kLinesAtOnce of the item's lines at a time, every flag still missing loaded again in each round at once,
        // each zeroed where it was seen.
        bool ok = true;
        for (int line0 = 0; ok && line0 < lines; line0 += kLinesAtOnce) {
            unsigned missing = (1u << min(kLinesAtOnce, lines - line0)) - 1u;
            while (true) {
                uint64_t seen[kLinesAtOnce];
#pragma unroll
                for (int j = 0; j < kLinesAtOnce; ++j) {
                    if (missing >> j & 1u) {
                        seen[j] = ptx::ld_volatile_flag(l.dataLine(dst, f.slot, src, row, line0 + j) + kLineDataWords);
                    }
                }
#pragma unroll
                for (int j = 0; j < kLinesAtOnce; ++j) {
                    if ((missing >> j & 1u) && seen[j] == f.data) {
                        missing &= ~(1u << j);
                        ptx::st_volatile_clear_flag(l.dataLine(dst, f.slot, src, row, line0 + j) + kLineDataWords);
                    }
                }
                if (missing == 0u) {
                    break;
                }
                if (ptx::globaltimer_ns() > deadline) {
                    giveUp(l, dst, src, row, line0 + __ffs(missing) - 1, kTimeoutDataLine, epoch, fail, st);
                    ok = false;
                    break;
                }
            }
        }
        for (int group0 = 0; ok && group0 < groups; group0 += kLinesAtOnce) {
            unsigned missing = (1u << min(kLinesAtOnce, groups - group0)) - 1u;
            while (true) {
                uint4 seen[kLinesAtOnce];
#pragma unroll
                for (int j = 0; j < kLinesAtOnce; ++j) {
                    if (missing >> j & 1u) {
                        seen[j] = ptx::ld_volatile_lse_line(l.lseLine(dst, f.slot, src, row, group0 + j));
                    }
                }
#pragma unroll
                for (int j = 0; j < kLinesAtOnce; ++j) {
                    if ((missing >> j & 1u) && seen[j].y == f.lse && seen[j].w == f.lse) {
                        missing &= ~(1u << j);
                        ptx::st_volatile_clear_lse_line(l.lseLine(dst, f.slot, src, row, group0 + j));
                        if (group0 + j == 0) {
                            got[item] = __uint_as_float(seen[j].x);
                        }
                    }
                }
                if (missing == 0u) {
                    break;
                }
                if (ptx::globaltimer_ns() > deadline) {
                    giveUp(l, dst, src, row, group0 + __ffs(missing) - 1, kTimeoutLseLine, epoch, fail, st);
                    ok = false;
                    break;
                }
            }
        }
    }
}
