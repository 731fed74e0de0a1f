// Thread-block clusters (sm_90+): rank, barrier, and asynchronous stores into
// a peer CTA's shared memory. Only entry points launched with a cluster
// dimension, from images compiled for sm_90+, use them; before sm_90 the
// barrier and the stores are traps and the rest compile to placeholders.
#pragma once

#include <cstdint>

namespace fmha::ptx {

__device__ __forceinline__ unsigned cluster_rank() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
#else
    return 0;
#endif
}

// The cluster barrier in two halves, so that work can run between them.
// After cluster_arrive, this thread's earlier shared-memory accesses are
// complete for any peer that returns from cluster_wait. The arrival's release
// also waits for the thread's cp.async copies in flight: arrive where none are.
__device__ __forceinline__ void cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#else
    __trap();
#endif
}

// An arrival that orders nothing: what the peer may do after its wait must
// not depend on this thread's earlier memory accesses (mbarrier inits are
// ordered by fence_mbarrier_init). No membar, so it waits for nothing.
__device__ __forceinline__ void cluster_arrive_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#else
    __trap();
#endif
}

__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
    __trap();
#endif
}

// The address of `smem` (a shared::cta address) in CTA `rank`'s shared memory.
__device__ __forceinline__ uint32_t peer_smem(uint32_t smem, unsigned rank) {
    uint32_t out = smem;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(smem), "r"(rank));
#endif
    return out;
}

// Asynchronous stores into a peer CTA's shared memory (`addr`, from
// peer_smem) that complete their bytes on the peer's mbarrier `peer_bar`
// (also from peer_smem): the peer learns they have landed by waiting on it.
__device__ __forceinline__ void st_async_peer_f32x4(uint32_t addr, float4 v, uint32_t peer_bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(addr),
        "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(peer_bar)
        : "memory");
#else
    __trap();
#endif
}

__device__ __forceinline__ void st_async_peer_f32x2(uint32_t addr, float x, float y, uint32_t peer_bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];\n" ::"r"(addr),
                 "f"(x), "f"(y), "r"(peer_bar)
                 : "memory");
#else
    __trap();
#endif
}

}  // namespace fmha::ptx
