// Tensor-memory-accelerator copies (cp.async.bulk.tensor, sm_90) between
// global memory, described by a CUtensorMap, and shared memory.
#pragma once
#include <stdint.h>

namespace fmha::ptx {

// 4-D tile load completing on `bar` (coordinates innermost first).
__device__ __forceinline__ void tma_load_4d(void *dst, const void *tensor_map, uint64_t *bar,
                                            int c0, int c1, int c2, int c3) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(
            static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
        "l"(tensor_map), "r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar))), "r"(c0),
        "r"(c1), "r"(c2), "r"(c3)
        : "memory");
}

// 4-D tile store; elements outside the tensor's bounds are not written.
__device__ __forceinline__ void tma_store_4d(const void *tensor_map, const void *src, int c0,
                                             int c1, int c2, int c3) {
    asm volatile(
        "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], "
        "[%1];\n" ::"l"(tensor_map),
        "r"(static_cast<uint32_t>(__cvta_generic_to_shared(src))), "r"(c0), "r"(c1), "r"(c2),
        "r"(c3)
        : "memory");
}

// 5-D tile load completing on `bar` (coordinates innermost first).
__device__ __forceinline__ void tma_load_5d(void *dst, const void *tensor_map, uint64_t *bar,
                                            int c0, int c1, int c2, int c3, int c4) {
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n" ::"r"(
            static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
        "l"(tensor_map), "r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar))), "r"(c0),
        "r"(c1), "r"(c2), "r"(c3), "r"(c4)
        : "memory");
}

// 5-D tile store; elements outside the tensor's bounds are not written.
__device__ __forceinline__ void tma_store_5d(const void *tensor_map, const void *src, int c0,
                                             int c1, int c2, int c3, int c4) {
    asm volatile(
        "cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5, %6}], "
        "[%1];\n" ::"l"(tensor_map),
        "r"(static_cast<uint32_t>(__cvta_generic_to_shared(src))), "r"(c0), "r"(c1), "r"(c2),
        "r"(c3), "r"(c4)
        : "memory");
}

__device__ __forceinline__ void tma_store_commit() {
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// Waits until the committed stores have finished reading shared memory.
__device__ __forceinline__ void tma_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

// Orders this thread's ordinary shared-memory writes before later async-proxy
// (TMA, wgmma) reads of them.
__device__ __forceinline__ void fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void prefetch_tensor_map(const void *tensor_map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(tensor_map) : "memory");
}

}  // namespace fmha::ptx
