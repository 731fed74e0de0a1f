// Warpgroup-level control (sm_90a): wgmma ordering, register reallocation
// between producer and consumer warpgroups, named barriers.
#pragma once
#include <stdint.h>

namespace fmha::ptx {

// Orders earlier register/shared writes before the next wgmma reads them.
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Waits until at most kPending committed wgmma groups are still running.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving accumulator reads across a wgmma wait.
template <int N>
__device__ __forceinline__ void fence_registers(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// Barrier `id` (1..15; 0 is __syncthreads) over `threads` threads.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Stores four 8x8 16-bit matrices of a warp: register i of lane l holds row
// l / 4, columns 2 (l % 4) and + 1 of matrix i (the mma accumulator layout);
// lane l gives the shared address of row l % 8 of matrix l / 8 (16 bytes).
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                            uint32_t r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
                 "r"(r0), "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}

// 64-bit shared-memory matrix descriptor for wgmma, 128-byte swizzle.
// `lbo`/`sbo` are byte offsets: for K-major operands sbo is the distance
// between 8-row groups; for MN-major ones lbo steps 64-element column blocks
// and sbo steps 8-row groups along K.
__device__ __forceinline__ uint64_t smem_desc_sw128(const void *smem, uint32_t lbo, uint32_t sbo) {
    const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    uint64_t desc = (addr & 0x3FFFFu) >> 4;
    desc |= uint64_t((lbo >> 4) & 0x3FFFu) << 16;
    desc |= uint64_t((sbo >> 4) & 0x3FFFu) << 32;
    desc |= uint64_t(1) << 62;  // layout type 1: 128-byte swizzle
    return desc;
}

// The descriptor of `units` 16-byte units past `desc`'s address: only the
// low word changes (the 14-bit address field cannot carry out below 256 KB),
// so stepping costs one 32-bit add instead of a 64-bit one.
__device__ __forceinline__ uint64_t smem_desc_advance(uint64_t desc, uint32_t units) {
    uint64_t out;
    asm("{\n.reg .b32 lo, hi;\nmov.b64 {lo, hi}, %1;\nadd.u32 lo, lo, %2;\nmov.b64 %0, {lo, hi};\n}\n"
        : "=l"(out) : "l"(desc), "r"(units));
    return out;
}

}  // namespace fmha::ptx
