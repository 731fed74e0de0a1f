// Portable forward attention (FlashAttention-2 style) on mma.sync tensor
// cores: runs on every architecture from sm_80 on.
//
// One CTA computes BM query rows of one (batch, head): 4 warps of one or two
// 16-row MMA tiles each. With two, every K and V fragment read from shared
// memory feeds two MMAs, which halves the shared-memory reads per FLOP.
// K and V tiles stream through shared memory with cp.async, one buffer each:
// K_{j+1} loads during softmax and P·V_j, V_j during S = Q·K_jᵀ (two barriers
// per key tile) or V_{j+1} from the end of P·V_j (four; portable_two_barriers
// picks per block, kernel notes p12). Softmax is online, in
// base 2 with the scale folded into one FFMA; accumulation is fp32. P stays
// in registers and becomes the A operand of P·V.
//
// Split-KV (the `_split` entry points, for grids that would leave most SMs
// idle): blockIdx.y takes its share of the block's key tiles and writes
// normalized fp32 O and the LSE to the partials, which the combine kernel
// merges (sinks included) into O.
#include <math_constants.h>

#include "kernels/mask_bounds.h"
#include "kernels/numeric.cuh"
#include "kernels/params.h"
#include "kernels/ptx/math.cuh"
#include "kernels/ptx/mma_sync.cuh"
#include "kernels/sequence.cuh"
#include "kernels/tile_traits.h"

namespace fmha::portable {

template <bool kBf16, int D, bool kPaged, bool kShort>
struct Config {
    static constexpr TileShape kTile = portable_tile(D, kShort, kPaged);
    static constexpr int BM = kTile.block_m;
    static constexpr int BN = kTile.block_n;
    static constexpr int kThreads = kTile.threads;
    static constexpr bool kTwoBarriers = portable_two_barriers(D, kShort);
    static constexpr int kRow = portable_smem_row(D);  // elements per shared-memory row
    static constexpr int kChunks = D / 8;              // 16-byte chunks per row
    static constexpr int kCopies = BN * kChunks / kThreads;  // 16-byte copies per thread and K/V tile
    static_assert(BN * kChunks % kThreads == 0, "whole copies per thread");
    static constexpr int kKSteps = D / 16;             // k-steps of S = Q·Kᵀ
    static constexpr int kSTiles = BN / 8;             // 8-wide column tiles of S
    static constexpr int kOTiles = D / 8;              // 8-wide column tiles of O
    static constexpr int kWarpRows = BM / (kThreads / 32);  // query rows per warp
    static constexpr int kMTiles = kWarpRows / 16;          // 16-row MMA tiles per warp
    static_assert(kWarpRows % 16 == 0 && (kMTiles == 1 || kMTiles == 2),
                  "one or two 16-row tiles per warp");
    static_assert(kSTiles % 2 == 0 && kOTiles % 2 == 0, "ldmatrix.x4 loads two tiles");
};

// Copies the BM query rows from row m0 of `q` (rows `stride` elements apart)
// into shared memory; rows at or past `limit` are zero-filled (never read).
template <typename Cfg, typename T>
__device__ __forceinline__ void load_q_tile(T *smem, const T *q, int64_t stride, int m0, int limit) {
    for (int idx = threadIdx.x; idx < Cfg::BM * Cfg::kChunks; idx += Cfg::kThreads) {
        const int r = idx / Cfg::kChunks;
        const int c = idx % Cfg::kChunks;
        const bool valid = m0 + r < limit;
        const T *from = valid ? q + int64_t(m0 + r) * stride + c * 8 : q;
        ptx::cp_async_16(ptx::smem_addr(smem + r * Cfg::kRow + c * 8), from, valid);
    }
}

// Paged K/V: the block-table entries of the rows this thread copies in a
// BN-row tile, looked up a tile ahead and kept raw (clamped only at copy
// time), so nothing waits on the lookup until the copies and its latency
// hides under a tile of MMA (the decode kernel's lesson, kernel notes p2, p3).
// K and V share the block table: one lookup serves both.
template <typename Cfg, typename T>
__device__ __forceinline__ void look_up_tile(int (&entries)[Cfg::kCopies], const KvRows<T> &src,
                                             int row0, int limit) {
#pragma unroll
    for (int i = 0; i < Cfg::kCopies; ++i) {
        const int r = (threadIdx.x + i * Cfg::kThreads) / Cfg::kChunks;
        entries[i] = __ldg(src.table + src.block_of(min(row0 + r, limit - 1)));
    }
}

// One BN-row K or V tile, from a contiguous or (kPaged) a paged cache whose
// entries look_up_tile fetched. Rows at or past `limit` copy nothing.
template <bool kPaged, typename Cfg, typename T>
__device__ __forceinline__ void load_tile(T *smem, const KvRows<T> &src,
                                          const int (&entries)[Cfg::kCopies], int row0, int limit) {
    constexpr int kRowStep = Cfg::kThreads / Cfg::kChunks;
    if constexpr (!kPaged && Cfg::kThreads % Cfg::kChunks == 0) {
        // A thread keeps its chunk column: copy i is row r0 + i * kRowStep,
        // addressed from one running pointer (p10; a 64-bit product per copy
        // before, its results held in registers across the key loop). No
        // block-table code: a null-table test here left a branch around every
        // copy (p6).
        const int r0 = threadIdx.x / Cfg::kChunks;
        const int c = threadIdx.x % Cfg::kChunks;
        const uint32_t dst = ptx::smem_addr(smem + r0 * Cfg::kRow + c * 8);
        const int rows_left = limit - row0 - r0;  // copy i is valid if i * kRowStep < rows_left
        const T *from = src.base + int64_t(row0 + r0) * src.seq_stride + c * 8;
        const int64_t step = int64_t(kRowStep) * src.seq_stride;
#pragma unroll
        for (int i = 0; i < Cfg::kCopies; ++i) {
            const bool valid = i * kRowStep < rows_left;
            ptx::cp_async_16(dst + i * kRowStep * Cfg::kRow * int(sizeof(T)), valid ? from : src.base,
                             valid);
            from += step;
        }
    } else {
#pragma unroll
        for (int i = 0; i < Cfg::kCopies; ++i) {
            const int idx = threadIdx.x + i * Cfg::kThreads;
            const int r = idx / Cfg::kChunks;
            const int c = idx % Cfg::kChunks;
            const bool valid = row0 + r < limit;
            const T *from;
            if constexpr (kPaged)
                // Past the end, from row limit - 1 (its entry is the one looked
                // up): a legal address without a branch.
                from = src.at(src.slot_of(entries[i], min(row0 + r, limit - 1))) + c * 8;
            else
                from = valid ? src.base + int64_t(row0 + r) * src.seq_stride + c * 8 : src.base;
            ptx::cp_async_16(ptx::smem_addr(smem + r * Cfg::kRow + c * 8), from, valid);
        }
    }
}

// A row's sum over the 4 lanes of a quad that share it.
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Where a split CTA's partials go (kSplit only).
struct SplitTarget {
    float *o;
    float *lse;
    int64_t q_rows;
    int num_splits;
};

// kPaged: K/V in pages (the `_paged` entry points; launch_portable.cpp picks
// them exactly for paged problems, whose block table fmha_run has checked is
// not NULL). The contiguous entry points keep their code. kShort: the 64-row
// query block (the `_short` entry points, for short queries). kSplit: split
// blockIdx.y of `split.num_splits` (the `_split` entry points).
template <bool kBf16, int D, bool kPaged, bool kShort, bool kSplit>
__device__ __forceinline__ void forward(const FwdParams &p, const SplitTarget &split) {
    using Cfg = Config<kBf16, D, kPaged, kShort>;
    using T = typename Elem<kBf16>::T;
    constexpr int BM = Cfg::BM, BN = Cfg::BN, kRow = Cfg::kRow;

    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *sQ = reinterpret_cast<T *>(smem_raw);
    T *sK = sQ + BM * kRow;
    T *sV = sK + BN * kRow;

    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int g = lane / 4;  // fragment row within an 8-row group
    const int t = lane % 4;  // fragment column pair

    // Heaviest (last) query blocks first: under a causal mask they see most keys.
    int bid = blockIdx.x;
    const int m_block = p.num_m_blocks - 1 - bid % p.num_m_blocks;
    bid /= p.num_m_blocks;
    const int head = bid % p.num_q_heads;
    const int batch = bid / p.num_q_heads;
    const int kv_head = head / p.q_heads_per_kv;
    const int m0 = m_block * BM;

    const Sequence seq = sequence_of(p, batch);
    if (m0 >= seq.len_q) return;  // a shorter sequence of a varlen batch
    const T *q = static_cast<const T *>(p.q) + batch * p.q_stride.batch +
                 seq.q_row0 * p.q_stride.seq + head * p.q_stride.head;
    const KvRows<T> k = kv_rows<T>(p, p.k, p.k_stride, seq, batch, kv_head);
    const KvRows<T> v = kv_rows<T>(p, p.v, p.v_stride, seq, batch, kv_head);
    T *o = static_cast<T *>(p.o) + batch * p.o_stride.batch + seq.q_row0 * p.o_stride.seq +
           head * p.o_stride.head;

    // Keys [n_begin, n_end) can be visible to some row of this block.
    int n_begin, n_end;
    visible_key_range(seq, m0, min(m0 + BM, seq.len_q) - 1, &n_begin, &n_end);
    int first_tile = n_end > n_begin ? n_begin / BN : 0;
    int end_tile = n_end > n_begin ? (n_end + BN - 1) / BN : 0;
    if constexpr (kSplit) {
        const KeyTiles share = key_tiles_of_split(end_tile - first_tile, blockIdx.y, split.num_splits);
        end_tile = first_tile + share.end;
        first_tile += share.begin;
    }

    // Block-table entries of the next K/V tile's rows (paged caches only).
    int entries[Cfg::kCopies];
    load_q_tile<Cfg>(sQ, q, p.q_stride.seq, m0, seq.len_q);
    if (end_tile > first_tile) {
        if constexpr (kPaged) look_up_tile<Cfg>(entries, k, first_tile * BN, seq.len_k);
        load_tile<kPaged, Cfg>(sK, k, entries, first_tile * BN, seq.len_k);
    }
    ptx::cp_async_commit();
    if constexpr (!Cfg::kTwoBarriers) {
        if (end_tile > first_tile) load_tile<kPaged, Cfg>(sV, v, entries, first_tile * BN, seq.len_k);
        ptx::cp_async_commit();
    }

    constexpr int MT = Cfg::kMTiles;
    float acc[MT][Cfg::kOTiles][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < Cfg::kOTiles; ++i)
            acc[mt][i][0] = acc[mt][i][1] = acc[mt][i][2] = acc[mt][i][3] = 0.f;
    // Per thread: rows g and g + 8 of each of the warp's 16-row tiles.
    float row_max[MT][2], row_sum[MT][2];  // raw (unscaled) score maximum; partial sums
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) row_max[mt][r] = -CUDART_INF_F, row_sum[mt][r] = 0.f;
    const int warp_row = warp * Cfg::kWarpRows;
    // ldmatrix addresses: this lane's row and column of Q, K and V in shared
    // memory (bytes); the loops add compile-time offsets to them.
    constexpr int kRowBytes = kRow * int(sizeof(T));
    constexpr int kElem = int(sizeof(T));
    const uint32_t q_frag =
        ptx::smem_addr(sQ) + ((warp_row + lane % 8 + (lane / 8) % 2 * 8) * kRow + lane / 16 * 8) * kElem;
    const uint32_t k_frag =
        ptx::smem_addr(sK) + ((lane % 8 + lane / 16 * 8) * kRow + (lane / 8) % 2 * 8) * kElem;
    const uint32_t v_frag =
        ptx::smem_addr(sV) + ((lane % 8 + (lane / 8) % 2 * 8) * kRow + lane / 16 * 8) * kElem;

    for (int j = first_tile; j < end_tile; ++j) {
        const int n0 = j * BN;
        // Q and K_j have landed (four barriers: V_j may still be in flight;
        // two: every warp is done with V_{j-1}, so V_j loads over it).
        ptx::cp_async_wait<Cfg::kTwoBarriers ? 0 : 1>();
        __syncthreads();
        if constexpr (Cfg::kTwoBarriers) {
            load_tile<kPaged, Cfg>(sV, v, entries, n0, seq.len_k);
            ptx::cp_async_commit();
        }
        // V_j's copies are issued: the entries now serve tile j + 1.
        if (kPaged && j + 1 < end_tile) look_up_tile<Cfg>(entries, k, n0 + BN, seq.len_k);

        float s[MT][Cfg::kSTiles][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int i = 0; i < Cfg::kSTiles; ++i)
                s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < Cfg::kKSteps; ++kk) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
                ptx::ldmatrix_x4(a[mt], q_frag + mt * 16 * kRowBytes + kk * 32);
#pragma unroll
            for (int np = 0; np < Cfg::kSTiles / 2; ++np) {
                uint32_t b[4];
                ptx::ldmatrix_x4(b, k_frag + np * 16 * kRowBytes + kk * 32);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    ptx::mma_16816<kBf16>(s[mt][2 * np], a[mt], b[0], b[1]);
                    ptx::mma_16816<kBf16>(s[mt][2 * np + 1], a[mt], b[2], b[3]);
                }
            }
        }
        // Every warp is done with K_j: K_{j+1} loads over it (two barriers:
        // and V_j has landed).
        if constexpr (Cfg::kTwoBarriers) ptx::cp_async_wait<0>();
        __syncthreads();
        if (j + 1 < end_tile) load_tile<kPaged, Cfg>(sK, k, entries, n0 + BN, seq.len_k);
        ptx::cp_async_commit();

        if (p.softcap > 0.f) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < Cfg::kSTiles; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        s[mt][nt][e] = p.softcap * ptx::tanh_approx(s[mt][nt][e] * p.softcap_scale);
        }
        // Mask only tiles that cross the key end, the diagonal or a window edge.
        const bool crosses_end = n0 + BN > seq.len_k;
        const bool crosses_hi = seq.has_hi && int64_t(n0 + BN - 1) > m0 + seq.hi;
        const bool crosses_lo = seq.has_lo && int64_t(n0) < int64_t(m0 + BM - 1) + seq.lo;
        if (crosses_end || crosses_hi || crosses_lo) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                // The visible columns of the thread's two rows, once per row; a
                // compare pair per score (kernels/mask_bounds.h).
                ColumnRange cols[2];
#pragma unroll
                for (int r = 0; r < 2; ++r)
                    cols[r] = visible_columns(m0 + warp_row + mt * 16 + g + 8 * r, n0 + 2 * t,
                                              seq.len_k, seq.has_hi, seq.hi, seq.has_lo, seq.lo, BN);
#pragma unroll
                for (int nt = 0; nt < Cfg::kSTiles; ++nt) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int c = nt * 8 + (e & 1);
                        const ColumnRange &r = cols[e >= 2];
                        if (c < r.lo || c > r.hi) s[mt][nt][e] = -CUDART_INF_F;
                    }
                }
            }
        }

        // Online softmax, two rows per thread and tile (g and g + 8), a row
        // shared by 4 lanes.
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float mx = row_max[mt][r];
#pragma unroll
                for (int nt = 0; nt < Cfg::kSTiles; ++nt)
                    mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                // A row with no visible key yet keeps max -inf: subtract 0 instead.
                const float m_scaled = mx == -CUDART_INF_F ? 0.f : mx * p.scale_log2;
                const float alpha = ptx::exp2_approx(row_max[mt][r] * p.scale_log2 - m_scaled);
                row_max[mt][r] = mx;
                row_sum[mt][r] *= alpha;
#pragma unroll
                for (int nt = 0; nt < Cfg::kOTiles; ++nt) {
                    acc[mt][nt][2 * r] *= alpha;
                    acc[mt][nt][2 * r + 1] *= alpha;
                }
#pragma unroll
                for (int nt = 0; nt < Cfg::kSTiles; ++nt) {
#pragma unroll
                    for (int e = 2 * r; e < 2 * r + 2; ++e) {
                        s[mt][nt][e] = ptx::exp2_approx(fmaf(s[mt][nt][e], p.scale_log2, -m_scaled));
                        row_sum[mt][r] += s[mt][nt][e];
                    }
                }
            }
        }

        if constexpr (!Cfg::kTwoBarriers) {
            ptx::cp_async_wait<1>();  // V_j has landed (K_{j+1} may still be in flight)
            __syncthreads();
        }
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
            // The S accumulator layout of two 8-column tiles is the A layout of one k-step.
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                a[mt][0] = Elem<kBf16>::pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                a[mt][1] = Elem<kBf16>::pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                a[mt][2] = Elem<kBf16>::pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                a[mt][3] = Elem<kBf16>::pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
#pragma unroll
            for (int np = 0; np < Cfg::kOTiles / 2; ++np) {
                uint32_t b[4];
                ptx::ldmatrix_x4_trans(b, v_frag + kk * 16 * kRowBytes + np * 32);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    ptx::mma_16816<kBf16>(acc[mt][2 * np], a[mt], b[0], b[1]);
                    ptx::mma_16816<kBf16>(acc[mt][2 * np + 1], a[mt], b[2], b[3]);
                }
            }
        }
        if constexpr (!Cfg::kTwoBarriers) {
            __syncthreads();  // every warp is done with V_j
            if (j + 1 < end_tile) load_tile<kPaged, Cfg>(sV, v, entries, n0 + BN, seq.len_k);
            ptx::cp_async_commit();
        }
    }

    if constexpr (kSplit) {
        // Partials: normalized fp32 O straight from the accumulators, and the
        // LSE without the sink (the combine adds it once). A row that saw no
        // key of this split: O = 0, LSE = -inf.
        ptx::cp_async_wait<0>();  // no copy outlives the CTA
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const float sum = quad_sum(row_sum[mt][r]);
                const int row = m0 + warp_row + mt * 16 + g + 8 * r;
                if (row >= seq.len_q) continue;
                const float inv = sum > 0.f ? 1.f / sum : 0.f;
                const int64_t q_row = p.cu_seqlens_q != nullptr ? int64_t(seq.q_row0) + row
                                                                : int64_t(batch) * p.seqlen_q + row;
                const int64_t part_row =
                    (int64_t(blockIdx.y) * split.q_rows + q_row) * p.num_q_heads + head;
                float *dst = split.o + part_row * D + 2 * t;
#pragma unroll
                for (int nt = 0; nt < Cfg::kOTiles; ++nt)
                    *reinterpret_cast<float2 *>(dst + nt * 8) =
                        make_float2(acc[mt][nt][2 * r] * inv, acc[mt][nt][2 * r + 1] * inv);
                if (t == 0)
                    split.lse[(int64_t(blockIdx.y) * p.num_q_heads + head) * split.q_rows + q_row] =
                        sum > 0.f ? (row_max[mt][r] * p.scale_log2 + __log2f(sum)) * 0.6931471805599453f
                                  : -CUDART_INF_F;
            }
        }
        return;
    }

    // Epilogue: normalize, stage this warp's rows in its own Q rows, then
    // write them with 16-byte stores. A row that saw no key has sum 0: O = 0.
    ptx::cp_async_wait<0>();
    __syncthreads();
    float lse[MT][2];
    // A sink is one more logit in the denominator, with no value row.
    const float sink_log2 =
        p.sinks != nullptr ? p.sinks[head] * 1.4426950408889634f : -CUDART_INF_F;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float sum = quad_sum(row_sum[mt][r]);
            // Everything relative to m = max(row max, sink), in base 2.
            const float row_m = sum > 0.f ? row_max[mt][r] * p.scale_log2 : -CUDART_INF_F;
            const float m = fmaxf(row_m, sink_log2);
            const float keep = m == -CUDART_INF_F ? 0.f : ptx::exp2_approx(row_m - m);
            const float total =
                sum * keep + (m == -CUDART_INF_F ? 0.f : ptx::exp2_approx(sink_log2 - m));
            const float inv = total > 0.f ? keep / total : 0.f;
            lse[mt][r] = total > 0.f ? (m + __log2f(total)) * 0.6931471805599453f : -CUDART_INF_F;
            const int row_local = warp_row + mt * 16 + g + 8 * r;
#pragma unroll
            for (int nt = 0; nt < Cfg::kOTiles; ++nt) {
                *reinterpret_cast<uint32_t *>(sQ + row_local * kRow + nt * 8 + 2 * t) =
                    Elem<kBf16>::pack(acc[mt][nt][2 * r] * inv, acc[mt][nt][2 * r + 1] * inv);
            }
        }
    }
    __syncwarp();
    for (int idx = lane; idx < Cfg::kWarpRows * Cfg::kChunks; idx += 32) {
        const int r = idx / Cfg::kChunks;
        const int c = idx % Cfg::kChunks;
        const int row = m0 + warp_row + r;
        if (row < seq.len_q)
            *reinterpret_cast<uint4 *>(o + int64_t(row) * p.o_stride.seq + c * 8) =
                *reinterpret_cast<const uint4 *>(sQ + (warp_row + r) * kRow + c * 8);
    }
    if (p.lse != nullptr && t == 0) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const int row = m0 + warp_row + mt * 16 + g + 8 * r;
                if (row < seq.len_q)
                    p.lse[batch * p.lse_batch_stride + head * p.lse_head_stride + seq.q_row0 + row] =
                        lse[mt][r];
            }
        }
    }
}

}  // namespace fmha::portable

// Entry points: one per (dtype, head_dim, cache kind, query block, split).
// The host names them in launch_portable.cpp.
#define FMHA_PORTABLE_ENTRY(name, bf16, d, paged, short_queries)                     \
    extern "C" __global__ void __launch_bounds__(                                    \
        fmha::portable_tile(d, short_queries, paged).threads,                        \
        fmha::portable_min_ctas(d, short_queries, paged))                            \
        name(const fmha::FwdParams p) {                                              \
        fmha::portable::forward<bf16, d, paged, short_queries, false>(               \
            p, fmha::portable::SplitTarget{});                                       \
    }                                                                                \
    extern "C" __global__ void __launch_bounds__(                                    \
        fmha::portable_tile(d, short_queries, paged).threads,                        \
        fmha::portable_min_ctas(d, short_queries, paged))                            \
        name##_split(const fmha::PortableSplitParams sp) {                           \
        fmha::portable::forward<bf16, d, paged, short_queries, true>(                \
            sp.fwd, fmha::portable::SplitTarget{sp.partial_o, sp.partial_lse,        \
                                                sp.q_rows, sp.num_splits});          \
    }

#define FMHA_PORTABLE_ENTRIES(d, short_queries, suffix)                              \
    FMHA_PORTABLE_ENTRY(fmha_fwd_portable##suffix##_bf16_hd##d, true, d, false,      \
                        short_queries)                                               \
    FMHA_PORTABLE_ENTRY(fmha_fwd_portable##suffix##_fp16_hd##d, false, d, false,     \
                        short_queries)                                               \
    FMHA_PORTABLE_ENTRY(fmha_fwd_portable_paged##suffix##_bf16_hd##d, true, d, true, \
                        short_queries)                                               \
    FMHA_PORTABLE_ENTRY(fmha_fwd_portable_paged##suffix##_fp16_hd##d, false, d, true,\
                        short_queries)

FMHA_PORTABLE_ENTRIES(64, false, )
FMHA_PORTABLE_ENTRIES(96, false, )
FMHA_PORTABLE_ENTRIES(128, false, )
FMHA_PORTABLE_ENTRIES(256, false, )
// hd256 has one query block: its entry points serve short queries too.
FMHA_PORTABLE_ENTRIES(64, true, _short)
FMHA_PORTABLE_ENTRIES(96, true, _short)
FMHA_PORTABLE_ENTRIES(128, true, _short)
