// PTX-level primitives of the LL128 protocol. Each one is a single PTX instruction, written out so that the compiler
// can neither split, merge, reorder nor cache it.
//
// The memory-model assumption all of them serve: a warp-coalesced store in which 8 consecutive lanes each write 16
// bytes of one 128-byte-aligned line becomes visible to another SM (and, over NVLink, to another GPU) as a whole
// line: a reader that sees the line's flag word also sees its 15 data words. The PTX memory model does not promise
// this; NCCL's LL128 protocol relies on it within one GPU and over NVLink, and enables LL128 only there. It does NOT
// hold over PCIe peer-to-peer, where a line may arrive in pieces: LL128 peers must share one NVLink domain.
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

// 16-byte volatile load of one lane's part of a data line. A line is ready when part 7's hi equals the call's flag;
// the other parts' words, loaded by the same warp-wide load, belong to the same line image (atomic-line assumption).
__device__ __forceinline__ void ld_volatile_line_part(const void* addr, uint64_t& lo, uint64_t& hi) {
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(lo), "=l"(hi) : "l"(addr) : "memory");
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

// Zeroes a consumed data line's flag word (8 bytes). The next writer of this line is a peer two calls later, which
// starts only after this rank's next send, which this store precedes in program order (see docs/PROTOCOL.md).
__device__ __forceinline__ void st_volatile_clear_flag(void* flag_addr) {
    asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(flag_addr), "l"(0ull) : "memory");
}

// Zeroes a consumed LSE line (all 16 bytes).
__device__ __forceinline__ void st_volatile_clear_lse_line(void* addr) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %1, %1, %1};" ::"l"(addr), "r"(0u) : "memory");
}

// The global nanosecond timer, for bounded spins: no ordering assumption, only a clock that advances.
__device__ __forceinline__ uint64_t globaltimer_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

}  // namespace ptx
}  // namespace dcp4j
