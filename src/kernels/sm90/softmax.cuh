// Hopper forward kernel: online softmax of a consumer's rows, with the
// softcap, the masks (key end, diagonal, window edges) and the O rescale.
#pragma once
#include <math_constants.h>

#include "kernels/mask_bounds.h"
#include "kernels/params.h"
#include "kernels/ptx/math.cuh"
#include "kernels/sequence.cuh"

namespace fmha::sm90 {

// Online softmax state of the two rows a thread holds (g and g + 8 of its
// warp's 16); a row is shared by the 4 lanes of a quad.
template <typename Cfg>
struct Softmax {
    float row_max[2] = {-CUDART_INF_F, -CUDART_INF_F};  // raw score maximum
    float row_sum[2] = {0.f, 0.f};                      // this lane's partial sum
    float alpha[2] = {1.f, 1.f};                        // last update's rescale factor

    // Caps the scores (softcap), masks (only tiles crossing the key end, the
    // diagonal or a window's edges), updates the running max and sum, and
    // turns S into unnormalized probabilities. Rows are tile rows: query
    // position row >> shift (packed query heads); this warpgroup's 64 rows
    // start at first_row.
    template <bool kFirst>
    __device__ __forceinline__ void update(float (&s)[Cfg::kSRegs], const FwdParams &p,
                                           const Sequence &seq, int n0, int row_base, int t,
                                           int first_row, int shift) {
        if (Cfg::kScoreMods && p.softcap > 0.f) {
#pragma unroll
            for (int i = 0; i < Cfg::kSRegs; ++i)
                s[i] = p.softcap * ptx::tanh_approx(s[i] * p.softcap_scale);
        }
        const bool crosses_end = n0 + Cfg::BN > seq.len_k;
        const bool crosses_hi =
            seq.has_hi && int64_t(n0 + Cfg::BN - 1) > int64_t(first_row >> shift) + seq.hi;
        const bool crosses_lo = Cfg::kScoreMods && seq.has_lo &&
                                int64_t(n0) < int64_t((first_row + 63) >> shift) + seq.lo;
        if (Cfg::kRowMaskBounds && (crosses_end || crosses_hi || crosses_lo)) {
            // Each of the thread's two rows sees the columns [lo, hi] of the
            // tile, relative to its first column n0 + 2t and clamped to the
            // tile: the 64-bit index math runs once per row, and each score
            // costs a compare pair (every tile of a narrow window is masked).
            ColumnRange cols[2];
#pragma unroll
            for (int r = 0; r < 2; ++r)
                cols[r] = visible_columns((row_base + 8 * r) >> shift, n0 + 2 * t, seq.len_k,
                                          seq.has_hi, seq.hi, Cfg::kScoreMods && seq.has_lo,
                                          seq.lo, Cfg::BN);
#pragma unroll
            for (int i = 0; i < Cfg::kSRegs; ++i) {
                const int c = (i / 4) * 8 + (i % 2);
                const int r = (i % 4) / 2;
                if (c < cols[r].lo || c > cols[r].hi) s[i] = -CUDART_INF_F;
            }
        } else if (crosses_end || crosses_hi) {
            // The plain wide tile keeps the per-score form.
#pragma unroll
            for (int i = 0; i < Cfg::kSRegs; ++i) {
                const int col = n0 + (i / 4) * 8 + 2 * t + (i % 2);
                const int64_t row = (row_base + 8 * ((i % 4) / 2)) >> shift;
                const bool visible = col < seq.len_k && (!seq.has_hi || col <= row + seq.hi);
                if (!visible) s[i] = -CUDART_INF_F;
            }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float mx = row_max[r];
#pragma unroll
            for (int i = 0; i < Cfg::kSRegs; i += 4) mx = fmaxf(mx, fmaxf(s[i + 2 * r], s[i + 2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            // A row with no visible key yet keeps max -inf: subtract 0 instead.
            const float m_scaled = mx == -CUDART_INF_F ? 0.f : mx * p.scale_log2;
            alpha[r] = kFirst ? 1.f : ptx::exp2_approx(row_max[r] * p.scale_log2 - m_scaled);
            row_max[r] = mx;
            float sum = 0.f;
#pragma unroll
            for (int i = 0; i < Cfg::kSRegs; i += 4) {
#pragma unroll
                for (int e = 2 * r; e < 2 * r + 2; ++e) {
                    s[i + e] = ptx::exp2_approx(fmaf(s[i + e], p.scale_log2, -m_scaled));
                    sum += s[i + e];
                }
            }
            row_sum[r] = row_sum[r] * alpha[r] + sum;
        }
    }

    __device__ __forceinline__ void rescale(float (&o)[Cfg::kOChunks][Cfg::kORegs]) const {
#pragma unroll
        for (int c = 0; c < Cfg::kOChunks; ++c)
#pragma unroll
            for (int i = 0; i < Cfg::kORegs; i += 4) {
                o[c][i] *= alpha[0];
                o[c][i + 1] *= alpha[0];
                o[c][i + 2] *= alpha[1];
                o[c][i + 3] *= alpha[1];
            }
    }
};

}  // namespace fmha::sm90
