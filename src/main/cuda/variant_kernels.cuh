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

template <int N, typename T, bool kBaseE>
__device__ void ll_reduce(const LaunchArgs<N>& a) {
    __shared__ VariantShared sh;
    ptx::grid_dependency_wait();  // before the ticket, the flags and the inputs are read, and before the deadline
    const uint64_t start_ns = ptx::globaltimer_ns();
    const VariantBlock<N> b(a);
    const uint64_t ticket = variant_ticket(sh, b.ws, b.blocks, start_ns, a.timeout_ns);
    const uint32_t epoch = (uint32_t)ticket;
    const CallFlags f = call_flags(epoch);
    bool gave_up = ticket_poisoned(ticket);  // the workspace may hold a failed call's lines: nothing is read
    if (gave_up && threadIdx.x == 0) {
        *reinterpret_cast<volatile unsigned int*>(a.status) = kStatusFailed;
    }
    const int cp = b.cp();
    const int lines = b.row_bytes() / kLlLineDataBytes;  // LL lines of one slice, an even number
    const int pairs = lines / 2;                          // one 16-byte store writes two lines
    const long long row_lines = lines;

    // Send (a poisoned rank still sends): each row's (peer, line pair) items and one LSE line per peer, spread over
    // the block's threads.
#pragma unroll 1
    for (int pos = 0; pos < b.rows; ++pos) {
        const int row = b.row(pos);
#pragma unroll 1
        for (int i = threadIdx.x; i < (cp - 1) * (pairs + 1); i += kBlockThreads) {
            const int peer = i / (pairs + 1);
            const int k = i - peer * (pairs + 1);
            const int dst = peer < b.rank ? peer : peer + 1;
            const long long src_row = b.rank * a.max_rows + row;
            if (k < pairs) {
                const uint2 d = __ldg(reinterpret_cast<const uint2*>(b.template input<T>(row, dst)) + k);
                vptx::st_volatile_ll_pair(a.workspaces[dst] + kPayloadOffset + f.slot * a.data_slot_bytes +
                                              (src_row * row_lines + 2 * k) * kLlLineBytes,
                                          d.x, d.y, f.lse);
            } else {
                vptx::st_volatile_ll_line(a.workspaces[dst] + a.lse_region_offset + f.slot * a.lse_slot_bytes +
                                              src_row * kLlLineBytes,
                                          __float_as_uint(b.input_lse(row, dst)), f.lse);
            }
        }
    }

    // Receive and merge, a group of rows at a time: warp w polls row w's LSE lines (lane l those of sources l and
    // l + 32) and computes its weights; then the block's threads take the group's (row, quad) items, each polling
    // its quad's lines of every other source in source order.
    const int quads = b.row_bytes() / kQuadBytes;
    const int per_group = group_rows(quads);
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
    const auto nan_rows = [&](int pos0, int n) {
        for (int k = 0; k < n; ++k) {
            nan_row<T>(b.output(b.row(pos0 + k)), b.row_bytes(), a.vector16);
        }
    };
#pragma unroll 1
    for (int pos0 = 0; pos0 < b.rows; pos0 += per_group) {
        const int n = min(per_group, b.rows - pos0);
        if (gave_up) {
            nan_rows(pos0, n);
            continue;
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
        for (int i = threadIdx.x; i < n * quads && ok; i += kBlockThreads) {
            const int k = i / quads;
            const int q = i - k * quads;
            const int row = b.row(pos0 + k);
            float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll 1
            for (int s = 0; s < cp; ++s) {
                uint4 quad;
                if (s == b.rank) {
                    quad = load_input_quad(b.template input<T>(row, s) + q * kQuadBytes, a.vector16);
                } else {
                    unsigned char* at = b.ws + kPayloadOffset + f.slot * a.data_slot_bytes +
                                        ((s * a.max_rows + row) * row_lines + 4 * q) * kLlLineBytes;
#pragma unroll 1
                    for (int round = 0;; ++round) {
                        const uint4 lo = vptx::ld_volatile_16(at);
                        const uint4 hi = vptx::ld_volatile_16(at + 2 * kLlLineBytes);
                        if (lo.y == f.lse && lo.w == f.lse && hi.y == f.lse && hi.w == f.lse) {
                            quad = make_uint4(lo.x, lo.z, hi.x, hi.z);
                            vptx::st_volatile_clear_16(at);
                            vptx::st_volatile_clear_16(at + 2 * kLlLineBytes);
                            break;
                        }
                        if (thread_back_off(round, sh.deadline)) {
                            record_timeout(b.ws, a.status, kTimeoutDataLine, s, row, 4 * q, epoch);
                            ok = false;
                            break;
                        }
                    }
                    if (!ok) {
                        break;
                    }
                }
                accumulate_quad<T>(acc, sh.weights[k][s], quad);
            }
            store_output_quad<T>(b.output(row) + q * kQuadBytes, acc, !ok, a.vector16);
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

// Sends the block's rows to every destination (the own rank too where `to_self`) as raw 16-byte stores and their LSE
// values; then, after the block's barrier, thread d publishes destination d's flag of this block's chunk.
template <int N, typename T>
__device__ void fenced_send(const VariantBlock<N>& b, const CallFlags& f, bool to_self) {
    const LaunchArgs<N>& a = b.a;
    const Fenced<N> at{a};
    const int cp = b.cp();
    const int quads = b.row_bytes() / kQuadBytes;
#pragma unroll 1
    for (int pos = 0; pos < b.rows; ++pos) {
        const int row = b.row(pos);
#pragma unroll 1
        for (int i = threadIdx.x; i < cp * (quads + 1); i += kBlockThreads) {
            const int dst = i / (quads + 1);
            const int k = i - dst * (quads + 1);
            if (dst == b.rank && !to_self) {
                continue;
            }
            if (k < quads) {
                const uint4 q = load_input_quad(b.template input<T>(row, dst) + k * kQuadBytes, a.vector16);
                *reinterpret_cast<uint4*>(a.workspaces[dst] + at.data(f.slot, b.rank, row) + k * kQuadBytes) = q;
            } else {
                *reinterpret_cast<float*>(a.workspaces[dst] + at.lse(f.slot, b.rank, row)) = b.input_lse(row, dst);
            }
        }
    }
    __syncthreads();  // every store of the chunk is performed relative to the threads that publish its flags
    for (int dst = threadIdx.x; dst < cp; dst += kBlockThreads) {
        if (dst != b.rank || to_self) {
            vptx::st_release_sys_flag(a.workspaces[dst] + at.flag(f.slot, b.rank, b.index), f.lse);
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
    // A group of rows at a time: warp w computes the weights of the group's row w, then the block's threads take the
    // group's (row, quad) items.
    const int quads = b.row_bytes() / kQuadBytes;
    const int per_group = group_rows(quads);
    const int warp = threadIdx.x / kWarpSize;
    const int lane = threadIdx.x % kWarpSize;
    const auto lse_of = [&](int s, int row) {
        return s == b.rank && !from_self ? b.input_lse(row, s)
                                         : __uint_as_float(vptx::ld_volatile_u32(b.ws + at.lse(f.slot, s, row)));
    };
#pragma unroll 1
    for (int pos0 = 0; pos0 < b.rows; pos0 += per_group) {
        const int n = min(per_group, b.rows - pos0);
        if (gave_up) {
            for (int k = 0; k < n; ++k) {
                nan_row<T>(b.output(b.row(pos0 + k)), b.row_bytes(), a.vector16);
            }
            continue;
        }
        if (warp < n) {
            const int row = b.row(pos0 + warp);
            const float l0 = lane < cp ? lse_of(lane, row) : -INFINITY;
            const float l1 = lane + kWarpSize < cp ? lse_of(lane + kWarpSize, row) : -INFINITY;
            row_weights<kBaseE>(l0, l1, cp, lane, sh.weights[warp]);
        }
        __syncthreads();
#pragma unroll 1
        for (int i = threadIdx.x; i < n * quads; i += kBlockThreads) {
            const int k = i / quads;
            const int q = i - k * quads;
            const int row = b.row(pos0 + k);
            float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll 1
            for (int s = 0; s < cp; ++s) {
                const uint4 quad =
                    s == b.rank && !from_self
                        ? load_input_quad(b.template input<T>(row, s) + q * kQuadBytes, a.vector16)
                        : vptx::ld_volatile_16(b.ws + at.data(f.slot, s, row) + q * kQuadBytes);
                accumulate_quad<T>(acc, sh.weights[k][s], quad);
            }
            store_output_quad<T>(b.output(row) + q * kQuadBytes, acc, false, a.vector16);
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
    const uint64_t ticket = variant_ticket(sh, b.ws, b.blocks, start_ns, a.timeout_ns);
    const uint32_t epoch = (uint32_t)ticket;
    const CallFlags f = call_flags(epoch);
    const bool poisoned = ticket_poisoned(ticket);
    if (poisoned && threadIdx.x == 0) {
        *reinterpret_cast<volatile unsigned int*>(a.status) = kStatusFailed;
    }
    fenced_send<N, T>(b, f, false);  // a poisoned rank still sends
    fenced_receive<N, T, kBaseE>(b, sh, f, epoch, poisoned, false);
}

// unfused, kernel 1: takes the call's ticket (advancing the epoch) and sends every slice, the own one included.
template <int N, typename T>
__device__ void unfused_copy(const LaunchArgs<N>& a) {
    __shared__ VariantShared sh;
    ptx::grid_dependency_wait();
    const VariantBlock<N> b(a);
    const uint64_t ticket = variant_ticket(sh, b.ws, b.blocks, ptx::globaltimer_ns(), a.timeout_ns);
    if (ticket_poisoned(ticket) && threadIdx.x == 0) {
        *reinterpret_cast<volatile unsigned int*>(a.status) = kStatusFailed;
    }
    fenced_send<N, T>(b, call_flags((uint32_t)ticket), true);
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
    fenced_receive<N, T, kBaseE>(b, sh, call_flags(epoch), epoch, ticket_poisoned(sh.ticket), true);
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
