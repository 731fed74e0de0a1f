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

constexpr int kThreads = kCombineThreads;
constexpr int kWarps = kThreads / 32;
constexpr int kLsePerLane = kMaxCombineParts / 32;  // every warp holds all parts' LSE
constexpr int kPrefetch = 8;  // O chunks per thread loaded before the weights are known

// Where part `part` lies: the caller's pointers (merge) or the workspace at
// a fixed step (split-KV).
template <typename In>
__device__ __forceinline__ const In *part_o(const CombineParams &p, int part) {
    return static_cast<const In *>(p.o_parts[part]);
}
__device__ __forceinline__ const float *part_lse(const CombineParams &p, int part) {
    return p.lse_parts[part];
}
template <typename In>
__device__ __forceinline__ const In *part_o(const SplitCombineParams &p, int part) {
    return p.o_parts + part * p.o_part_step;
}
__device__ __forceinline__ const float *part_lse(const SplitCombineParams &p, int part) {
    return p.lse_parts + part * p.lse_part_step;
}

__device__ __forceinline__ void add_scaled(float4 &acc, float w, const float4 &x) {
    acc.x += w * x.x;
    acc.y += w * x.y;
    acc.z += w * x.z;
    acc.w += w * x.w;
}

// A team of kTeam threads (32, 64 or 128: whole warps) per (row, head),
// 128 / kTeam teams per CTA: with few parts a whole CTA per row left
// most threads idle and the rows ran in several rounds of CTAs. A team's
// critical path is a few memory latencies, so everything independent is
// issued at once. Each thread owns one 4-column chunk of a strided subset of
// the parts (independent loads, many in flight) and loads its first
// kPrefetch chunks together with the LSEs. Every warp reduces all its row's
// LSEs itself (no barrier before the weights), keeps the weights
// w_p = exp(LSE_p - LSE) in its own shared-memory row, and the subsets are
// summed through shared memory at the end: one block barrier, where a team
// has more than one subset (the same for every team of the launch).
template <typename In, bool kBf16Out, int kTeam, typename Params>
__device__ __forceinline__ void combine(const Params &p) {
    static_assert(kTeam % 32 == 0 && kThreads % kTeam == 0, "teams of whole warps fill the CTA");
    using Out = typename Elem<kBf16Out>::T;
    const CombineShape &sh = p.shape;
    __shared__ float weight[kWarps][kMaxCombineParts];
    __shared__ float4 partial[kThreads];

    ptx::wait_for_predecessor();  // split-KV: the decode grid's partials
    ptx::launch_dependents();     // a dependent launch may be scheduled now
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    constexpr int team = kTeam;
    constexpr bool kOneTeam = kTeam == kThreads;
    // The thread's index in its team and the team's first thread.
    const int team_tid = kOneTeam ? tid : tid % team, team0 = kOneTeam ? 0 : tid - team_tid;
    // (row, head) pairs number at most 2^31-1 (check_split_kv, the merge's
    // checks), so 32-bit unsigned arithmetic holds them.
    const unsigned item =
        kOneTeam ? blockIdx.x : blockIdx.x * unsigned(kThreads / team) + unsigned(tid) / team;
    const int64_t row = item / unsigned(sh.heads);
    const int head = static_cast<int>(item % unsigned(sh.heads));
    // One team per CTA: the grid is exactly the pairs, and a CTA past the
    // packed rows leaves at once. Several: a team past the last pair (or the
    // packed rows) does nothing but still reaches the block barrier below.
    if (kOneTeam && sh.row_limit != nullptr && row >= *sh.row_limit) return;
    const bool valid =
        kOneTeam || (row < sh.rows && (sh.row_limit == nullptr || row < *sh.row_limit));
    const int64_t b = row / sh.seqlen, s = row % sh.seqlen;
    const int64_t lse_offset = b * sh.lse_part_stride.batch + s * sh.lse_part_stride.seq +
                               head * sh.lse_part_stride.head;
    const int64_t part_offset =
        b * sh.part_stride.batch + s * sh.part_stride.seq + int64_t(head) * sh.part_stride.head;

    static_assert(kMaxCombineParts % 32 == 0, "whole lanes of LSE");
    float lse_l[kLsePerLane];  // parts lane, lane + 32, ...
#pragma unroll
    for (int i = 0; i < kLsePerLane; ++i) {
        const int part = lane + 32 * i;
        lse_l[i] = valid && part < sh.num_parts ? part_lse(p, part)[lse_offset] : -CUDART_INF_F;
    }

    // head_dim <= 512 (fmha.h's limit): a row's chunks fit in one pass of a
    // team (the host makes the team at least head_dim / 4 threads).
    static_assert(512 / 4 <= kThreads, "one pass over the columns");
    const int chunks = sh.head_dim / 4;
    const int groups = team / chunks;  // part subsets summed in parallel
    const int chunk = team_tid % chunks, group = team_tid / chunks;
    const bool active = valid && group < groups;  // head_dim 96: a few idle threads
    float4 early[kPrefetch];
#pragma unroll
    for (int i = 0; i < kPrefetch; ++i) {
        const int part = group + i * groups;
        if (active && part < sh.num_parts)
            early[i] = load4(part_o<In>(p, part) + part_offset + 4 * chunk);
    }

    // LSE = log(sum_p exp(LSE_p) [+ exp(sink)]), by every warp of the team.
    const float sink = valid && sh.sinks != nullptr ? sh.sinks[head] : -CUDART_INF_F;
    float mx = sink;
#pragma unroll
    for (int i = 0; i < kLsePerLane; ++i) mx = fmaxf(mx, lse_l[i]);
#pragma unroll
    for (int off = 16; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    float sum = 0.f;
    if (mx != -CUDART_INF_F) {
#pragma unroll
        for (int i = 0; i < kLsePerLane; ++i)
            if (lse_l[i] != -CUDART_INF_F) sum += __expf(lse_l[i] - mx);
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (sink != -CUDART_INF_F) sum += __expf(sink - mx);
    // A NaN or +inf LSE (a part's, or the sink) has no place in a sum of
    // exponentials: the row becomes NaN, O and LSE, rather than vanish into
    // "no key" (fmaxf and the -inf tests above would otherwise drop it).
    bool corrupt = !(sink < CUDART_INF_F);
#pragma unroll
    for (int i = 0; i < kLsePerLane; ++i) corrupt |= !(lse_l[i] < CUDART_INF_F);
    corrupt = __any_sync(0xffffffffu, corrupt);
    const float lse = corrupt ? CUDART_NAN_F : sum > 0.f ? mx + __logf(sum) : -CUDART_INF_F;
#pragma unroll
    for (int i = 0; i < kLsePerLane; ++i)
        weight[warp][lane + 32 * i] = corrupt ? CUDART_NAN_F
                                      : lse == -CUDART_INF_F || lse_l[i] == -CUDART_INF_F
                                          ? 0.f
                                          : __expf(lse_l[i] - lse);
    __syncwarp();

    // A part with weight 0 saw no key: it contributes nothing and is never
    // multiplied (its O may be anything, even NaN).
    const float *w = weight[warp];
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    if (active) {
#pragma unroll
        for (int i = 0; i < kPrefetch; ++i) {
            const int part = group + i * groups;
            if (part < sh.num_parts && w[part] != 0.f) add_scaled(acc, w[part], early[i]);
        }
#pragma unroll 4
        for (int part = group + kPrefetch * groups; part < sh.num_parts; part += groups)
            if (w[part] != 0.f)
                add_scaled(acc, w[part], load4(part_o<In>(p, part) + part_offset + 4 * chunk));
    }
    if (groups > 1) {  // uniform across the CTA: every team has the same size
        partial[tid] = acc;
        __syncthreads();
        if (group == 0)
            for (int g = 1; g < groups; ++g) {
                const float4 x = partial[team0 + g * chunks + chunk];
                acc.x += x.x;
                acc.y += x.y;
                acc.z += x.z;
                acc.w += x.w;
            }
    }
    if (!valid) return;
    if (group == 0) {
        Out *out = static_cast<Out *>(sh.o) + b * sh.o_stride.batch + s * sh.o_stride.seq +
                   int64_t(head) * sh.o_stride.head;
        uint2 packed;
        packed.x = Elem<kBf16Out>::pack(acc.x, acc.y);
        packed.y = Elem<kBf16Out>::pack(acc.z, acc.w);
        *reinterpret_cast<uint2 *>(out + 4 * chunk) = packed;
    }
    if (team_tid == 0 && sh.lse != nullptr)
        sh.lse[b * sh.lse_stride.batch + s * sh.lse_stride.seq + head * sh.lse_stride.head] = lse;
}

}  // namespace fmha::combine

// Entry points: split-KV combine (fp32 parts) and merge (16-bit parts), per
// output dtype and team size (none: one team of 128; `_team32`, `_team64`).
// Named by split_kv.cpp (combine_kernel_name) for both.
#define FMHA_COMBINE_ENTRY(name, params, in, bf16_out, team)                           \
    extern "C" __global__ void __launch_bounds__(fmha::combine::kThreads)              \
        name(const fmha::params p) {                                                   \
        fmha::combine::combine<in, bf16_out, team>(p);                                 \
    }
#define FMHA_COMBINE_ENTRIES(name, params, in, bf16_out)                               \
    FMHA_COMBINE_ENTRY(name, params, in, bf16_out, 128)                                \
    FMHA_COMBINE_ENTRY(name##_team32, params, in, bf16_out, 32)                        \
    FMHA_COMBINE_ENTRY(name##_team64, params, in, bf16_out, 64)

FMHA_COMBINE_ENTRIES(fmha_combine_splits_bf16, SplitCombineParams, float, true)
FMHA_COMBINE_ENTRIES(fmha_combine_splits_fp16, SplitCombineParams, float, false)
FMHA_COMBINE_ENTRIES(fmha_merge_bf16, CombineParams, __nv_bfloat16, true)
FMHA_COMBINE_ENTRIES(fmha_merge_fp16, CombineParams, __half, false)
