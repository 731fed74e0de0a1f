// Thread-block clusters (sm_90+): rank, barrier, and loads from a peer
// CTA's shared memory. Only entry points launched with a cluster dimension,
// from images compiled for sm_90+, use them; before sm_90 the barrier is a
// trap and the rest compile to placeholders.
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

// Every thread of every CTA of the cluster; shared-memory writes before it
// are visible to the peers' reads after it.
__device__ __forceinline__ void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile(
        "barrier.cluster.arrive.release.aligned;\n"
        "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
    __trap();
#endif
}

// cluster_sync in two halves, so that work can run between them. After
// cluster_arrive, this thread's earlier shared-memory accesses (its reads of
// a peer's included) are complete for any peer that returns from
// cluster_wait.
__device__ __forceinline__ void cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
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

__device__ __forceinline__ float ld_peer_f32(uint32_t addr) {
    float v = 0.f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
#endif
    return v;
}

__device__ __forceinline__ float4 ld_peer_f32x4(uint32_t addr) {
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(addr)
                 : "memory");
#endif
    return v;
}

}  // namespace fmha::ptx
