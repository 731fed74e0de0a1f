// Hopper forward kernel: the wgmma issues of S = Q·Kᵀ and O += P·V, and P
// repacked from the S accumulator as the A fragment.
#pragma once
#include <stdint.h>

#include "kernels/numeric.cuh"
#include "kernels/ptx/mma_sync.cuh"
#include "kernels/ptx/warpgroup.cuh"
#include "kernels/ptx/wgmma.cuh"
#include "kernels/sm90/config.cuh"

namespace fmha::sm90 {

// S tile = Q·Kᵀ, one k-step: N keys wide (the key tile), A and B from shared memory.
template <bool kBf16, int N>
__device__ __forceinline__ void s_gemm(float (&d)[N / 2], uint64_t a, uint64_t b, int acc) {
    if constexpr (N == 32) ptx::wgmma_m64n32k16_ss<kBf16, 0>(d, a, b, acc);
    else if constexpr (N == 64) ptx::wgmma_m64n64k16_ss<kBf16, 0>(d, a, b, acc);
    else if constexpr (N == 80) ptx::wgmma_m64n80k16_ss<kBf16, 0>(d, a, b, acc);
    else if constexpr (N == 128) ptx::wgmma_m64n128k16_ss<kBf16, 0>(d, a, b, acc);
    else if constexpr (N == 176) ptx::wgmma_m64n176k16_ss<kBf16, 0>(d, a, b, acc);
    else ptx::wgmma_m64n192k16_ss<kBf16, 0>(d, a, b, acc);
}

// O chunk += P (registers) · V chunk (MN-major in shared memory).
template <bool kBf16, int N>
__device__ __forceinline__ void pv_gemm(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b) {
    if constexpr (N == 64) ptx::wgmma_m64n64k16_rs<kBf16, 1>(d, a, b, 1);
    else ptx::wgmma_m64n128k16_rs<kBf16, 1>(d, a, b, 1);
}

// Shared S with part of Q held in registers: the first Cfg::kQRegSteps
// k-steps of this consumer's half of the block's Q as wgmma A fragments
// (warp w: rows 16w..16w+15, the mma.m16n8k16 A layout), read once per query
// block from the 128-byte-swizzled Q boxes; the other k-steps read Q from
// shared memory.
template <typename Cfg>
__device__ __forceinline__ void load_q_fragments(uint32_t (&qa)[Cfg::kQRegArray][4],
                                                 const uint8_t *q_rows, int kk0, int tid) {
    const int lane = tid % 32, warp = tid / 32;
    const int m = lane / 8;                              // the x4 load's matrix
    const int row = warp * 16 + (m % 2) * 8 + lane % 8;  // row of the block
#pragma unroll
    for (int step = 0; step < Cfg::kQRegSteps; ++step) {
        const int kk = kk0 + step;
        const int chunk = (kk % 4) * 2 + m / 2;          // 16-byte chunk in the 128-byte row
        const uint8_t *addr =
            q_rows + (kk / 4) * Cfg::BM * 128 + row * 128 + ((chunk ^ (row % 8)) << 4);
        ptx::ldmatrix_x4(qa[step], ptx::smem_addr(addr));
    }
}

// Issues S = Q·Kᵀ for one K tile (one commit group). Both operands are
// K-major: 8-row groups 1024 bytes apart (K's kKGroupStride); a k-step of 16
// columns is 32 bytes inside the swizzled 128-byte row, and every 4 k-steps
// move to the next box (K's kKBoxStride).
// With shared S (split D), consumer c takes the k-steps from kk0 =
// c * kSSteps: its half of the head dim, the first Cfg::kQRegSteps of them
// with Q from `qa` (load_q_fragments).
template <bool kBf16, typename Cfg>
__device__ __forceinline__ void issue_s_gemm(float (&sacc)[Cfg::kSRegs],
                                             const uint32_t (&qa)[Cfg::kQRegArray][4],
                                             const uint8_t *q_rows, const uint8_t *k_tile, int kk0) {
    ptx::wgmma_fence();
    if constexpr (Cfg::kSplitD) {
        // 32 k-steps (16 with shared S): step from one base descriptor (the
        // address field counts 16-byte units) rather than hoist 32 pairs of
        // them; the base sits at kk0's box, so every step's offset is a
        // constant. Unrolled: a rolled loop made ptxas fence every wgmma (h9:
        // 1.75x slower).
        static_assert(Cfg::kSSteps % 4 == 0, "a consumer's k-steps start at a box");
        const int box0 = kk0 / 4;
        const uint64_t a0 = ptx::smem_desc_sw128(q_rows + box0 * Cfg::BM * 128, 16, 1024);
        const uint64_t b0 = ptx::smem_desc_sw128(k_tile + box0 * Cfg::BN * 128, 16, 1024);
#pragma unroll
        for (int step = 0; step < Cfg::kSSteps; ++step) {
            const int box = step / 4, koff = (step % 4) * 32;
            // With shared S the base is a run-time value (the consumer's half):
            // 32-bit steps keep it in uniform registers (h10: 7% faster than
            // 64-bit adds, which took 4 R2UR per wgmma). Below 64 rows the
            // base is known at compile time and 64-bit adds fold.
            if constexpr (Cfg::kSharedS) {
                const uint64_t b = ptx::smem_desc_advance(b0, (box * Cfg::BN * 128 + koff) >> 4);
                if constexpr (Cfg::kQRegSteps > 0) {
                    if (step < Cfg::kQRegSteps) {
                        ptx::wgmma_m64n32k16_rs<kBf16, 0>(sacc, qa[step < Cfg::kQRegSteps ? step : 0],
                                                          b, step > 0);
                        continue;
                    }
                }
                s_gemm<kBf16, Cfg::BN>(
                    sacc, ptx::smem_desc_advance(a0, (box * Cfg::BM * 128 + koff) >> 4), b, step > 0);
            } else {
                s_gemm<kBf16, Cfg::BN>(sacc, a0 + ((box * Cfg::BM * 128 + koff) >> 4),
                                       b0 + ((box * Cfg::BN * 128 + koff) >> 4), step > 0);
            }
        }
    } else {
#pragma unroll
        for (int kk = 0; kk < Cfg::Dp / 16; ++kk) {
            const int box = kk / 4, koff = (kk % 4) * 32;
            const uint64_t a = ptx::smem_desc_sw128(q_rows + box * Cfg::BM * 128 + koff, 16, 1024);
            const uint64_t b = ptx::smem_desc_sw128(k_tile + box * Cfg::kKBoxStride + koff, 16,
                                                    Cfg::kKGroupStride);
            s_gemm<kBf16, Cfg::BN>(sacc, a, b, kk > 0);
        }
    }
    ptx::wgmma_commit();
}

// Issues O += P·V for one V tile (one commit group). V is MN-major (head dim
// contiguous): 64-column boxes are kVBoxStride bytes apart (lbo), 8-key
// groups 1024 bytes apart (sbo); a k-step of 16 keys is kVKeyStep bytes
// (config.cuh). `v_tile` points at the box of the consumer's first O column.
template <bool kBf16, typename Cfg>
__device__ __forceinline__ void issue_pv_gemm(float (&o)[Cfg::kOChunks][Cfg::kORegs],
                                              const uint32_t (&pa)[Cfg::BN / 16][4],
                                              const uint8_t *v_tile) {
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Cfg::BN / 16; ++kk) {
#pragma unroll
        for (int c = 0; c < Cfg::kOChunks; ++c) {
            const uint8_t *tile =
                v_tile + (c * Cfg::kOChunkN / 64) * Cfg::kVBoxStride + kk * Cfg::kVKeyStep;
            pv_gemm<kBf16, Cfg::kOChunkN>(o[c], pa[kk],
                                          ptx::smem_desc_sw128(tile, Cfg::kVBoxStride, 1024));
        }
    }
    ptx::wgmma_commit();
}

// The S accumulator of two 8-column tiles is the A fragment of one k-step.
template <bool kBf16, typename Cfg>
__device__ __forceinline__ void pack_p(uint32_t (&pa)[Cfg::BN / 16][4],
                                       const float (&sacc)[Cfg::kSRegs]) {
#pragma unroll
    for (int kk = 0; kk < Cfg::BN / 16; ++kk) {
        pa[kk][0] = Elem<kBf16>::pack(sacc[8 * kk + 0], sacc[8 * kk + 1]);
        pa[kk][1] = Elem<kBf16>::pack(sacc[8 * kk + 2], sacc[8 * kk + 3]);
        pa[kk][2] = Elem<kBf16>::pack(sacc[8 * kk + 4], sacc[8 * kk + 5]);
        pa[kk][3] = Elem<kBf16>::pack(sacc[8 * kk + 6], sacc[8 * kk + 7]);
    }
}

// Shared S: each consumer holds S over its half of the head dim; the halves
// meet in shared memory (thread t's 4-float group i at [i][t], so a quarter
// warp's 16-byte stores cover 128 contiguous bytes) and each consumer adds
// the other's. a + b == b + a, so both get the same S bit for bit. Two
// buffers by tile parity: a consumer rewrites one only after the next tile's
// barrier, which the other passes only after reading it.
template <typename Cfg>
__device__ __forceinline__ void share_s(float (&s)[Cfg::kSRegs], float *shared_s, int parity,
                                        int consumer, int tid) {
    static_assert(Cfg::kConsumers == 2 && Cfg::kSRegs % 4 == 0, "two halves, float4 groups");
    constexpr int kGroups = Cfg::kSRegs / 4;
    float4 *mine = reinterpret_cast<float4 *>(shared_s) + (parity * 2 + consumer) * kGroups * 128;
    const float4 *other =
        reinterpret_cast<const float4 *>(shared_s) + (parity * 2 + (consumer ^ 1)) * kGroups * 128;
#pragma unroll
    for (int i = 0; i < kGroups; ++i)
        mine[i * 128 + tid] = make_float4(s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]);
    ptx::named_barrier_sync(kConsumersBarrier, 128 * Cfg::kConsumers);
#pragma unroll
    for (int i = 0; i < kGroups; ++i) {
        const float4 x = other[i * 128 + tid];
        s[4 * i] += x.x;
        s[4 * i + 1] += x.y;
        s[4 * i + 2] += x.z;
        s[4 * i + 3] += x.w;
    }
}

}  // namespace fmha::sm90
