// Hopper forward kernel: the epilogue: sinks, split-KV partials, and O staged
// in shared memory and stored by TMA (row by row for packed Q), then the LSE.
#pragma once
#include <math_constants.h>

#include "kernels/numeric.cuh"
#include "kernels/params.h"
#include "kernels/ptx/math.cuh"
#include "kernels/ptx/tma.cuh"
#include "kernels/ptx/warpgroup.cuh"
#include "kernels/sequence.cuh"
#include "kernels/sm90/config.cuh"
#include "kernels/sm90/schedule.cuh"

namespace fmha::sm90 {

// Attention sinks: the sink logit of each row's head (natural units, not
// scaled) joins the softmax denominator with no value row, so O shrinks by
// sum / (sum + e^sink) and the LSE takes it in. `inv` and `lse` arrive as
// computed from the row's sum without it (no key seen: sum 0, inv 0, lse
// -inf); a row that saw no key keeps O = 0 and gets the sink's LSE.
__device__ __forceinline__ void add_sinks(const Sm90Params &params, const TileCoord &tile,
                                          const float (&row_max)[2], const float (&sums)[2],
                                          int row_base, float (&inv)[2], float (&lse)[2]) {
    const FwdParams &p = params.fwd;
    constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int head = head_of_row(params, tile, row_base + 8 * r);
        if (head < 0) continue;  // padding row, never stored
        const bool saw_keys = sums[r] > 0.f;
        const float sum = sums[r];
        const float m = saw_keys ? row_max[r] * p.scale_log2 : -CUDART_INF_F;
        const float sink = p.sinks[head] * kLog2e;
        const float mm = fmaxf(m, sink);
        if (mm == -CUDART_INF_F) continue;  // no key and a sink of -inf: as computed
        const float keep = saw_keys ? ptx::exp2_approx(m - mm) : 0.f;
        const float total = sum * keep + ptx::exp2_approx(sink - mm);
        inv[r] = keep / total;
        lse[r] = (mm + __log2f(total)) * kLn2;
    }
}

// Split-KV epilogue: this thread's two rows of normalized O (fp32) from
// column col0 and their LSE go to the split's partials, for the combine
// kernel. Under split D the consumers hold the same LSE; the first stores it.
template <typename Cfg>
__device__ __forceinline__ void store_partials(const Sm90Params &params,
                                               const float (&o)[Cfg::kOChunks][Cfg::kORegs],
                                               const float (&inv)[2], const float (&lse)[2],
                                               const Sequence &seq, const Tile &tile, int split,
                                               int row_base, int col0, int t) {
    const FwdParams &p = params.fwd;
    const int shift = params.group_shift;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int row = row_base + 8 * half;
        const int pos = row >> shift;
        const int head = head_of_row(params, tile, row);
        if (pos >= seq.len_q || head < 0) continue;
        const int64_t q_row = p.cu_seqlens_q != nullptr ? seq.q_row0 + pos
                                                        : int64_t(tile.batch) * p.seqlen_q + pos;
        const int64_t part_row = (int64_t(split) * params.q_rows + q_row) * p.num_q_heads + head;
        float *dst = params.partial_o + part_row * Cfg::D + col0;
#pragma unroll
        for (int c = 0; c < Cfg::kOChunks; ++c)
#pragma unroll
            for (int i = 2 * half; i < Cfg::kORegs; i += 4) {
                const int col = c * Cfg::kOChunkN + (i / 4) * 8 + 2 * t;  // from col0
                if (col < Cfg::D)  // hd96: the padded columns are not stored
                    *reinterpret_cast<float2 *>(dst + col) =
                        make_float2(o[c][i] * inv[half], o[c][i + 1] * inv[half]);
            }
        if (t == 0 && col0 == 0)
            params.partial_lse[(int64_t(split) * p.num_q_heads + head) * params.q_rows + q_row] =
                lse[half];
    }
}

// Packed Q's full blocks stored by TMA: the `_varlen` entry points of hd96
// and hd128 only (hd64's three consumers and hd256 spilled with it).
template <typename Cfg>
constexpr bool kPackedBoxes = Cfg::kCompactWalk && (Cfg::D == 96 || Cfg::D == 128);

// Epilogue: normalized O (this consumer's columns from col0) staged in the
// TMA 128-byte swizzled layout (row r's 16-byte chunk c sits at chunk
// c ^ (r % 8)) and stored with TMA (row by row for packed Q), then the LSE.
template <bool kBf16, typename Cfg>
__device__ __forceinline__ void store_output(const Sm90Params &params,
                                             const float (&o)[Cfg::kOChunks][Cfg::kORegs],
                                             const float (&inv)[2], const float (&lse)[2],
                                             const Sequence &seq, const Tile &tile,
                                             uint8_t *o_mine, int first_row, int row_base,
                                             int col0, int consumer, int tid) {
    constexpr int BM = Cfg::BM;
    const FwdParams &p = params.fwd;
    const int shift = params.group_shift;
    const int warp = tid / 32, t = tid % 4;
    if constexpr (Cfg::kSeparateO) {
        // The previous tile's store must have read the buffer.
        if (tid == 0) ptx::tma_store_wait_read();
        ptx::named_barrier_sync(1 + consumer, 128);
    }
    if constexpr (Cfg::kSplitD) {
        // O is staged over Q, whose rows every consumer reads: all must be
        // past their last S GEMM (retired: wgmma_wait) first.
        ptx::named_barrier_sync(kConsumersBarrier, 128 * Cfg::kConsumers);
    }
    uint8_t *o_cols = o_mine + (col0 / 64) * BM * 128;  // box of the first owned column
    // stmatrix: each instruction stores 16 rows x 16 columns of the warp,
    // one 16-byte chunk per row and 8x8 matrix, so the swizzle keeps every
    // 8-row phase on distinct banks (4-byte stores conflicted 1.8-way and
    // cost hd128 s512 4.5%, kernel-notes h16). Lane l addresses row l % 8
    // (+ 8 for odd l / 8) of column block l / 16.
    {
        const int lane = tid % 32;
        const int r = warp * 16 + (lane % 8) + 8 * ((lane / 8) % 2);
        const uint32_t row_addr =
            static_cast<uint32_t>(__cvta_generic_to_shared(o_cols)) + r * 128;
#pragma unroll
        for (int c = 0; c < Cfg::kOChunks; ++c) {
#pragma unroll
            for (int i = 0; i < Cfg::kORegs; i += 8) {  // two 8-column blocks
                const int col = c * Cfg::kOChunkN + (i / 4) * 8 + 8 * (lane / 16);  // from col0
                const uint32_t dst =
                    row_addr + (col / 64) * BM * 128 + ((((col % 64) / 8) ^ (r % 8)) << 4);
                ptx::stmatrix_x4(dst, Elem<kBf16>::pack(o[c][i] * inv[0], o[c][i + 1] * inv[0]),
                                 Elem<kBf16>::pack(o[c][i + 2] * inv[1], o[c][i + 3] * inv[1]),
                                 Elem<kBf16>::pack(o[c][i + 4] * inv[0], o[c][i + 5] * inv[0]),
                                 Elem<kBf16>::pack(o[c][i + 6] * inv[1], o[c][i + 7] * inv[1]));
            }
        }
    }
    if (kPackedBoxes<Cfg> && first_row + 63 < seq.len_q) {
        // `_varlen` entry points (packed Q, no packed heads): this consumer's
        // rows lie wholly inside the sequence, so one TMA box at its packed
        // row (the map spans all packed rows) stores them; a partial last
        // block goes row by row below (h27).
        ptx::fence_proxy_async_shared();
        ptx::named_barrier_sync(1 + consumer, 128);
        if (tid == 0) {
            const int row = static_cast<int>(seq.q_row0) + first_row;
            for (int b = col0 / 64; b < (col0 + Cfg::kDv) / 64; ++b)
                ptx::tma_store_5d(&params.o, o_mine + b * BM * 128, b * 64, 0, row, tile.head, 0);
            ptx::tma_store_commit();
            if (!Cfg::kSeparateO) ptx::tma_store_wait_read();
        }
    } else if (p.cu_seqlens_q == nullptr) {
        ptx::fence_proxy_async_shared();
        ptx::named_barrier_sync(1 + consumer, 128);
        if (tid == 0) {
            // Groups wider than a box (hd512, P = 128) start a box inside one.
            const int group_row = Cfg::kMaxGroup > 64 ? first_row & ((1 << shift) - 1) : 0;
            for (int b = col0 / 64; b < (col0 + Cfg::kDv) / 64; ++b)
                ptx::tma_store_5d(&params.o, o_mine + b * BM * 128, b * 64, group_row,
                                  first_row >> shift, tile.head, tile.batch);
            ptx::tma_store_commit();
            if (!Cfg::kSeparateO) ptx::tma_store_wait_read();
        }
    } else {
        // Packed (varlen) rows: the tile's rows past the sequence belong to
        // the next one, so store row by row (16-byte chunks) instead of a TMA
        // box; row r is position r >> shift of its head.
        ptx::named_barrier_sync(1 + consumer, 128);
        using T = typename Elem<kBf16>::T;
        T *o_seq = static_cast<T *>(p.o) + seq.q_row0 * p.o_stride.seq;
        constexpr int kChunks = (Cfg::kSplitD ? Cfg::kDv : Cfg::D) / 8;  // this consumer's
        for (int idx = tid; idx < 64 * kChunks; idx += 128) {
            const int r = idx / kChunks, c = col0 / 8 + idx % kChunks;
            const int pos = (first_row + r) >> shift;
            const int head = head_of_row(params, tile, first_row + r);
            if (pos >= seq.len_q || head < 0) continue;
            const uint8_t *src = o_mine + (c / 8) * BM * 128 + r * 128 + (((c % 8) ^ (r % 8)) << 4);
            *reinterpret_cast<uint4 *>(o_seq + int64_t(pos) * p.o_stride.seq +
                                       int64_t(head) * p.o_stride.head + c * 8) =
                *reinterpret_cast<const uint4 *>(src);
        }
    }
    if (p.lse != nullptr && t == 0 && col0 == 0) {  // split D: the first consumer's
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int row = row_base + 8 * r;
            const int pos = row >> shift;
            const int head = head_of_row(params, tile, row);
            if (pos < seq.len_q && head >= 0)
                p.lse[tile.batch * p.lse_batch_stride + head * p.lse_head_stride +
                      seq.q_row0 + pos] = lse[r];
        }
    }
}

}  // namespace fmha::sm90
