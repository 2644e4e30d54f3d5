// dcp4j: the fused decode context-parallel all-to-all + LSE merge, LL128 protocol (docs/PROTOCOL.md, docs/CUDA.md).
//
// One launch of 256-thread blocks holds one or more ranks (loopback runs all cp ranks of one GPU in one launch, as
// consecutive slices of the grid). Block b of a rank owns the rows b, b + B, b + 2B, ... (B blocks per rank), in
// both roles, which run at the same time in different warps:
//   send (warps 0..3):    every (row, destination != self) item of the block's rows, one group of four lines at a
//                         time: the group's input is copied into shared memory with cp.async (SEND_STAGES groups in
//                         flight per warp), then one warp-wide 16-byte-per-lane store writes 4 whole lines straight
//                         into the destination's workspace (lane part 7 carrying data word 14 and the flag), then
//                         the group's LSE line. A sender stays at most `send_window` receive tiles ahead of its
//                         block's receivers, so lines are read while they are still in L2.
//   receive (warps 4..7): the block's rows in tiles of `tile_rows`; one warp per (row, group of four lines). The
//                         group-0 warp of a row polls every source's LSE lines and computes the row's weights once,
//                         for the row's other warps (shared memory). Each warp polls its group's lines of every
//                         source in its own workspace (sources in batches of 8), takes its own rank's slice straight
//                         from partial_o, zeroes every flag it consumed, merges in source order 0..cp-1 and writes
//                         its part of the output row as 16-byte stores.
// No fence, no readiness word, no grid barrier: readiness travels in each line. Every block must be resident at once
// (a spinning receiver must never wait for a sender that cannot start): the host sizes the grid within its share of
// the co-resident capacity (KernelCall). Every wait is bounded by the launch's timeout: a wait that gives up records
// what it waited for, poisons the rank's workspace and raises the engine's status word; every output row whose
// inputs did not all arrive is NaN, and a call that finds its workspace poisoned writes NaN rows without waiting.
#include "ll128_prims.cuh"

namespace dcp4j {

// The register budget. On sm_90a: 4 blocks of 256 threads per SM, 64 registers a thread at launch, of which the
// sending warpgroup (warps 0-3, ~56 needed) hands 8 to the receiving one (~72 needed). Elsewhere: 3 blocks, 80.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr int kMinBlocksPerSm = 4;
#else
constexpr int kMinBlocksPerSm = 3;
#endif
// The row kernel's blocks hold up to kMinBlocksPerSm teams of kBlockThreads threads (GridPlan.teams), within the same
// register budget.
constexpr int kMaxRowTeams = kMinBlocksPerSm;
static_assert(kRowTeamBarrier + kMaxRowTeams <= 16, "every team of a block has a hardware barrier of its own");
constexpr int kSendRegisters = 56;
constexpr int kReceiveRegisters = 72;
static_assert(kSendWarps * kWarpSize == 128, "the sending warps are one warpgroup");

// One chunk of one send item in shared memory: up to kChunkGroups groups of its input (a whole row at head_dim 512
// bf16), and its LSE.
struct alignas(16) SendStage {
    uint64_t words[kChunkGroups * kGroupWords];  // the chunk's input, as it lies in partial_o
    unsigned char* lines;                        // the chunk's first line in the destination's slot 0
    unsigned char* lse_lines;                    // the LSE line of the chunk's first group there
    float lse;                                   // partial_lse[row, dst]
    int pos;                                     // the item's row position in the block
    int chunk;                                   // which chunk of its item
    int pad;
};
static_assert(sizeof(SendStage) % 16 == 0, "send stages stay 16-byte aligned");

struct BlockShared {
    SendStage stages[kSendWarps][kSendStages];
    uint64_t out_words[kReceiveWarps][kGroupWords];  // a receive warp's output group, before the 16-byte stores
    float lse_values[kReceiveWarps][kMaxRanks];      // a group-0 warp's LSE values, by source
    uint64_t receive_lines[kReceiveWarps][kSourceBatch * kWarpSize * 2];  // a receive warp's batch of line parts
    float weights[kMaxTileRows][kMaxRanks];          // the weights of the tile's rows
    int weights_ready[kMaxTileRows];                 // row position + 1 whose weights are in `weights`
    int row_failed[2][kMaxTileRows];                 // by tile parity: a wait of this row gave up
    int tiles_done;                                  // receive tiles this block has finished
    unsigned long long ticket;                       // the block's ticket: {epoch, arrivals}
    Deadline deadline;                               // when the block's waits give up
};

// What every warp of a block knows about its rank's call.
template <int N>
struct Block {
    const LaunchArgs<N>& a;
    const RankArgs& r;
    BlockShared& sh;
    unsigned char* ws;  // this rank's workspace
    int rank;
    int index;          // this block among its rank's
    int rows;           // rows it owns: index, index + B, ...
    int lane;

    __device__ int row(int pos) const { return index + pos * (int)a.blocks_per_rank; }
    __device__ Lines<LaunchArgs<N>> lines() const { return {a}; }
    __device__ long long row_offset(int row, long long token_stride, long long head_stride) const {
        return row_element_offset(a, row, token_stride, head_stride);
    }
};

// ---- send ---------------------------------------------------------------------------------------------------------

// One sending warp: its items k = warp, warp + SEND_WARPS, ... of the block's (row position, peer) items, each in
// chunks of up to kChunkGroups line groups, staged through shared memory SEND_STAGES chunks deep. A cursor walks the
// units (item, chunk) to start their copies, SEND_STAGES - 1 units ahead of their stores; a unit's stage also holds
// where it goes, so that the store computes no address.
template <int N, typename T>
struct Sender {
    // A position in this warp's units.
    struct Cursor {
        int item;
        int chunk;
        __device__ void next(int chunks) {
            if (++chunk == chunks) {
                chunk = 0;
                item += kSendWarps;
            }
        }
    };

    const Block<N>& b;
    SendStage* stages;
    int peers;   // cp - 1
    int chunks;  // chunks of one item
    int units;   // (item, chunk) units of this warp
    int issued;  // units whose copies were started
    Cursor next_copy;

    __device__ Sender(const Block<N>& block, int warp)
        : b(block), stages(block.sh.stages[warp % kSendWarps]), peers((int)block.a.cp - 1),
          chunks(((int)block.a.line_groups + kChunkGroups - 1) / kChunkGroups), units(0), issued(0),
          next_copy{warp, 0} {
        const int items = block.rows * peers;
        if (warp < kSendWarps && items > warp) {
            units = (items - warp + kSendWarps - 1) / kSendWarps * chunks;
        }
    }

    // The row position, destination and row of item k.
    __device__ void item_of(int k, int& pos, int& dst, int& row) const {
        pos = quotient(k, peers, b.a.peers_magic);
        const int peer = k - pos * peers;
        dst = peer < b.rank ? peer : peer + 1;
        row = b.row(pos);
    }

    // Starts the copies of the next unit into its stage (or an empty group past the last unit, so that every lane's
    // count of copy groups stays in step with the units).
    __device__ void issue_next() {
        if (issued < units) {
            int pos;
            int dst;
            int row;
            item_of(next_copy.item, pos, dst, row);
            const RankArgs& r = b.r;
            const int first = next_copy.chunk * kChunkGroups * kGroupDataBytes;
            const unsigned char* from =
                static_cast<const unsigned char*>(r.partial_o) +
                (b.row_offset(row, r.o_stride_token, r.o_stride_head) + dst * r.o_stride_peer) * sizeof(T) + first;
            const int bytes = min(kChunkGroups * kGroupDataBytes, (int)b.a.data_words * kWordBytes - first);
            SendStage& st = stages[issued % kSendStages];
            if (b.a.vector16) {
                for (int i = b.lane; 16 * i < bytes; i += kWarpSize) {
                    if (b.a.stream_inputs) {
                        ptx::cp_async_16_evict_first(st.words + 2 * i, from + 16 * i);
                    } else {
                        ptx::cp_async_16(st.words + 2 * i, from + 16 * i);
                    }
                }
            } else {
                for (int i = b.lane; kWordBytes * i < bytes; i += kWarpSize) {
                    ptx::cp_async_8(st.words + i, from + kWordBytes * i);
                }
            }
            if (b.lane == kWarpSize - 1) {
                ptx::cp_async_4(&st.lse, r.partial_lse + b.row_offset(row, r.lse_stride_token, r.lse_stride_head) +
                                             dst * r.lse_stride_peer);
            }
            if (b.lane == 0) {
                // where the chunk goes, computed while its input is in flight (the store adds the slot)
                unsigned char* peer = b.a.workspaces[dst];
                const int first_group = next_copy.chunk * kChunkGroups;
                st.lines = peer + b.lines().data_line(0, b.rank, row, first_group * kLinesPerGroup);
                st.lse_lines = peer + b.lines().lse_line(0, b.rank, row, first_group);
                st.pos = pos;
                st.chunk = next_copy.chunk;
            }
            next_copy.next(chunks);
        }
        ptx::cp_async_commit();
        ++issued;
    }

    __device__ void prologue() {
        for (int i = 0; i < kSendStages - 1; ++i) {
            issue_next();
        }
    }

    // A soft bound: while `pos` is more than the window ahead of the block's receivers, wait, a bounded number of
    // rounds (the bound keeps progress even where ranks disagree on the grid plan).
    __device__ void wait_for_window(int at) const {
        const int window = (int)b.a.send_window;
        if (window <= 0) {
            return;
        }
        const int tile_rows = (int)b.a.tile_rows;
        for (int round = 0; round < kWindowRounds; ++round) {
            int done = 0;
            if (b.lane == 0) {
                done = *reinterpret_cast<volatile int*>(&b.sh.tiles_done);
            }
            done = __shfl_sync(kFullMask, done, 0);
            if (at < (done + window) * tile_rows) {
                return;
            }
            __nanosleep(kWindowSleepNs);
        }
    }

    // Writes one staged chunk: its groups' lines (4 per group, fewer in a row's last group), then one LSE line per
    // group (lane g stores group g's).
    __device__ void store(const SendStage& st, const CallFlags& f) const {
        const LaunchArgs<N>& a = b.a;
        if (st.chunk == 0) {
            wait_for_window(st.pos);
        }
        const int part = b.lane % kLanesPerLine;
        const int sub = b.lane / kLanesPerLine;
        const int first_group = st.chunk * kChunkGroups;
        const int groups = min(kChunkGroups, (int)a.line_groups - first_group);
        const int words = (int)a.data_words - first_group * kGroupWords;  // words of the row from this chunk on
        unsigned char* lines = st.lines + f.slot * b.lines().data_slot_stride();
#pragma unroll
        for (int g = 0; g < kChunkGroups; ++g) {
            if (g < groups && (first_group + g) * kLinesPerGroup + sub < a.data_lines) {
                const int j = g * kGroupWords + sub * kLineDataWords + 2 * part;
                const uint64_t lo = j < words ? st.words[j] : 0ull;
                const uint64_t hi = part == kFlagPart ? f.data : (j + 1 < words ? st.words[j + 1] : 0ull);
                ptx::st_volatile_line_part(lines + (g * kLinesPerGroup + sub) * kLineBytes + part * 16, lo, hi);
            }
        }
        if (b.lane < groups) {
            ptx::st_volatile_lse_line(st.lse_lines + f.slot * b.lines().lse_slot_stride() + b.lane * kLseLineBytes,
                                      __float_as_uint(st.lse), f.lse);
        }
    }

    __device__ void run(const CallFlags& f) {
        for (int u = 0; u < units; ++u) {
            issue_next();
            ptx::cp_async_wait<kSendStages - 1>();
            __syncwarp();
            store(stages[u % kSendStages], f);
            __syncwarp();  // every lane has read the stage before it is filled again
        }
    }
};

// ---- receive ------------------------------------------------------------------------------------------------------

// One receiving warp of a block.
template <int N, typename T, bool kBaseE>
struct Receiver {
    const Block<N>& b;
    int warp;  // among the block's receiving warps
    CallFlags f;
    int part;
    int sub;
    int pairs;  // LSE lines of one row: (cp - 1) sources x groups; lane l polls pairs l, l + 32, ...

    __device__ Receiver(const Block<N>& block, int w, const CallFlags& flags)
        : b(block), warp(w), f(flags), part(block.lane % kLanesPerLine),
          sub(block.lane / kLanesPerLine) {
        const LaunchArgs<N>& a = block.a;
        pairs = ((int)a.cp - 1) * (int)a.line_groups;
    }

    // Source and group of LSE pair q of a row (sources other than this rank, in order, each with its groups).
    __device__ void pair_lse(int q, int& src, int& group) const {
        const int s = quotient(q, b.a.line_groups, b.a.groups_magic);
        group = q - s * (int)b.a.line_groups;
        src = s < b.rank ? s : s + 1;
    }

    __device__ void timeout(uint32_t kind, int source, int row, int line) const {
        record_timeout(b.ws, b.a.status, kind, source, row, line, (uint32_t)b.sh.ticket);
    }

    // Starts fetching this lane's part of the lines of batch sources k in `sources` (a bit mask): each line whole by
    // its 8 lanes' copies of one warp request. A rolled loop: its addresses are computed when needed, not held in
    // registers all along.
    __device__ void fetch_lines(uint64_t* batch, const unsigned char* first_line, long long stride,
                                unsigned sources) const {
#pragma unroll 1
        for (int k = 0; k < kSourceBatch; ++k) {
            if (sources & (1u << k)) {
                ptx::cp_async_16(batch + (k * kWarpSize + b.lane) * 2, first_line + k * stride);
            }
        }
        ptx::cp_async_commit();
    }

    // Waits until the row's group-0 warp has published its weights. Returns false if the deadline passes first
    // (that warp records why).
    __device__ bool await_weights(int slot, int pos) const {
        volatile int* ready = &b.sh.weights_ready[slot];
        for (int round = 0; *ready != pos + 1; ++round) {
            if (round >= kSpinRounds) {
                __nanosleep(32);
                if (round % 64 == 0 && b.sh.deadline.passed()) {
                    return false;
                }
            }
        }
        __threadfence_block();
        return true;
    }

    // One (row, group) item. Returns false when a wait gave up (the row is then NaN).
    __device__ bool receive(int row, int slot, int pos, int g) {
        const LaunchArgs<N>& a = b.a;
        const RankArgs& r = b.r;
        const int cp = (int)a.cp;
        const int line = g * kLinesPerGroup + sub;
        const bool line_valid = line < a.data_lines;
        const int j0 = line * kLineDataWords + 2 * part;  // this lane's first word of the row
        const int data_words = (int)a.data_words;
        const unsigned char* line0 = b.ws + b.lines().data_line(f.slot, 0, row, line) + part * 16;
        const long long stride = b.lines().data_source_stride();
        const bool weights_here = g == 0;

        // The LSE lines of the row (group-0 warps), polled together with the first batch: lane l takes pairs l,
        // l + 32, ... one after another, each cleared once seen.
        int pair = b.lane;
        int pair_src;
        int pair_group;
        pair_lse(pair, pair_src, pair_group);
        bool lse_waiting = weights_here && pair < pairs;
        unsigned char* lse_addr = b.ws + b.lines().lse_line(f.slot, pair_src, row, pair_group);
        uint4 lse_line = lse_waiting ? ptx::ld_volatile_lse_line(lse_addr) : make_uint4(0, 0, 0, 0);
        bool lse_ready = lse_line.y == f.lse && lse_line.w == f.lse;
        uint32_t lse_bits = lse_line.x;
        const float own_lse = weights_here ? __ldg(r.partial_lse + b.row_offset(row, r.lse_stride_token,
                                                                                r.lse_stride_head) +
                                                   b.rank * r.lse_stride_peer)
                                           : 0.f;

        float acc[2 * kElemsPerWord];  // zeroed once the weights are there (not live while they are computed)
        for (int s0 = 0; s0 < cp; s0 += kSourceBatch) {
            // The batch's line parts land in shared memory (one 16-byte part per lane and source): whole lines, each
            // by its 8 lanes' copies of one warp-wide request, through L2. Remote lines are polled there; the own
            // rank's words come straight from partial_o.
            uint64_t* batch = b.sh.receive_lines[warp];
            unsigned remote = 0u;  // sources of the batch whose line this lane's group of 8 lanes waits for
#pragma unroll
            for (int k = 0; k < kSourceBatch; ++k) {
                const int s = s0 + k;
                uint64_t* part_words = batch + (k * kWarpSize + b.lane) * 2;
                if (s < cp && line_valid) {
                    if (s == b.rank) {
                        const unsigned char* own =
                            static_cast<const unsigned char*>(r.partial_o) +
                            (b.row_offset(row, r.o_stride_token, r.o_stride_head) + b.rank * r.o_stride_peer) *
                                sizeof(T);
                        if (j0 < data_words) {
                            ptx::cp_async_8(part_words, own + kWordBytes * j0);
                        }
                        if (part != kFlagPart && j0 + 1 < data_words) {
                            ptx::cp_async_8(part_words + 1, own + kWordBytes * (j0 + 1));
                        }
                    } else {
                        ptx::cp_async_16(part_words, line0 + s * stride);
                        remote |= 1u << k;
                    }
                }
            }
            ptx::cp_async_commit();
            for (int round = 0;; ++round) {
                ptx::cp_async_wait<0>();
                __syncwarp();
                unsigned pending = 0u;
#pragma unroll
                for (int k = 0; k < kSourceBatch; ++k) {
                    // every lane reads its own line's flag word (lane part 7's second word)
                    const uint64_t flag = batch[(k * kWarpSize + (b.lane | kFlagPart)) * 2 + 1];
                    if ((remote & (1u << k)) && flag != f.data) {
                        pending |= 1u << k;
                    }
                }
                bool lse_fetch = false;
                if (lse_waiting && lse_ready) {
                    if (pair_group == 0) {
                        b.sh.lse_values[warp][pair_src] = __uint_as_float(lse_bits);
                    }
                    ptx::st_volatile_clear_lse_line(lse_addr);
                    pair += kWarpSize;
                    lse_waiting = pair < pairs;
                    if (lse_waiting) {
                        pair_lse(pair, pair_src, pair_group);
                        lse_addr = b.ws + b.lines().lse_line(f.slot, pair_src, row, pair_group);
                        lse_fetch = true;
                    }
                }
                const unsigned data_lanes = __ballot_sync(kFullMask, pending != 0u);
                const unsigned lse_lanes = __ballot_sync(kFullMask, lse_waiting);
                if ((data_lanes | lse_lanes) == 0u) {
                    break;
                }
                if (!__any_sync(kFullMask, lse_fetch) && back_off(round, b.sh.deadline)) {
                    if (data_lanes != 0u) {
                        const int who = __ffs(data_lanes) - 1;
                        const unsigned who_pending = __shfl_sync(kFullMask, pending, who);
                        if (b.lane == who) {
                            timeout(kTimeoutDataLine, s0 + __ffs(who_pending) - 1, row, line);
                        }
                    } else if (b.lane == __ffs(lse_lanes) - 1) {
                        timeout(kTimeoutLseLine, pair_src, row, pair_group);
                    }
                    return false;
                }
                // Only the lines still missing are fetched again.
                __syncwarp();
                fetch_lines(batch, line0 + s0 * stride, stride, pending);
                if (lse_waiting) {
                    const uint4 v = ptx::ld_volatile_lse_line(lse_addr);
                    lse_ready = v.y == f.lse && v.w == f.lse;
                    lse_bits = v.x;
                }
            }
            if (a.reload_lines) {
                // Every flag of the batch is there: load the lines once more, so that the words merged were read
                // after their flag was seen (the receiver then relies on stores landing whole, not loads). The
                // weights are computed while the reload is in flight.
                __syncwarp();
                fetch_lines(batch, line0 + s0 * stride, stride, remote);
            }
            if (s0 == 0) {
                if (weights_here) {
                    __syncwarp();
                    const float l0 = b.lane < cp ? (b.lane == b.rank ? own_lse : b.sh.lse_values[warp][b.lane])
                                                 : -INFINITY;
                    const int s1 = b.lane + kWarpSize;
                    const float l1 = s1 < cp ? (s1 == b.rank ? own_lse : b.sh.lse_values[warp][s1]) : -INFINITY;
                    row_weights<kBaseE>(l0, l1, cp, b.lane, b.sh.weights[slot]);
                    __syncwarp();
                    __threadfence_block();
                    if (b.lane == 0) {
                        *reinterpret_cast<volatile int*>(&b.sh.weights_ready[slot]) = pos + 1;
                    }
                } else if (!await_weights(slot, pos)) {
                    ptx::cp_async_wait<0>();  // the reload lands before the batch's memory is given up
                    return false;
                }
#pragma unroll
                for (int i = 0; i < 2 * kElemsPerWord; ++i) {
                    acc[i] = 0.f;
                }
            }
            if (a.reload_lines) {
                ptx::cp_async_wait<0>();
                __syncwarp();
            }
            // Zero the flag of every line the batch consumed (its words are in shared memory now), then merge in
            // source order.
            if (part == kFlagPart) {
#pragma unroll
                for (int k = 0; k < kSourceBatch; ++k) {
                    if (remote & (1u << k)) {
                        ptx::st_volatile_clear_flag(const_cast<unsigned char*>(line0 + (s0 + k) * stride) + kWordBytes);
                    }
                }
            }
#pragma unroll
            for (int k = 0; k < kSourceBatch; ++k) {
                const int s = s0 + k;
                if (s < cp) {
                    const float w = b.sh.weights[slot][s];
                    const ulonglong2 v = *reinterpret_cast<const ulonglong2*>(batch + (k * kWarpSize + b.lane) * 2);
                    accumulate_word<T>(acc, w, v.x);
                    if (part != kFlagPart) {
                        accumulate_word<T>(acc + kElemsPerWord, w, v.y);
                    }
                }
            }
            __syncwarp();  // every lane has read the batch before the next one lands
        }

        uint64_t* out_words = b.sh.out_words[warp];
        if (line_valid) {
            const int w = sub * kLineDataWords + 2 * part;
            if (j0 < data_words) {
                out_words[w] = pack_word<T>(acc);
            }
            if (part != kFlagPart && j0 + 1 < data_words) {
                out_words[w + 1] = pack_word<T>(acc + kElemsPerWord);
            }
        }
        __syncwarp();
        unsigned char* out = static_cast<unsigned char*>(r.out) + ((long long)row * data_words + g * kGroupWords) *
                                                                      kWordBytes;
        store_output_group(out, out_words, min(kGroupWords, data_words - g * kGroupWords), a.vector16, b.lane);
        __syncwarp();
        return true;
    }

    // Every output word of `row` NaN.
    __device__ void fail_row(int row) const {
        const int words = (int)b.a.data_words;
        uint64_t* out = reinterpret_cast<uint64_t*>(static_cast<unsigned char*>(b.r.out) +
                                                    (long long)row * words * kWordBytes);
        for (int i = b.lane; i < words; i += kWarpSize) {
            out[i] = nan_word<T>();
        }
    }

    // The block's rows, tile by tile; `poisoned`: the workspace may hold a failed call's lines, so nothing is read
    // and every row is NaN.
    __device__ void run(bool poisoned) {
        const LaunchArgs<N>& a = b.a;
        const int tile_rows = (int)a.tile_rows;
        const int groups = (int)a.line_groups;
        bool gave_up = poisoned;
        for (int tile = 0; tile * tile_rows < b.rows; ++tile) {
            const int first = tile * tile_rows;
            const int items = min(tile_rows, b.rows - first) * groups;
            int* failed = b.sh.row_failed[tile & 1];
            for (int k = warp; k < items; k += kReceiveWarps) {
                const int slot = quotient(k, groups, a.groups_magic);
                const int g = k - slot * groups;
                const int pos = first + slot;
                if (gave_up || !receive(b.row(pos), slot, pos, g)) {
                    gave_up = true;
                    failed[slot] = 1;
                }
            }
            ptx::named_barrier(kReceiveBarrier, kReceiveWarps * kWarpSize);
            for (int slot = warp; first + slot < b.rows && slot < tile_rows; slot += kReceiveWarps) {
                if (failed[slot]) {
                    fail_row(b.row(first + slot));
                    __syncwarp();
                    failed[slot] = 0;
                }
            }
            if (warp == 0 && b.lane == 0) {
                *reinterpret_cast<volatile int*>(&b.sh.tiles_done) = tile + 1;
            }
        }
    }
};

// ---- the kernel ---------------------------------------------------------------------------------------------------

template <int N, typename T, bool kBaseE>
__device__ void dcp_lse_reduce(const LaunchArgs<N>& a) {
    __shared__ BlockShared sh;
    ptx::grid_dependency_wait();  // before the ticket, the flags and the inputs are read, and before the deadline
    if (a.early_dependents) {
        // The next call's blocks may now take free SM slots and wait there; the host allows this only where they
        // fit beside this call's (KernelCall), so they never hold slots that a late rank's blocks need.
        ptx::allow_dependent_launch();
    }
    const uint64_t start_ns = ptx::globaltimer_ns();
    const int blocks = (int)a.blocks_per_rank;
    const int rank_in_launch = blockIdx.x / blocks;
    const int index = blockIdx.x - rank_in_launch * blocks;
    const RankArgs& r = a.ranks[rank_in_launch];
    const int rank = (int)r.rank;
    const Block<N> b{a, r, sh, a.workspaces[rank], rank, index, ((int)a.rows - index + blocks - 1) / blocks,
                     (int)threadIdx.x % kWarpSize};
    const int warp = threadIdx.x / kWarpSize;
    if (threadIdx.x == kSendWarps * kWarpSize) {
        // a receiving thread waits for the ticket, so that the sending warps start their input copies at once
        sh.ticket = take_ticket(b.ws, blocks);
    }
    if (threadIdx.x == 0) {
        sh.deadline = Deadline{start_ns + (uint64_t)a.timeout_ns};
        sh.tiles_done = 0;
    }
    if (threadIdx.x < kMaxTileRows) {
        sh.weights_ready[threadIdx.x] = 0;
        sh.row_failed[0][threadIdx.x] = 0;
        sh.row_failed[1][threadIdx.x] = 0;
    }
    Sender<N, T> sender(b, warp);
    if (warp < kSendWarps) {
        sender.prologue();  // the input copies need no epoch: they overlap the ticket's round trip
    }
    __syncthreads();
    const uint64_t ticket = sh.ticket;
    const CallFlags f = ll128_call_flags(ticket, a.flag_key, a.slot_mask);
    if (warp < kSendWarps) {
        ptx::lower_registers<kSendRegisters>();
        sender.run(f);  // a poisoned rank still sends: its peers' workspaces are sound
    } else {
        ptx::raise_registers<kReceiveRegisters>();
        const bool poisoned = ticket_poisoned(ticket);
        if (poisoned && threadIdx.x == kSendWarps * kWarpSize) {
            *reinterpret_cast<volatile unsigned int*>(a.status) = kStatusFailed;
        }
        Receiver<N, T, kBaseE>(b, warp - kSendWarps, f).run(poisoned);
    }
}

// ---- the row kernel ------------------------------------------------------------------------------------------------
//
// Where all cp sources of a row fit in shared memory (the host decides, KernelCall), a shorter kernel, faster at every
// batch measured (docs/PERFORMANCE.md): at small batch a call's time is the chain of dependent steps from entry to the
// output store, and this one has few; at large batch each warp issues few instructions per row. A block takes its
// rows in steps of up to tile_rows consecutive rows (GridPlan: several where a block has several rows, so that a
// step's addresses, polls, barriers and weights serve them all and each warp has their lines in flight at once).
// Block b of a rank owns the steps b, b + B, ... (B blocks per rank) and takes them in that order, sending step
// i + B before it waits for step i, so that a step's lines are usually there when its receivers first look, and
// still in L2. For each step, warp w takes the peers p = w, w + 8, ...: it sends the step's slices for p (each row's
// lines in chunks of 12, each lane's words in registers, the first preloaded for the next send; one warp-wide store
// of 4 lines per set, then the step's LSE lines), and then waits for source p's lines of the step (polled by their
// flag parts, every missing one in each round), copies them again once every flag is there (docs/PROTOCOL.md),
// discards the lines from L2 and leaves their parts in shared memory (its own rank's from partial_o). One warp polls
// the step's LSE lines and computes its weights. After a barrier the block merges the step's rows in source order,
// one pair of elements per thread. Same workspace layout, flags, bounded waits and NaN rows as the kernel above (which
// zeroes the data flags it consumes; with keyed flags either is safe, and discarding is what keeps consumed lines
// from being written back to DRAM at large batch, docs/PERFORMANCE.md). Every
// block of every rank takes its steps in the same order and sends never wait, so with every block resident
// (KernelCall) each step's lines are sent before anyone waits for the next step's.

constexpr int kRowSets = 3;                                // line sets of 4 lines a warp has in flight per chunk
constexpr int kRowChunkLines = kRowSets * kLinesPerGroup;  // lines of one chunk
constexpr int kMaxStepRows = kMaxTileRows;                 // rows a block takes at once, at most
// receive_lines: lane l watches step lines l, l + 32, ... of a source (cp >= 2), one bit each in a 32-bit mask
static_assert(kRowStageBytes / (2 * kLineBytes) <= 32 * kWarpSize, "a lane watches at most 32 lines of a source");

// A block's step: rows row0 .. row0 + n - 1 (consecutive, so that each source's lines of the step, and its LSE lines,
// are consecutive in the workspace: step line L is line L - k x lines of row row0 + k).
struct RowStep {
    int row0;
    int n;
    int lines;  // step lines: n x the row's lines
};

struct RowShared {
    ulonglong2 parts[kRowStageBytes / 16];   // [source][step line][lane part]: every source's lines of the step
    float lse[kMaxStepRows][kMaxRanks];      // the step's LSE values, by row and source
    float weights[kMaxStepRows][kMaxRanks];  // the step's weights, by row and source
    unsigned long long ticket;
    Deadline deadline;
    int gave_up;  // a wait of some warp gave up: this step and the block's later ones are NaN
};
static_assert(sizeof(RowShared) <= kRowSharedBytes, "a team's shared memory fits what the host gives it");

template <int N, typename T, bool kBaseE>
__device__ void dcp_row_reduce(const LaunchArgs<N>& a) {
    // A hardware block is one team of kBlockThreads threads or several (blockDim.x / kBlockThreads, GridPlan.teams):
    // team t of block B is the launch's block B x teams + t, with its own shared memory and barrier; everything
    // below says block for a team.
    extern __shared__ __align__(16) unsigned char team_shared[];
    static_assert((kBlockThreads & (kBlockThreads - 1)) == 0, "a thread's team and place in it are bit fields");
    const int team = (int)(threadIdx.x / kBlockThreads);
    const int tid = (int)(threadIdx.x % kBlockThreads);
    const int block = (int)(blockIdx.x * (blockDim.x / kBlockThreads)) + team;
    RowShared& sh = reinterpret_cast<RowShared*>(team_shared)[team];
    const auto sync_block = [] { ptx::named_barrier(kRowTeamBarrier + threadIdx.x / kBlockThreads, kBlockThreads); };
    ptx::grid_dependency_wait();  // before the ticket, the flags and the inputs are read, and before the deadline
    if (a.early_dependents) {
        ptx::allow_dependent_launch();  // as in the kernel above
    }
    const uint64_t start_ns = ptx::globaltimer_ns();
    const int blocks = (int)a.blocks_per_rank;
    const int rows = (int)a.rows;
    const int step_rows = (int)a.tile_rows;
    const int rank_in_launch = block / blocks;
    const int first_step = block - rank_in_launch * blocks;
    const RankArgs& r = a.ranks[rank_in_launch];
    const int rank = (int)r.rank;
    unsigned char* ws = a.workspaces[rank];
    const int warp = tid / kWarpSize;
    const int lane = tid % kWarpSize;
    const int sub = lane / kLanesPerLine;
    const int part = lane % kLanesPerLine;
    const int cp = (int)a.cp;
    const int words = (int)a.data_words;
    const int lines = (int)a.data_lines;
    const int groups = (int)a.line_groups;
    const Lines<LaunchArgs<N>> at{a};
    const auto step_of = [&](int step) {
        const int row0 = step * step_rows;
        const int n = min(step_rows, rows - row0);
        return RowStep{row0, n, n * lines};
    };
    const auto has_step = [&](int step) { return step * step_rows < rows; };
    // The row of its step that step line L belongs to (L < the step's lines).
    const auto row_of_line = [&](int L) {
        int k = 0;
#pragma unroll
        for (int i = 1; i < kMaxStepRows; ++i) {
            k += L >= i * lines;
        }
        return k;
    };
    const auto input_row = [&](int row) {
        return static_cast<const unsigned char*>(r.partial_o) +
               row_element_offset(a, row, r.o_stride_token, r.o_stride_head) * sizeof(T);
    };
    const auto lse_row = [&](int row) {
        return r.partial_lse + row_element_offset(a, row, r.lse_stride_token, r.lse_stride_head);
    };
    // Lane l < n x groups sends and polls LSE line l of a step: group l mod groups of the step's row l / groups.
    const int lse_line_row = quotient(lane, a.line_groups, a.groups_magic);

    // This lane's words of chunk c of a row's slice for peer p: lo[k], hi[k] of line 12c + 4k + sub.
    uint64_t lo[kRowSets];
    uint64_t hi[kRowSets];
    const auto load_chunk = [&](int row, int p, int c) {
        const uint64_t* from = reinterpret_cast<const uint64_t*>(input_row(row) + p * r.o_stride_peer * sizeof(T));
#pragma unroll
        for (int k = 0; k < kRowSets; ++k) {
            const int line = c * kRowChunkLines + k * kLinesPerGroup + sub;
            const int j = line * kLineDataWords + 2 * part;
            lo[k] = line < lines && j < words ? __ldg(from + j) : 0ull;
            hi[k] = line < lines && part != kFlagPart && j + 1 < words ? __ldg(from + j + 1) : 0ull;
        }
    };
    // A warp whose first peer is another rank holds the first chunk and the LSE value for it in registers before it
    // sends a step, so that a send waits for no load.
    const bool preloads = warp < cp && warp != rank;
    float first_lse = 0.f;
    const auto preload = [&](int step) {
        const RowStep s = step_of(step);
        load_chunk(s.row0, warp, 0);
        if (lane < s.n * groups) {
            first_lse = __ldg(lse_row(s.row0 + lse_line_row) + warp * r.lse_stride_peer);
        }
    };
    if (preloads && has_step(first_step)) {
        preload(first_step);  // issued before the epoch's load, so in flight while it is
    }
    // The call's epoch is one load: the previous call's last arrival advanced it, and this grid reads it only after
    // that grid completed (griddepcontrol.wait, or the stream's order). The block's arrival, whose answer is a round
    // trip longer, is taken after the barrier below by the warp with the most slack (the load happens before it, so
    // every block of the call has read the epoch before the last arrival moves it).
    if (tid == 0) {
        sh.ticket = ptx::ld_relaxed_u64(ws + kEpochOffset);
        sh.deadline = Deadline{start_ns + (uint64_t)a.timeout_ns};
        sh.gave_up = 0;
    }
    sync_block();
    const uint64_t ticket = sh.ticket;
    const uint32_t epoch = (uint32_t)ticket;
    const CallFlags f = ll128_call_flags(ticket, a.flag_key, a.slot_mask);
    const bool poisoned = ticket_poisoned(ticket);  // the workspace may hold a failed call's lines: nothing is read
    if (poisoned && tid == 0) {
        *reinterpret_cast<volatile unsigned int*>(a.status) = kStatusFailed;
    }

    // Sends a step's slices and their LSE lines to every peer of this warp (a poisoned rank still sends); then
    // preloads for the block's next step but one.
    const auto send_step = [&](int step) {
        const RowStep s = step_of(step);
#pragma unroll 1
        for (int p = warp; p < cp; p += kWarpsPerBlock) {
            if (p == rank) {
                continue;
            }
            unsigned char* to = a.workspaces[p] + at.data_line(f.slot, rank, s.row0, 0) + part * 16;
#pragma unroll 1
            for (int in_row = 0; in_row < s.n; ++in_row, to += lines * kLineBytes) {
#pragma unroll 1
                for (int c = 0; c * kRowChunkLines < lines; ++c) {
                    if (p != warp || in_row != 0 || c != 0) {
                        load_chunk(s.row0 + in_row, p, c);
                    }
#pragma unroll
                    for (int k = 0; k < kRowSets; ++k) {
                        const int line = c * kRowChunkLines + k * kLinesPerGroup + sub;
                        if (line < lines) {
                            ptx::st_volatile_line_part(to + line * kLineBytes, lo[k],
                                                       part == kFlagPart ? f.data : hi[k]);
                        }
                    }
                }
            }
            if (lane < s.n * groups) {
                const float lse =
                    p == warp ? first_lse : __ldg(lse_row(s.row0 + lse_line_row) + p * r.lse_stride_peer);
                ptx::st_volatile_lse_line(a.workspaces[p] + at.lse_line(f.slot, rank, s.row0, lane),
                                          __float_as_uint(lse), f.lse);
            }
        }
        if (preloads && has_step(step + blocks)) {
            preload(step + blocks);
        }
    };

    // Every source of this warp's lines of a step into shared memory; false when a wait gave up. The waits give up
    // at the block's deadline, the same for every warp, so no warp is kept waiting by another's failure.
    const auto receive_lines = [&](const RowStep& s) {
#pragma unroll 1
        for (int p = warp; p < cp; p += kWarpsPerBlock) {
            ulonglong2* staged = sh.parts + p * s.lines * kLanesPerLine;  // [step line][lane part]
            if (p == rank) {
                // Copied in place of the lines, all at once; the staged words past a row's end and in the flag's
                // place are never read.
                uint64_t* to = reinterpret_cast<uint64_t*>(staged + part);
#pragma unroll 1
                for (int k = 0; k < s.n; ++k) {
                    const unsigned char* from = input_row(s.row0 + k) + p * r.o_stride_peer * sizeof(T);
#pragma unroll 1
                    for (int line = sub; line < lines; line += kLinesPerGroup) {
                        const int j = line * kLineDataWords + 2 * part;
                        uint64_t* word = to + (k * lines + line) * kLineWords;
                        if (j < words) {
                            ptx::cp_async_8(word, from + j * kWordBytes);
                        }
                        if (part != kFlagPart && j + 1 < words) {
                            ptx::cp_async_8(word + 1, from + (j + 1) * kWordBytes);
                        }
                    }
                }
                ptx::cp_async_commit();
                continue;
            }
            const unsigned char* source = ws + at.data_line(f.slot, p, s.row0, 0);
            // Lane l watches step lines l, l + 32, ...: each round copies the flag part (lane part 7: data word 14
            // and the flag) of every line still missing into its place in the stage, all at once, so that a round is
            // one round trip whatever the step's lines.
            unsigned pending = 0u;  // bit k: step line l + 32k's flag not seen yet
            for (int k = 0; lane + k * kWarpSize < s.lines; ++k) {
                pending |= 1u << k;
            }
#pragma unroll 1
            for (int round = 0;; ++round) {
#pragma unroll 1
                for (unsigned m = pending; m != 0u; m &= m - 1u) {
                    const int L = lane + (__ffs(m) - 1) * kWarpSize;
                    ptx::cp_async_16(staged + L * kLanesPerLine + kFlagPart,
                                     source + L * kLineBytes + kFlagPart * 16);
                }
                ptx::cp_async_commit();
                ptx::cp_async_wait<0>();
#pragma unroll 1
                for (unsigned m = pending; m != 0u; m &= m - 1u) {
                    const int k = __ffs(m) - 1;
                    if (staged[(lane + k * kWarpSize) * kLanesPerLine + kFlagPart].y == f.data) {
                        pending &= ~(1u << k);
                    }
                }
                const unsigned waiting = __ballot_sync(kFullMask, pending != 0u);
                if (waiting == 0u) {
                    break;
                }
                if (back_off(round, sh.deadline)) {
                    if (lane == __ffs(waiting) - 1) {
                        const int L = lane + (__ffs(pending) - 1) * kWarpSize;
                        const int in_row = row_of_line(L);
                        record_timeout(ws, a.status, kTimeoutDataLine, p, s.row0 + in_row, L - in_row * lines, epoch);
                    }
                    return false;
                }
            }
            // Every flag is there: the lines once more, all at once (each word merged was read after its flag was
            // seen), then the lines discarded from L2, lane l those it watched, so that no consumed line is ever
            // written back to DRAM (their memory is indeterminate after that; the keyed flags are why nothing left
            // there can match a later call, docs/PROTOCOL.md). The reload writes the flag parts the poll's lanes
            // read: they have read them before it starts.
            __syncwarp();
#pragma unroll 1
            for (int L = sub; L < s.lines; L += kLinesPerGroup) {
                ptx::cp_async_16(staged + L * kLanesPerLine + part, source + L * kLineBytes + part * 16);
            }
            ptx::cp_async_commit();
            ptx::cp_async_wait<0>();
            __syncwarp();
#pragma unroll 1
            for (int L = lane; L < s.lines; L += kWarpSize) {
                ptx::discard_line(source + L * kLineBytes);
            }
        }
        return true;
    };

    // The step's LSE values (the own rank's from partial_lse; every other source's LSE lines polled, lane l taking
    // the (source, step LSE line) pairs l, l + 32, ..., each cleared once seen) and then its weights, into shared
    // memory, by the one warp that has the least else to do (for cp <= 8, the own rank's: it neither sends nor polls
    // lines). False when a wait gave up.
    const auto receive_weights = [&](const RowStep& s) {
        // The own LSE values go to shared memory after the poll, so that their load and the poll's overlap.
        const float own_lse = lane < s.n ? __ldg(lse_row(s.row0 + lane) + rank * r.lse_stride_peer) : 0.f;
        const int source_lines = s.n * groups;  // one source's LSE lines of the step, <= 32 (GridPlan)
        const int pairs = (cp - 1) * source_lines;
        // q / source_lines without a division: (q + 1/2) / source_lines is at least 1 / 64 from an integer, far more
        // than the rounding of a correctly rounded reciprocal and product for q < 64 x 32.
        const float by_source = __frcp_rn((float)source_lines);
#pragma unroll 1
        for (int q = lane; q - lane < pairs; q += kWarpSize) {
            const int si = __float2int_rz(__fmul_rn((float)q + 0.5f, by_source));
            const int l = q - si * source_lines;
            const int k = quotient(l, a.line_groups, a.groups_magic);
            const int src = si < rank ? si : si + 1;
            unsigned char* line = ws + at.lse_line(f.slot, src, s.row0, l);
            bool waiting = q < pairs;
#pragma unroll 1
            for (int round = 0;; ++round) {
                if (waiting) {
                    const uint4 v = ptx::ld_volatile_lse_line(line);
                    if (v.y == f.lse && v.w == f.lse) {
                        waiting = false;
                        ptx::st_volatile_clear_lse_line(line);
                        if (l == k * groups) {
                            sh.lse[k][src] = __uint_as_float(v.x);
                        }
                    }
                }
                const unsigned lse_lanes = __ballot_sync(kFullMask, waiting);
                if (lse_lanes == 0u) {
                    break;
                }
                if (back_off(round, sh.deadline)) {
                    if (lane == __ffs(lse_lanes) - 1) {
                        record_timeout(ws, a.status, kTimeoutLseLine, src, s.row0 + k, l - k * groups, epoch);
                    }
                    return false;
                }
            }
        }
        if (lane < s.n) {
            sh.lse[lane][rank] = own_lse;
        }
        __syncwarp();
#pragma unroll 1
        for (int k = 0; k < s.n; ++k) {
            const float l0 = lane < cp ? sh.lse[k][lane] : -INFINITY;
            const float l1 = lane + kWarpSize < cp ? sh.lse[k][lane + kWarpSize] : -INFINITY;
            row_weights<kBaseE>(l0, l1, cp, lane, sh.weights[k]);
        }
        return true;
    };

    // Merges the staged step into the output, row by row, one pair of elements per thread (NaN where a wait gave up
    // or the workspace is poisoned).
    const auto merge_step = [&](const RowStep& s, bool nan) {
        const int pairs = words * kPairsPerWord;
        uint32_t* out = reinterpret_cast<uint32_t*>(r.out) + (long long)s.row0 * pairs;
        if (nan) {
            for (int h = tid; h < s.n * pairs; h += kBlockThreads) {
                out[h] = nan_pair<T>();
            }
            return;
        }
        const uint32_t* staged = reinterpret_cast<const uint32_t*>(sh.parts);
        const int row_pairs = lines * kLineWords * kPairsPerWord;  // between two rows' staged lines of a source
        const int source_pairs = s.n * row_pairs;                  // between two sources' staged lines
#pragma unroll 1
        for (int k = 0; k < s.n; ++k) {
            const float* weights = sh.weights[k];
#pragma unroll 1
            for (int h = tid; h < pairs; h += kBlockThreads) {
                const int j = h / kPairsPerWord;
                const int line = j / kLineDataWords;
                const int at_pair = k * row_pairs + (line * kLineWords + (j - line * kLineDataWords)) * kPairsPerWord +
                                    h % kPairsPerWord;
                float acc[kElemsPerPair] = {0.f, 0.f};
#pragma unroll 4
                for (int src = 0; src < cp; ++src) {
                    accumulate_pair<T>(acc, weights[src], staged[src * source_pairs + at_pair]);
                }
                out[k * pairs + h] = pack_pair<T>(acc);
            }
        }
    };

    bool gave_up = poisoned;  // once a wait gave up, the block waits for nothing more
    const int lse_warp = rank % kWarpsPerBlock;  // the warp that neither sends nor polls lines, for cp <= 8
    if (warp == lse_warp && lane == 0) {
        arrive(ws, blocks);
    }
    if (has_step(first_step)) {
        send_step(first_step);
    }
#pragma unroll 1
    for (int step = first_step; has_step(step); step += blocks) {
        const int next = step + blocks;
        if (has_step(next)) {
            send_step(next);
        }
        const RowStep s = step_of(step);
        if (!gave_up && !(warp == lse_warp ? receive_lines(s) && receive_weights(s) : receive_lines(s)) &&
            lane == 0) {
            atomicExch(&sh.gave_up, 1);  // read after the barrier below
        }
        ptx::cp_async_wait<0>();  // this thread's copies into the stage have landed
        sync_block();
        gave_up = gave_up || sh.gave_up != 0;
        merge_step(s, gave_up);
        if (has_step(next)) {
            sync_block();  // the stage, the LSE values and the weights are the next step's from here
        }
    }
}

}  // namespace dcp4j

using dcp4j::LaunchArgs;

#define DCP4J_KERNEL(name, N, T, BASE_E)                                                                    \
    extern "C" __global__ void __launch_bounds__(dcp4j::kBlockThreads, dcp4j::kMinBlocksPerSm)            \
        name(const __grid_constant__ LaunchArgs<N> args) {                                                  \
        dcp4j::dcp_lse_reduce<N, T, BASE_E>(args);                                                          \
    }

#define DCP4J_ROW_KERNEL(name, N, T, BASE_E)                                                                \
    extern "C" __global__ void __launch_bounds__(dcp4j::kBlockThreads * dcp4j::kMaxRowTeams, 1)            \
        name(const __grid_constant__ LaunchArgs<N> args) {                                                  \
        dcp4j::dcp_row_reduce<N, T, BASE_E>(args);                                                          \
    }

DCP4J_KERNEL(dcp4j_ll128_bf16_base2_r8, 8, __nv_bfloat16, false)
DCP4J_KERNEL(dcp4j_ll128_bf16_basee_r8, 8, __nv_bfloat16, true)
DCP4J_KERNEL(dcp4j_ll128_fp16_base2_r8, 8, __half, false)
DCP4J_KERNEL(dcp4j_ll128_fp16_basee_r8, 8, __half, true)
DCP4J_KERNEL(dcp4j_ll128_bf16_base2_r64, 64, __nv_bfloat16, false)
DCP4J_KERNEL(dcp4j_ll128_bf16_basee_r64, 64, __nv_bfloat16, true)
DCP4J_KERNEL(dcp4j_ll128_fp16_base2_r64, 64, __half, false)
DCP4J_KERNEL(dcp4j_ll128_fp16_basee_r64, 64, __half, true)

DCP4J_ROW_KERNEL(dcp4j_ll128row_bf16_base2_r8, 8, __nv_bfloat16, false)
DCP4J_ROW_KERNEL(dcp4j_ll128row_bf16_basee_r8, 8, __nv_bfloat16, true)
DCP4J_ROW_KERNEL(dcp4j_ll128row_fp16_base2_r8, 8, __half, false)
DCP4J_ROW_KERNEL(dcp4j_ll128row_fp16_basee_r8, 8, __half, true)
DCP4J_ROW_KERNEL(dcp4j_ll128row_bf16_base2_r64, 64, __nv_bfloat16, false)
DCP4J_ROW_KERNEL(dcp4j_ll128row_bf16_basee_r64, 64, __nv_bfloat16, true)
DCP4J_ROW_KERNEL(dcp4j_ll128row_fp16_base2_r64, 64, __half, false)
DCP4J_ROW_KERNEL(dcp4j_ll128row_fp16_basee_r64, 64, __half, true)

// The launch floor: an empty kernel launched exactly as the op is (same attribute, grid, blocks, shared memory and
// parameter), so its bounds admit the row kernel's blocks of several teams.
extern "C" __global__ void __launch_bounds__(dcp4j::kBlockThreads * dcp4j::kMaxRowTeams, 1)
    dcp4j_empty_r8(const __grid_constant__ LaunchArgs<8> args) {}
extern "C" __global__ void __launch_bounds__(dcp4j::kBlockThreads * dcp4j::kMaxRowTeams, 1)
    dcp4j_empty_r64(const __grid_constant__ LaunchArgs<64> args) {}

// The protocol variants ll, simple and unfused (op.Variant, docs/PROTOCOL.md): their kernels, beside the LL128 ones.
#include "variant_kernels.cuh"
