// Exact combination of partial attention results over disjoint key sets:
//   LSE = log(sum_p exp(LSE_p) [+ exp(sink)]),  O = sum_p exp(LSE_p - LSE) O_p.
// Used as the split-KV epilogue (fp32 partials from the workspace) and by
// fmha_run_merge (16-bit partials from the caller). One warp per (row, head);
// a part with LSE = -inf is skipped, never multiplied, so its O may hold
// anything (even NaN).
#include <math_constants.h>

#include "kernels/numeric.cuh"
#include "kernels/params.h"
#include "kernels/ptx/grid_dependency.cuh"

namespace fmha::combine {

// Four consecutive elements of a part's O, as float.
template <typename In>
__device__ __forceinline__ float4 load4(const In *p);

template <>
__device__ __forceinline__ float4 load4<float>(const float *p) {
    return *reinterpret_cast<const float4 *>(p);
}

template <>
__device__ __forceinline__ float4 load4<__nv_bfloat16>(const __nv_bfloat16 *p) {
    const uint2 raw = *reinterpret_cast<const uint2 *>(p);
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&raw.x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&raw.y));
    return make_float4(a.x, a.y, b.x, b.y);
}

template <>
__device__ __forceinline__ float4 load4<__half>(const __half *p) {
    const uint2 raw = *reinterpret_cast<const uint2 *>(p);
    const float2 a = __half22float2(*reinterpret_cast<const __half2 *>(&raw.x));
    const float2 b = __half22float2(*reinterpret_cast<const __half2 *>(&raw.y));
    return make_float4(a.x, a.y, b.x, b.y);
}

template <typename In, bool kBf16Out>
__device__ __forceinline__ void combine(const CombineParams &p) {
    using Out = typename Elem<kBf16Out>::T;
    ptx::wait_for_predecessor();  // split-KV: the decode grid's partials
    const int lane = threadIdx.x % 32;
    const int64_t item = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    if (item >= p.rows * p.heads) return;
    const int64_t row = item / p.heads;
    const int head = static_cast<int>(item % p.heads);
    if (p.row_limit != nullptr && row >= *p.row_limit) return;  // past the packed rows
    const int64_t b = row / p.seqlen, s = row % p.seqlen;
    auto lse_of = [&](int part) {
        return p.lse_parts[part][b * p.lse_part_stride.batch + s * p.lse_part_stride.seq +
                                 head * p.lse_part_stride.head];
    };

    float mx = p.sinks != nullptr ? p.sinks[head] : -CUDART_INF_F;
    for (int part = lane; part < p.num_parts; part += 32) mx = fmaxf(mx, lse_of(part));
#pragma unroll
    for (int off = 16; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    float sum = 0.f;
    if (mx != -CUDART_INF_F) {
        for (int part = lane; part < p.num_parts; part += 32) sum += __expf(lse_of(part) - mx);
        if (lane == 0 && p.sinks != nullptr) sum += __expf(p.sinks[head] - mx);
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    const float lse = sum > 0.f ? mx + __logf(sum) : -CUDART_INF_F;

    Out *out = static_cast<Out *>(p.o) + b * p.o_stride.batch + s * p.o_stride.seq +
               int64_t(head) * p.o_stride.head;
    const int64_t part_offset =
        b * p.part_stride.batch + s * p.part_stride.seq + int64_t(head) * p.part_stride.head;
    for (int d = lane * 4; d < p.head_dim; d += 128) {
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
        if (lse != -CUDART_INF_F) {
            for (int part = 0; part < p.num_parts; ++part) {
                const float lp = lse_of(part);
                if (lp == -CUDART_INF_F) continue;  // saw no key: contributes nothing
                const float w = __expf(lp - lse);
                const float4 x = load4(static_cast<const In *>(p.o_parts[part]) + part_offset + d);
                acc.x += w * x.x;
                acc.y += w * x.y;
                acc.z += w * x.z;
                acc.w += w * x.w;
            }
        }
        uint2 packed;
        packed.x = Elem<kBf16Out>::pack(acc.x, acc.y);
        packed.y = Elem<kBf16Out>::pack(acc.z, acc.w);
        *reinterpret_cast<uint2 *>(out + d) = packed;
    }
    if (lane == 0 && p.lse != nullptr)
        p.lse[b * p.lse_stride.batch + s * p.lse_stride.seq + head * p.lse_stride.head] = lse;
}

}  // namespace fmha::combine

// Entry points: split-KV combine (fp32 parts) and merge (16-bit parts), per
// output dtype. Named in launch_decode.cpp and merge.cpp.
#define FMHA_COMBINE_ENTRY(name, in, bf16_out)                                         \
    extern "C" __global__ void __launch_bounds__(128) name(const fmha::CombineParams p) { \
        fmha::combine::combine<in, bf16_out>(p);                                       \
    }

FMHA_COMBINE_ENTRY(fmha_combine_splits_bf16, float, true)
FMHA_COMBINE_ENTRY(fmha_combine_splits_fp16, float, false)
FMHA_COMBINE_ENTRY(fmha_merge_bf16, __nv_bfloat16, true)
FMHA_COMBINE_ENTRY(fmha_merge_fp16, __half, false)
