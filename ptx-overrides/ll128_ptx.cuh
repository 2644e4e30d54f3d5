// PTX-level primitives of the LL128 protocol. Each one is a single PTX instruction (or a fixed pair), written out so
// that the compiler can neither split, merge, reorder nor cache it.
//
// The memory-model assumption the line primitives serve: a warp-coalesced store in which 8 consecutive lanes each
// write 16 bytes of one 128-byte-aligned line becomes visible to another SM (and, over NVLink, to another GPU) as a
// whole line: once a reader has seen the line's flag word, every later read of the line sees the 15 data words
// written with it. The PTX memory model does not promise this; NCCL's LL128 protocol relies on it within one GPU and
// over NVLink, and enables LL128 only there. It does NOT hold over PCIe peer-to-peer, where a line may arrive in
// pieces: LL128 peers must share one NVLink domain. A single read of a line being written is NOT assumed to see one
// image of it (the GPU tests saw it torn): the receiver reads a line's data again after it has seen the flag.
// docs/PROTOCOL.md says what was measured within one GPU and what is assumed over NVLink.
//
// No fences are used: readiness travels with the data. `volatile` accesses go to the memory system every time (no
// caching in registers or L1), which is what polling needs.
#pragma once

#include <cstdint>

namespace dcp4j {
namespace ptx {

// 16-byte volatile store of one lane's part of a data line: words {lo, hi}. For lane part 7, hi is the flag, so the
// flag lands in the same warp-wide store as the data it guards (the atomic-line assumption above).
__device__ __forceinline__ void st_volatile_line_part(void* addr, uint64_t lo, uint64_t hi) {
    asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(addr), "l"(lo), "l"(hi) : "memory");
}

// The LSE line {lse bits, flag, 0, flag}: one 16-byte store. NCCL's LL protocol needs only 8-byte atomicity for it
// (each 8-byte half carries a flag), so it is safe even where 128-byte lines are not.
__device__ __forceinline__ void st_volatile_lse_line(void* addr, uint32_t lse_bits, uint32_t flag) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(addr), "r"(lse_bits), "r"(flag),
                 "r"(0u), "r"(flag)
                 : "memory");
}

// Loads an LSE line; it is ready when both flag words (y and w) equal the call's LSE flag.
__device__ __forceinline__ uint4 ld_volatile_lse_line(const void* addr) {
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(addr)
                 : "memory");
    return v;
}

// Loads a data line's flag word (its last 8 bytes).
__device__ __forceinline__ uint64_t ld_volatile_flag(const void* flag_addr) {
    uint64_t v;
    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(flag_addr) : "memory");
    return v;
}

// Zeroes a consumed data line's flag word (8 bytes). The next writer of this line is a peer two calls later, which
// starts only after this rank's next send, which this store precedes in program order (see docs/PROTOCOL.md).
__device__ __forceinline__ void st_volatile_clear_flag(void* flag_addr) {
    asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(flag_addr), "l"(0ull) : "memory");
}

// Drops a consumed 128-byte line (128-byte aligned) from L2 without writing it back to DRAM; its memory is
// indeterminate until the next write. The next writer of this line is ordered after this rank's next send, which this
// instruction precedes in program order, as for a store.
__device__ __forceinline__ void discard_line(const void* line) {
    asm volatile("discard.global.L2 [%0], 128;" ::"l"(line) : "memory");
}

// Zeroes a consumed LSE line (all 16 bytes).
__device__ __forceinline__ void st_volatile_clear_lse_line(void* addr) {
    asm volatile("st.volatile.global.v4.u32 [%1], {%0, %0, %0, %0};" ::"r"(0u), "l"(addr) : "memory");
}

// Asynchronous copies of inputs into shared memory (cp.async): 16 bytes through L2 only (so a poll may use it: it
// never returns a copy cached in L1), or 8 / 4 bytes through L1 where a row start is only 8-byte aligned. Each lane waits for its own copies (cp_async_wait); a __syncwarp() then
// makes them visible to the warp's other lanes.
__device__ __forceinline__ void cp_async_16(void* smem, const void* global) {
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(global) : "memory");
}

// As cp_async_16 for input read once per call: marked first to leave L2 (so that it does not push out the lines
// receivers are about to read).
__device__ __forceinline__ void cp_async_16_evict_first(void* smem, const void* global) {
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile(
        "{\n\t.reg .b64 policy;\n\tcreatepolicy.fractional.L2::evict_first.b64 policy, 1.0;\n\t"
        "cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, policy;\n\t}" ::"r"(s),
        "l"(global)
        : "memory");
}

__device__ __forceinline__ void cp_async_8(void* smem, const void* global) {
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(s), "l"(global) : "memory");
}

__device__ __forceinline__ void cp_async_4(void* smem, const void* global) {
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(s), "l"(global) : "memory");
}

// Closes this lane's current group of asynchronous copies.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Waits until at most kPending of this lane's committed copy groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// The call's ticket: adds `delta` to the 64-bit word {epoch u32, arrivals u32} and returns its old value. acq_rel at
// GPU scope: every block of a rank takes one, so the arrivals count orders the blocks of one call.
__device__ __forceinline__ uint64_t atom_add_acq_rel(void* addr, uint64_t delta) {
    uint64_t old;
    asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(addr), "l"(delta) : "memory");
    return old;
}

// The call's arrival alone: adds `delta` to the word {epoch u32, arrivals u32} and returns its old value, relaxed
// (its order against the other arrivals is the word's own, which is all the count needs).
__device__ __forceinline__ uint64_t atom_add_relaxed(void* addr, uint64_t delta) {
    uint64_t old;
    asm volatile("atom.relaxed.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(addr), "l"(delta) : "memory");
    return old;
}

// A 64-bit word as it is in L2 (relaxed, GPU scope).
__device__ __forceinline__ uint64_t ld_relaxed_u64(const void* addr) {
    uint64_t v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(addr) : "memory");
    return v;
}

// Adds `delta` to a 64-bit word without waiting for the result (relaxed, GPU scope).
__device__ __forceinline__ void red_add_relaxed(void* addr, uint64_t delta) {
    asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(addr), "l"(delta) : "memory");
}

// A barrier of `threads` threads (whole warps) on hardware barrier `id` (0 is __syncthreads()).
__device__ __forceinline__ void named_barrier(int id, int threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Hands registers between a block's warpgroups (sm_90a: setmaxnreg): the sending warpgroup lowers its per-thread
// count, the receiving one raises it by the same amount, within the count the block was launched with. Elsewhere the
// counts stay as launched.
template <int kRegisters>
__device__ __forceinline__ void lower_registers() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegisters));
#endif
}

template <int kRegisters>
__device__ __forceinline__ void raise_registers() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegisters));
#endif
}

// The global nanosecond timer, for bounded spins: no ordering assumption, only a clock that advances.
__device__ __forceinline__ uint64_t globaltimer_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Programmatic dependent launch: waits until the stream's previous kernel has finished and its writes are visible
// (returns at once without the launch attribute).
__device__ __forceinline__ void grid_dependency_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// Lets the stream's next kernel start its blocks once every block of this grid has done this (or exited); that kernel
// waits for this one to finish before it reads anything (grid_dependency_wait).
__device__ __forceinline__ void allow_dependent_launch() {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

}  // namespace ptx
}  // namespace dcp4j
