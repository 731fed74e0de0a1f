// mbarrier wrappers (sm_90): the handshake between the TMA producer and the
// consumer warpgroups, and the decode cluster's inbox. One instruction each,
// no logic.
#pragma once
#include <stdint.h>

namespace fmha::ptx {

__device__ __forceinline__ void mbarrier_init(uint64_t *bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(bar))),
                 "r"(count));
}

// Makes the initialisation visible to the async proxy (TMA) as well.
__device__ __forceinline__ void fence_mbarrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(bar)))
                 : "memory");
}

// `count` arrivals at once (on behalf of threads that skip a phase).
__device__ __forceinline__ void mbarrier_arrive_count(uint64_t *bar, uint32_t count) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(bar))),
                 "r"(count)
                 : "memory");
}

// Arrives and announces `bytes` that TMA copies will complete on this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(bar))),
                 "r"(bytes)
                 : "memory");
}

// Arrives once this thread's cp.async copies issued so far have landed. The
// arrival counts toward the barrier's expected count (.noinc), so a barrier
// fed this way is initialised with one count per copying thread.
__device__ __forceinline__ void cp_async_mbarrier_arrive_noinc(uint64_t *bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(bar)))
                 : "memory");
}

// Blocks until the phase with parity `phase` has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t *bar, uint32_t phase) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n"
        "}\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar))),
        "r"(phase)
        : "memory");
}

}  // namespace fmha::ptx
