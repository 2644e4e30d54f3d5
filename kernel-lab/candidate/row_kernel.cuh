// ---- the row kernel ------------------------------------------------------------------------------------------------
//
// Where a step's lines of every other source fit a shared-memory stage (the host decides, KernelCall), a shorter
// kernel. At small batch a call's time is the chain of dependent steps from entry to the output store, and this one
// has few; at large batch it is the instructions each warp issues in series, and this one issues few: every
// per-lane address and mask is computed once, a line is polled by its flag word alone and copied whole once every
// flag is there, and the merge is shared-memory loads and fused multiply-adds, one 8-byte output word per thread.
//
// A block takes its rows in steps of up to kMaxStepRows consecutive rows (GridPlan: 2 where a block has several), so
// that a step's addresses, polls, barrier and weights serve all its rows, and each source's lines of a step, and its
// LSE lines, are consecutive in the workspace. Block b of a rank owns the steps b, b + B, ... (B blocks per rank): it
// sends its first step, then for each step i polls step i's lines, sends step i + B and merges step i, so that a
// step's lines are usually there when its receivers first look, and still in L2. Every block of every rank takes its
// steps in the same order and never waits to send, so with every block resident (KernelCall) each step's lines are
// sent before anyone waits for them. Warp w takes the peers p = w, w + 8, ...:
//   send:    the step's slices for p, each lane's two words of its line part of each set of 4 lines loaded straight
//            into registers, one warp-wide 16-byte-per-lane store per set (lane part 7 carrying word 14 and the flag),
//            then the step's LSE lines; the first peer's first chunks are loaded before the poll of the step before
//            and stored after it, so a send waits for no load.
//   receive: source p's lines of the step, polled by their flag words (lane l watches step lines l, l + 32, ...,
//            and zeroes each flag once it has seen it), then copied whole into the step's stage with 16-byte
//            cp.async (each word merged is read after its flag was seen, docs/PROTOCOL.md).
// The own rank's warp (rank mod 8) polls and clears every source's LSE lines of the step and computes each row's
// weights once. After one barrier every thread merges one output word at a time in source order, the own slice read
// straight from partial_o. Two stages: a step's lines land in one while the block may still merge the previous step
// from the other, so one barrier a step suffices (a stage is written again two steps later, after every thread has
// passed the barrier that follows its merge).

// 3 blocks of 256 threads per SM, 80 registers a thread: at 64 the preloaded send (24 registers) spills.
constexpr int kRowMinBlocksPerSm = 3;
constexpr int kRowSets = 3;                                // line sets of 4 lines a lane holds per chunk of a send
constexpr int kRowChunkLines = kRowSets * kLinesPerGroup;  // lines of one chunk (a layer row's 9 in one)
constexpr int kRowStages = 2;                              // the step being merged and the next
constexpr int kWatchSlots = 2;                             // flags a lane polls at once (64 step lines of a source)
// receive_lines: lane l watches step lines l + 32m of a source, one bit each in a 32-bit mask
static_assert(kRowStageBytes / kLineBytes <= 32 * kWarpSize, "a lane watches at most 32 lines of a source");

// One lane's part of a chunk of a row's send: the words of set k's line, {lo, hi} (in part 7 the flag replaces hi).
struct RowChunk {
    uint64_t lo[kRowSets];
    uint64_t hi[kRowSets];
};

// A block's step: rows row0 .. row0 + n - 1 (step line L of a source is line L - k x lines of row row0 + k).
struct RowStep {
    int row0;
    int n;
    int lines;  // step lines of one source: n x the row's lines
};

struct RowShared {
    ulonglong2 stage[kRowStages][kRowStageBytes / 16];  // [other source][step line][lane part], per stage
    float lse[kRowStages][kMaxStepRows][kMaxRanks];     // the step's LSE values, by row and source
    float weights[kRowStages][kMaxStepRows][kMaxRanks];  // the step's weights, by row and source
    unsigned long long ticket;
    Deadline deadline;
    int gave_up[kRowStages];  // a wait of this stage's step gave up (the block's later steps are NaN too)
};

template <int N, typename T, bool kBaseE>
__device__ void dcp_row_reduce(const LaunchArgs<N>& a) {
    __shared__ RowShared sh;
    ptx::grid_dependency_wait();  // before the ticket, the flags and the inputs are read, and before the deadline
    if (a.early_dependents) {
        ptx::allow_dependent_launch();  // as in the kernel above
    }
    const uint64_t start_ns = ptx::globaltimer_ns();
    const int blocks = (int)a.blocks_per_rank;
    const int rows = (int)a.rows;
    const int step_rows = (int)a.tile_rows;
    const int rank_in_launch = blockIdx.x / blocks;
    const int first_step = blockIdx.x - rank_in_launch * blocks;
    const RankArgs& r = a.ranks[rank_in_launch];
    const int rank = (int)r.rank;
    unsigned char* ws = a.workspaces[rank];
    const int warp = threadIdx.x / kWarpSize;
    const int lane = threadIdx.x % kWarpSize;
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
    const auto input_row = [&](int row, int peer) {
        return reinterpret_cast<const uint64_t*>(
            static_cast<const unsigned char*>(r.partial_o) +
            (row_element_offset(a, row, r.o_stride_token, r.o_stride_head) + peer * r.o_stride_peer) * sizeof(T));
    };
    const auto lse_of = [&](int row, int peer) {
        return __ldg(r.partial_lse + row_element_offset(a, row, r.lse_stride_token, r.lse_stride_head) +
                     peer * r.lse_stride_peer);
    };
    // Lane l < n x groups sends and polls LSE line l of a step: group l mod groups of the step's row l / groups.
    const int lse_line_row = quotient(lane, a.line_groups, a.groups_magic);

    // The send: set k of chunk c of a row is its lines 12c + 4k .. 12c + 4k + 3; this lane's part of line
    // 12c + 4k + sub holds the row's words j, j + 1 (j = 180c + 60k + j0; the flag in place of j + 1 in part 7).
    const int j0 = sub * kLineDataWords + 2 * part;
    const auto load_chunk = [&](const uint64_t* row_words, int c) {
        RowChunk v;
#pragma unroll
        for (int k = 0; k < kRowSets; ++k) {
            const int j = (c * kRowSets + k) * kGroupWords + j0;
            v.lo[k] = j < words ? __ldg(row_words + j) : 0ull;
            v.hi[k] = part != kFlagPart && j + 1 < words ? __ldg(row_words + j + 1) : 0ull;
        }
        return v;
    };
    const auto store_chunk = [&](unsigned char* row_lines, int c, const RowChunk v, uint64_t flag) {
#pragma unroll
        for (int k = 0; k < kRowSets; ++k) {
            const int line = c * kRowChunkLines + k * kLinesPerGroup + sub;
            if (line < lines) {
                ptx::st_volatile_line_part(row_lines + line * kLineBytes, v.lo[k], part == kFlagPart ? flag : v.hi[k]);
            }
        }
    };
    // A warp whose first peer is another rank loads the first chunk of every row of its next send, and the LSE
    // values of that send, into registers before it polls (for the first send, before the ticket).
    const bool preloads = warp < cp && warp != rank;
    RowChunk pre[kMaxStepRows];
    float pre_lse = 0.f;
    const auto preload = [&](int step) {
        const RowStep s = step_of(step);
#pragma unroll
        for (int k = 0; k < kMaxStepRows; ++k) {
            if (k < s.n) {
                pre[k] = load_chunk(input_row(s.row0 + k, warp), 0);
            }
        }
        if (lane < s.n * groups) {
            pre_lse = lse_of(s.row0 + lse_line_row, warp);
        }
    };
    if (preloads && has_step(first_step)) {
        preload(first_step);  // issued before the ticket, so in flight while the ticket is
    }
    if (threadIdx.x == 0) {
        sh.ticket = take_ticket(ws, blocks);
        sh.deadline = Deadline{start_ns + (uint64_t)a.timeout_ns};
        sh.gave_up[0] = 0;
        sh.gave_up[1] = 0;
    }
    __syncthreads();
    const uint64_t ticket = sh.ticket;
    const uint32_t epoch = (uint32_t)ticket;
    const CallFlags f = call_flags(epoch);
    const bool poisoned = ticket_poisoned(ticket);  // the workspace may hold a failed call's lines: nothing is read
    if (poisoned && threadIdx.x == 0) {
        *reinterpret_cast<volatile unsigned int*>(a.status) = kStatusFailed;
    }

    // Sends a step's slices and their LSE lines to every peer of this warp (a poisoned rank still sends): first the
    // preloaded chunks of the first peer (so that the preload's registers are free before anything else is loaded),
    // then every chunk not preloaded.
    const auto send_step = [&](int step) {
        const RowStep s = step_of(step);
        const auto row_lines = [&](int p, int k) {
            return a.workspaces[p] + at.data_line(f.slot, rank, s.row0 + k, 0) + part * 16;
        };
        const auto send_lse = [&](int p, float lse) {
            if (lane < s.n * groups) {
                ptx::st_volatile_lse_line(a.workspaces[p] + at.lse_line(f.slot, rank, s.row0, lane),
                                          __float_as_uint(lse), f.lse);
            }
        };
        if (preloads) {
#pragma unroll
            for (int k = 0; k < kMaxStepRows; ++k) {
                if (k < s.n) {
                    store_chunk(row_lines(warp, k), 0, pre[k], f.data);
                }
            }
            send_lse(warp, pre_lse);
        }
#pragma unroll 1
        for (int p = warp; p < cp; p += kWarpsPerBlock) {
            if (p == rank) {
                continue;
            }
            const int first_chunk = p == warp ? 1 : 0;  // the first peer's first chunks were preloaded
#pragma unroll 1
            for (int k = 0; k < s.n; ++k) {
                const uint64_t* from = input_row(s.row0 + k, p);
#pragma unroll 1
                for (int c = first_chunk; c * kRowChunkLines < lines; ++c) {
                    store_chunk(row_lines(p, k), c, load_chunk(from, c), f.data);
                }
            }
            if (p != warp) {
                send_lse(p, lane < s.n * groups ? lse_of(s.row0 + lse_line_row, p) : 0.f);
            }
        }
    };

    // Every other source of this warp's lines of a step into the stage; false when a wait gave up. The waits give up
    // at the block's deadline, the same for every warp, so no warp is kept waiting by another's failure.
    const auto receive_lines = [&](const RowStep& s, ulonglong2* stage) {
#pragma unroll 1
        for (int p = warp; p < cp; p += kWarpsPerBlock) {
            if (p == rank) {
                continue;  // merged straight from partial_o
            }
            const unsigned char* source = ws + at.data_line(f.slot, p, s.row0, 0);
            // Lane l watches step lines l + 32m; each round loads the flag word of every line it still misses, all
            // at once, and zeroes each flag it sees (nothing reads a flag word after this: the copy below reads
            // only data words, and the line's next writer is a peer two calls later).
            unsigned pending = 0u;
            for (int m = 0; lane + m * kWarpSize < s.lines; ++m) {
                pending |= 1u << m;
            }
#pragma unroll 1
            for (int round = 0;; ++round) {
                uint64_t seen[kWatchSlots] = {};
#pragma unroll
                for (int m = 0; m < kWatchSlots; ++m) {
                    if (pending >> m & 1u) {
                        seen[m] = ptx::ld_volatile_flag(source + (lane + m * kWarpSize + 1) * kLineBytes - kWordBytes);
                    }
                }
#pragma unroll 1
                for (unsigned more = pending >> kWatchSlots << kWatchSlots; more != 0u; more &= more - 1u) {
                    const int m = __ffs(more) - 1;
                    unsigned char* flag = const_cast<unsigned char*>(source) + (lane + m * kWarpSize + 1) * kLineBytes -
                                          kWordBytes;
                    if (is_data_flag(ptx::ld_volatile_flag(flag), f)) {
                        ptx::st_volatile_clear_flag(flag);
                        pending &= ~(1u << m);
                    }
                }
#pragma unroll
                for (int m = 0; m < kWatchSlots; ++m) {
                    if ((pending >> m & 1u) && is_data_flag(seen[m], f)) {
                        ptx::st_volatile_clear_flag(const_cast<unsigned char*>(source) +
                                                    (lane + m * kWarpSize + 1) * kLineBytes - kWordBytes);
                        pending &= ~(1u << m);
                    }
                }
                const unsigned waiting = __ballot_sync(kFullMask, pending != 0u);
                if (waiting == 0u) {
                    break;
                }
                if (__any_sync(kFullMask, back_off(round, sh.deadline))) {  // the whole warp gives up, or none
                    if (lane == __ffs(waiting) - 1) {
                        const int L = lane + (__ffs(pending) - 1) * kWarpSize;
                        const int in_row = L / lines;
                        record_timeout(ws, a.status, kTimeoutDataLine, p, s.row0 + in_row, L - in_row * lines, epoch);
                    }
                    return false;
                }
            }
            // Every flag is there: the lines whole, all at once (every word merged is read after its flag was seen).
            __syncwarp();
            ulonglong2* staged = stage + (p < rank ? p : p - 1) * s.lines * kLanesPerLine + part;
#pragma unroll 1
            for (int L = sub; L < s.lines; L += kLinesPerGroup) {
                ptx::cp_async_16(staged + L * kLanesPerLine, source + L * kLineBytes + part * 16);
            }
            ptx::cp_async_commit();
        }
        return true;
    };

    // The step's LSE values (the own rank's from partial_lse; every other source's LSE lines polled, lane l taking
    // the (source, step LSE line) pairs l + 32m, each cleared once seen) and then its weights, into shared memory,
    // by the own rank's warp (for cp <= 8 it neither sends nor polls lines). False when a wait gave up.
    const int lse_warp = rank % kWarpsPerBlock;
    const auto receive_weights = [&](const RowStep& s, float (&lse)[kMaxStepRows][kMaxRanks],
                                     float (&weights)[kMaxStepRows][kMaxRanks]) {
        const float own_lse = lane < s.n ? lse_of(s.row0 + lane, rank) : 0.f;  // in flight during the poll
        const int source_lines = s.n * groups;  // one source's LSE lines of the step, <= 32 (GridPlan)
        const int pairs = (cp - 1) * source_lines;
        // q / source_lines without a division: (q + 1/2) / source_lines is at least 1 / 64 from an integer, far more
        // than the rounding of a correctly rounded reciprocal and product for q < 64 x 32.
        const float by_source = __frcp_rn((float)source_lines);
        // The (source, LSE line) of pair q: the source index si = q / source_lines skips the own rank.
        const auto pair_line = [&](int q, int& src, int& l) {
            const int si = __float2int_rz(__fmul_rn((float)q + 0.5f, by_source));
            l = q - si * source_lines;
            src = si < rank ? si : si + 1;
            return ws + at.lse_line(f.slot, src, s.row0, l);
        };
#pragma unroll 1
        for (int base = 0; base < pairs; base += kWatchSlots * kWarpSize) {  // every lane takes every round
            const int q0 = base + lane;
            unsigned pending = 0u;
#pragma unroll
            for (int m = 0; m < kWatchSlots; ++m) {
                pending |= (q0 + m * kWarpSize < pairs ? 1u : 0u) << m;
            }
#pragma unroll 1
            for (int round = 0;; ++round) {
                uint4 v[kWatchSlots] = {};
#pragma unroll
                for (int m = 0; m < kWatchSlots; ++m) {
                    int src;
                    int l;
                    if (pending >> m & 1u) {
                        v[m] = ptx::ld_volatile_lse_line(pair_line(q0 + m * kWarpSize, src, l));
                    }
                }
#pragma unroll
                for (int m = 0; m < kWatchSlots; ++m) {
                    if ((pending >> m & 1u) && v[m].y == f.lse && v[m].w == f.lse) {
                        int src;
                        int l;
                        pending &= ~(1u << m);
                        ptx::st_volatile_clear_lse_line(pair_line(q0 + m * kWarpSize, src, l));
                        const int k = quotient(l, a.line_groups, a.groups_magic);
                        if (l == k * groups) {
                            lse[k][src] = __uint_as_float(v[m].x);
                        }
                    }
                }
                const unsigned waiting = __ballot_sync(kFullMask, pending != 0u);
                if (waiting == 0u) {
                    break;
                }
                if (__any_sync(kFullMask, back_off(round, sh.deadline))) {  // the whole warp gives up, or none
                    if (lane == __ffs(waiting) - 1) {
                        int src;
                        int l;
                        pair_line(q0 + (__ffs(pending) - 1) * kWarpSize, src, l);
                        const int k = quotient(l, a.line_groups, a.groups_magic);
                        record_timeout(ws, a.status, kTimeoutLseLine, src, s.row0 + k, l - k * groups, epoch);
                    }
                    return false;
                }
            }
        }
        if (lane < s.n) {
            lse[lane][rank] = own_lse;
        }
        __syncwarp();
#pragma unroll 1
        for (int k = 0; k < s.n; ++k) {
            const float l0 = lane < cp ? lse[k][lane] : -INFINITY;
            const float l1 = lane + kWarpSize < cp ? lse[k][lane + kWarpSize] : -INFINITY;
            row_weights<kBaseE>(l0, l1, cp, lane, weights[k]);
        }
        return true;
    };

    // The merge: thread t takes the step's output words t, t + 256, ... (word i of the step is word i - k x words
    // of row row0 + k, so the step's output is contiguous); its own rank's word comes straight from partial_o.
    const auto own_word = [&](const RowStep& s, int i) {
        const int k = i >= words ? 1 : 0;  // kMaxStepRows == 2
        return __ldg(input_row(s.row0 + k, rank) + (i - k * words));
    };
    static_assert(kMaxStepRows == 2, "own_word and merge_step take a step word's row by one comparison");
    const auto merge_step = [&](const RowStep& s, const ulonglong2* stage,
                                const float (&weights)[kMaxStepRows][kMaxRanks], uint64_t first_own, bool nan) {
        uint64_t* out = reinterpret_cast<uint64_t*>(r.out) + (long long)s.row0 * words;
        const int step_words = s.n * words;
        const int source_words = s.lines * kLineWords;  // between two sources' staged lines, in words
#pragma unroll 1
        for (int i = threadIdx.x; i < step_words; i += kBlockThreads) {
            if (nan) {
                out[i] = nan_word<T>();
                continue;
            }
            const int k = i >= words ? 1 : 0;
            const int j = i - k * words;
            const int line = j / kLineDataWords;
            const uint64_t* staged = reinterpret_cast<const uint64_t*>(stage) + (k * lines + line) * kLineWords +
                                     (j - line * kLineDataWords);
            const float* w = weights[k];
            float acc[kElemsPerWord] = {0.f, 0.f, 0.f, 0.f};
            int src = 0;
#pragma unroll 4
            for (; src < rank; ++src, staged += source_words) {
                accumulate_word<T>(acc, w[src], *staged);
            }
            accumulate_word<T>(acc, w[rank], i == threadIdx.x ? first_own : own_word(s, i));
#pragma unroll 4
            for (++src; src < cp; ++src, staged += source_words) {
                accumulate_word<T>(acc, w[src], *staged);
            }
            out[i] = pack_word<T>(acc);
        }
    };

    bool gave_up = poisoned;  // once a wait gave up, the block waits for nothing more
    if (has_step(first_step)) {
        send_step(first_step);
    }
    int stage = 0;
#pragma unroll 1
    for (int step = first_step; has_step(step); step += blocks, stage ^= 1) {
        // The next step's first loads are in flight while this step's lines are polled, and its stores follow the
        // poll, so that the preloaded registers are free again before the weights and the merge.
        const int next = step + blocks;
        if (preloads && has_step(next)) {
            preload(next);
        }
        const RowStep s = step_of(step);
        bool received = gave_up || receive_lines(s, sh.stage[stage]);
        if (has_step(next)) {
            send_step(next);
        }
        const uint64_t first_own = !gave_up && (int)threadIdx.x < s.n * words ? own_word(s, threadIdx.x) : 0ull;
        if (received && !gave_up && warp == lse_warp) {
            received = receive_weights(s, sh.lse[stage], sh.weights[stage]);
        }
        if (!received && lane == 0) {
            atomicExch(&sh.gave_up[stage], 1);  // read after the barrier below
        }
        ptx::cp_async_wait<0>();  // this thread's copies into the stage have landed
        __syncthreads();
        gave_up = gave_up || sh.gave_up[stage] != 0;
        merge_step(s, sh.stage[stage], sh.weights[stage], first_own, gave_up);
    }
}

