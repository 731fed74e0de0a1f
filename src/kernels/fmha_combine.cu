// Exact combination of partial attention results over disjoint key sets:
//   LSE = log(sum_p exp(LSE_p) [+ exp(sink)]),  O = sum_p exp(LSE_p - LSE) O_p.
// Used as the split-KV epilogue (fp32 partials from the workspace) and by
// fmha_run_merge (16-bit partials from the caller). A part with LSE = -inf
// is skipped, never multiplied, so its O may hold anything (even NaN).
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

constexpr int kThreads = 128;

// One CTA per (row, head). First the weights w_p = exp(LSE_p - LSE) of all
// parts go to shared memory; then each thread accumulates one 4-column chunk
// over a strided subset of the parts (independent loads, many in flight: a
// serial walk over the parts would be latency-bound), and the subsets are
// summed through shared memory.
template <typename In, bool kBf16Out>
__device__ __forceinline__ void combine(const CombineParams &p) {
    using Out = typename Elem<kBf16Out>::T;
    __shared__ float weight[kMaxCombineParts];
    __shared__ float reduce[kThreads / 32];
    __shared__ float4 partial[kThreads];
    __shared__ float lse_shared;

    ptx::wait_for_predecessor();  // split-KV: the decode grid's partials
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int64_t row = blockIdx.x / p.heads;
    const int head = static_cast<int>(blockIdx.x % p.heads);
    if (p.row_limit != nullptr && row >= *p.row_limit) return;  // past the packed rows
    const int64_t b = row / p.seqlen, s = row % p.seqlen;

    float lse_p = -CUDART_INF_F;  // this thread's part (tid < num_parts)
    if (tid < p.num_parts)
        lse_p = p.lse_parts[tid][b * p.lse_part_stride.batch + s * p.lse_part_stride.seq +
                                 head * p.lse_part_stride.head];
    static_assert(kMaxCombineParts <= kThreads, "one part per thread for the weights");
    // Block max (the sink joins as one more logit), then the sum.
    float mx = lse_p;
    if (tid == 0 && p.sinks != nullptr) mx = fmaxf(mx, p.sinks[head]);
#pragma unroll
    for (int off = 16; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    if (lane == 0) reduce[warp] = mx;
    __syncthreads();
    mx = reduce[0];
#pragma unroll
    for (int w = 1; w < kThreads / 32; ++w) mx = fmaxf(mx, reduce[w]);
    __syncthreads();
    float e = mx == -CUDART_INF_F || lse_p == -CUDART_INF_F ? 0.f : __expf(lse_p - mx);
    if (tid == 0 && p.sinks != nullptr && mx != -CUDART_INF_F) e += __expf(p.sinks[head] - mx);
    float sum = e;
#pragma unroll
    for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0) reduce[warp] = sum;
    __syncthreads();
    if (tid == 0) {
        float total = 0.f;
#pragma unroll
        for (int w = 0; w < kThreads / 32; ++w) total += reduce[w];
        lse_shared = total > 0.f ? mx + __logf(total) : -CUDART_INF_F;
    }
    __syncthreads();
    const float lse = lse_shared;
    if (tid < p.num_parts)
        weight[tid] = lse == -CUDART_INF_F || lse_p == -CUDART_INF_F ? 0.f : __expf(lse_p - lse);
    __syncthreads();

    const int chunks = p.head_dim / 4;          // 4-column chunks of a row
    const int per_pass = kThreads / chunks > 0 ? chunks : kThreads;
    const int groups = kThreads / per_pass;     // part subsets summed in parallel
    const int chunk = tid % per_pass, group = tid / per_pass;
    const int64_t part_offset =
        b * p.part_stride.batch + s * p.part_stride.seq + int64_t(head) * p.part_stride.head;
    Out *out = static_cast<Out *>(p.o) + b * p.o_stride.batch + s * p.o_stride.seq +
               int64_t(head) * p.o_stride.head;
    for (int c0 = 0; c0 < chunks; c0 += per_pass) {
        const int c = c0 + chunk;
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
        if (group < groups && c < chunks) {
#pragma unroll 4
            for (int part = group; part < p.num_parts; part += groups) {
                const float w = weight[part];
                if (w == 0.f) continue;  // saw no key: contributes nothing, not read
                const float4 x =
                    load4(static_cast<const In *>(p.o_parts[part]) + part_offset + 4 * c);
                acc.x += w * x.x;
                acc.y += w * x.y;
                acc.z += w * x.z;
                acc.w += w * x.w;
            }
        }
        partial[tid] = acc;
        __syncthreads();
        if (group == 0 && c < chunks) {
            for (int g = 1; g < groups; ++g) {
                const float4 x = partial[g * per_pass + chunk];
                acc.x += x.x;
                acc.y += x.y;
                acc.z += x.z;
                acc.w += x.w;
            }
            uint2 packed;
            packed.x = Elem<kBf16Out>::pack(acc.x, acc.y);
            packed.y = Elem<kBf16Out>::pack(acc.z, acc.w);
            *reinterpret_cast<uint2 *>(out + 4 * c) = packed;
        }
        __syncthreads();
    }
    if (tid == 0 && p.lse != nullptr)
        p.lse[b * p.lse_stride.batch + s * p.lse_stride.seq + head * p.lse_stride.head] = lse;
}

}  // namespace fmha::combine

// Entry points: split-KV combine (fp32 parts) and merge (16-bit parts), per
// output dtype. Named in launch_decode.cpp and merge.cpp.
#define FMHA_COMBINE_ENTRY(name, in, bf16_out)                                         \
    extern "C" __global__ void __launch_bounds__(fmha::combine::kThreads)              \
        name(const fmha::CombineParams p) {                                            \
        fmha::combine::combine<in, bf16_out>(p);                                       \
    }

FMHA_COMBINE_ENTRY(fmha_combine_splits_bf16, float, true)
FMHA_COMBINE_ENTRY(fmha_combine_splits_fp16, float, false)
FMHA_COMBINE_ENTRY(fmha_merge_bf16, __nv_bfloat16, true)
FMHA_COMBINE_ENTRY(fmha_merge_fp16, __half, false)
