// 16-bit element types and packing shared by the kernel families.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace fmha {

template <bool kBf16>
struct Elem;

template <>
struct Elem<true> {
    using T = __nv_bfloat16;
    // Packs two floats into one register of two bf16 (lo = a).
    __device__ __forceinline__ static uint32_t pack(float a, float b) {
        __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
        return *reinterpret_cast<uint32_t *>(&v);
    }
};

template <>
struct Elem<false> {
    using T = __half;
    __device__ __forceinline__ static uint32_t pack(float a, float b) {
        __half2 v = __floats2half2_rn(a, b);
        return *reinterpret_cast<uint32_t *>(&v);
    }
};

}  // namespace fmha
