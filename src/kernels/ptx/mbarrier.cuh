// mbarrier wrappers (sm_90): the handshake between the TMA producer and the
// consumer warpgroups, and the decode cluster's inbox. One instruction each,
// no logic. Images for earlier architectures compile them to traps (the
// decode kernel is built for sm_80 too; its cluster entry points run on
// sm_90+ only).
#pragma once
#include <stdint.h>

namespace fmha::ptx {

__device__ __forceinline__ void mbarrier_init(uint64_t *bar, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(bar))),
                 "r"(count));
#else
    __trap();
#endif
}

// Makes the initialisation visible to the async proxy (TMA) as well.
__device__ __forceinline__ void fence_mbarrier_init() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#else
    __trap();
#endif
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t *bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(bar)))
                 : "memory");
#else
    __trap();
#endif
}

// `count` arrivals at once (on behalf of threads that skip a phase).
__device__ __forceinline__ void mbarrier_arrive_count(uint64_t *bar, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(bar))),
                 "r"(count)
                 : "memory");
#else
    __trap();
#endif
}

// Arrives and announces `bytes` that TMA copies will complete on this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(bar))),
                 "r"(bytes)
                 : "memory");
#else
    __trap();
#endif
}

// Arrives once this thread's cp.async copies issued so far have landed. The
// arrival counts toward the barrier's expected count (.noinc), so a barrier
// fed this way is initialised with one count per copying thread.
__device__ __forceinline__ void cp_async_mbarrier_arrive_noinc(uint64_t *bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(bar)))
                 : "memory");
#else
    __trap();
#endif
}

// Blocks until the phase with parity `phase` has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t *bar, uint32_t phase) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n"
        "}\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar))),
        "r"(phase)
        : "memory");
#else
    __trap();
#endif
}

}  // namespace fmha::ptx
