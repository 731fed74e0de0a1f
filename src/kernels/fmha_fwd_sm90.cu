// Hopper (sm_90a) forward attention: TMA loads, wgmma, warp specialization.
//
// Warpgroup 0 is the producer: one thread issues TMA copies of Q once and of
// K and V tiles into a ring of `stages` buffers, each guarded by a "full"
// mbarrier (TMA bytes landed) and an "empty" one (consumers are done). The
// producer gives most of its registers back (setmaxnreg) to the consumer
// warpgroups, each of which owns 64 query rows: S = Q·Kᵀ on wgmma from
// shared memory, online softmax in registers (base 2, scale folded into one
// FFMA), then O += P·V on wgmma with P taken straight from registers. The
// epilogue stages O in the consumer's (now dead) rows of Q with the TMA
// 128-byte swizzle and writes it with a TMA store clipped at the tensor edge.
// For short queries the host may pack the query heads of one KV head into the
// M tile (Sm90Params::group_shift): Q and O boxes then take those heads'
// rows together (padded to a power of two), and K/V are read once per KV head
// instead of once per head. Sliding windows skip the key tiles no row of a
// block sees and mask the edges; a softcap caps each score with tanh before
// the softmax, and a sink logit joins the denominator in the epilogue (all
// three on their own entry points). A paged KV cache is read in TMA boxes of
// whole page chunks, one per lane of the producer warp (block table looked up
// by the lanes).
#include <math_constants.h>

#include "kernels/numeric.cuh"
#include "kernels/params.h"
#include "kernels/ptx/math.cuh"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/tma.cuh"
#include "kernels/sequence.cuh"
#include "kernels/ptx/warpgroup.cuh"
#include "kernels/ptx/wgmma.cuh"
#include "kernels/tile_order.h"
#include "kernels/tile_traits.h"

namespace fmha::sm90 {

template <int kHeadDim, bool kWideKeys, bool kWithScoreMods>
struct Config {
    static constexpr int D = kHeadDim;
    // Sliding windows, softcap and sinks: their own entry points, so the
    // plain kernels keep their code (the extra mask spills hd128's wide tile).
    static constexpr bool kScoreMods = kWithScoreMods;
    static constexpr Sm90Tile kTile = sm90_tile(D, kWideKeys);
    static constexpr int BM = kTile.block_m;
    static constexpr int BN = kTile.block_n;
    static constexpr int kConsumers = kTile.consumers;
    static constexpr int kStages = kTile.stages;
    static constexpr int Dp = kTile.padded_dim;
    static constexpr int kBoxes = Dp / 64;           // 64-column TMA boxes per row
    static constexpr int kQBytes = BM * Dp * 2;
    static constexpr int kKVBytes = BN * Dp * 2;     // one K or V stage
    static constexpr int kSRegs = BN / 2;            // S accumulator per thread
    static constexpr int kOChunkN = Dp >= 128 ? 128 : 64;
    static constexpr int kOChunks = Dp / kOChunkN;   // wgmma issues per k-step of P·V
    static constexpr int kORegs = kOChunkN / 2;
    // Register split after setmaxnreg (64K registers, 128 producer threads).
    static constexpr int kProducerRegs = kConsumers == 3 ? 32 : 24;
    static constexpr int kConsumerRegs = kConsumers == 3 ? 160 : 240;
    // setmaxnreg.inc waits forever if the CTA's registers can't cover the
    // split: they are what the launch granted (per-thread cap, 8-aligned).
    static constexpr int kThreads = 128 * (1 + kConsumers);
    static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kConsumers <=
                      (65536 / kThreads / 8 * 8) * kThreads,
                  "register split exceeds the CTA's allocation");
    // O gets its own buffer where shared memory allows, so the next tile's Q
    // can load while this tile's O is stored.
    static constexpr bool kSeparateO = kTile.separate_o;
    static_assert(BM == 64 * kConsumers, "one consumer warpgroup per 64 rows");
    static_assert(kTile.smem_o_bytes == (kSeparateO ? kQBytes : 0), "traits agree");
    static_assert(BN == 64 || BN == 80 || BN == 128 || BN == 176 || BN == 192,
                  "S = Q·Kᵀ wgmma wrappers exist for these key tile widths");
    static_assert(sm90_threads(D) == kThreads, "launch and kernel agree on the CTA size");
    static_assert(sm90_smem_bytes(kTile) <= 227 * 1024, "fits one CTA's shared memory");
};

// S tile = Q·Kᵀ, one k-step: N keys wide (the key tile), A and B from shared memory.
template <bool kBf16, int N>
__device__ __forceinline__ void s_gemm(float (&d)[N / 2], uint64_t a, uint64_t b, int acc) {
    if constexpr (N == 64) ptx::wgmma_m64n64k16_ss<kBf16, 0>(d, a, b, acc);
    else if constexpr (N == 80) ptx::wgmma_m64n80k16_ss<kBf16, 0>(d, a, b, acc);
    else if constexpr (N == 128) ptx::wgmma_m64n128k16_ss<kBf16, 0>(d, a, b, acc);
    else if constexpr (N == 176) ptx::wgmma_m64n176k16_ss<kBf16, 0>(d, a, b, acc);
    else ptx::wgmma_m64n192k16_ss<kBf16, 0>(d, a, b, acc);
}

#ifndef FMHA_SM90_PING_PONG
#define FMHA_SM90_PING_PONG 1  // build-time switch, kept to measure its worth
#endif
constexpr bool kPingPong = FMHA_SM90_PING_PONG != 0;

// Named barriers: 1 + consumer (one warpgroup's 128 threads), 6 (every
// consumer, V tail zeroing), 8 + consumer (ping-pong turns).
constexpr int kZeroTailBarrier = 6;

// O chunk += P (registers) · V chunk (MN-major in shared memory).
template <bool kBf16, int N>
__device__ __forceinline__ void pv_gemm(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b) {
    if constexpr (N == 64) ptx::wgmma_m64n64k16_rs<kBf16, 1>(d, a, b, 1);
    else ptx::wgmma_m64n128k16_rs<kBf16, 1>(d, a, b, 1);
}

// Issues S = Q·Kᵀ for one K tile (one commit group). Both operands are
// K-major: 8-row groups 1024 bytes apart; a k-step of 16 columns is 32 bytes
// inside the swizzled 128-byte row, and every 4 k-steps move to the next box.
template <bool kBf16, typename Cfg>
__device__ __forceinline__ void issue_s_gemm(float (&sacc)[Cfg::kSRegs], const uint8_t *q_rows,
                                             const uint8_t *k_tile) {
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Cfg::Dp / 16; ++kk) {
        const int box = kk / 4, koff = (kk % 4) * 32;
        const uint64_t a = ptx::smem_desc_sw128(q_rows + box * Cfg::BM * 128 + koff, 16, 1024);
        const uint64_t b = ptx::smem_desc_sw128(k_tile + box * Cfg::BN * 128 + koff, 16, 1024);
        s_gemm<kBf16, Cfg::BN>(sacc, a, b, kk > 0);
    }
    ptx::wgmma_commit();
}

// Issues O += P·V for one V tile (one commit group). V is MN-major (head dim
// contiguous): 64-column boxes are BN*128 bytes apart (lbo), 8-key groups
// 1024 bytes apart (sbo); a k-step of 16 keys is 2048 bytes.
template <bool kBf16, typename Cfg>
__device__ __forceinline__ void issue_pv_gemm(float (&o)[Cfg::kOChunks][Cfg::kORegs],
                                              const uint32_t (&pa)[Cfg::BN / 16][4],
                                              const uint8_t *v_tile) {
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Cfg::BN / 16; ++kk) {
#pragma unroll
        for (int c = 0; c < Cfg::kOChunks; ++c) {
            const uint8_t *tile = v_tile + (c * Cfg::kOChunkN / 64) * Cfg::BN * 128 + kk * 2048;
            pv_gemm<kBf16, Cfg::kOChunkN>(o[c], pa[kk],
                                          ptx::smem_desc_sw128(tile, Cfg::BN * 128, 1024));
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
        if (crosses_end || crosses_hi || crosses_lo) {
#pragma unroll
            for (int i = 0; i < Cfg::kSRegs; ++i) {
                const int col = n0 + (i / 4) * 8 + 2 * t + (i % 2);
                const int64_t row = (row_base + 8 * ((i % 4) / 2)) >> shift;
                const bool visible = col < seq.len_k && (!seq.has_hi || col <= row + seq.hi) &&
                                     (!Cfg::kScoreMods || !seq.has_lo || col >= row + seq.lo);
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

// Schedule (order in kernels/tile_order.h): a CTA takes tiles blockIdx.x,
// + stride, ...: stride = gridDim.x in persistent mode (one CTA per SM; the
// next tile's loads overlap this tile's epilogue), else the grid covers every
// tile once.
using Tile = TileCoord;

__device__ __forceinline__ Tile decode_tile(const Sm90Params &params, int idx) {
    const FwdParams &p = params.fwd;
    return sm90_tile_coord(idx % params.tiles_per_split, p.num_m_blocks, params.tile_heads,
                           p.batch, params.head_group);
}

// Packed tiles: query head of tile row `row`, or -1 for a row that pads the
// group to a power of two (zero Q; computed, never stored).
__device__ __forceinline__ int head_of_row(const Sm90Params &params, const Tile &tile, int row) {
    if (params.group_shift == 0) return tile.head;
    const int group = params.fwd.q_heads_per_kv;
    const int g = row & ((1 << params.group_shift) - 1);
    return g < group ? tile.head * group + g : -1;
}

// The KV head a tile reads: tiles walk KV heads when query heads are packed.
__device__ __forceinline__ int kv_head_of(const Sm90Params &params, const Tile &tile) {
    return params.group_shift > 0 ? tile.head : tile.head / params.fwd.q_heads_per_kv;
}

__device__ __forceinline__ int split_of(const Sm90Params &params, int idx) {
    return idx / params.tiles_per_split;
}

// Split `split`'s share of a query block's key tiles.
__device__ __forceinline__ KeyTiles split_key_tiles(const Sm90Params &params, KeyTiles tiles,
                                                    int split) {
    const KeyTiles share = sm90_split_key_tiles(tiles.count(), split, params.num_splits);
    return KeyTiles{tiles.begin + share.begin, tiles.begin + share.end};
}

// Tile rows of a sequence: its query positions times the packed heads.
__device__ __forceinline__ int tile_rows(const Sequence &seq, int shift) {
    return seq.len_q << shift;
}

// The key tiles a query block must visit: from the tile of its first
// visible key (a left window skips the earlier ones) to that of its last
// (none when it sees no key).
template <typename Cfg>
__device__ __forceinline__ KeyTiles key_tiles(const Sequence &seq, int m0, int shift) {
    int n_begin, n_end;
    visible_key_range(seq, m0 >> shift, (min(m0 + Cfg::BM, tile_rows(seq, shift)) - 1) >> shift,
                      &n_begin, &n_end);
    const int end = (n_end + Cfg::BN - 1) / Cfg::BN;
    if constexpr (!Cfg::kScoreMods) return KeyTiles{0, end};  // no left window
    return KeyTiles{min(n_begin / Cfg::BN, end), end};
}

// TMA coordinates of a sequence's rows: packed tensors are one batch of
// total rows, and a sequence starts at its cu_seqlens offset.
__device__ __forceinline__ int q_batch_coord(const FwdParams &p, int batch) {
    return p.cu_seqlens_q != nullptr ? 0 : batch;
}
__device__ __forceinline__ int k_batch_coord(const FwdParams &p, int batch) {
    return p.cu_seqlens_k != nullptr ? 0 : batch;
}

template <typename Cfg>
struct Smem {
    uint8_t *q, *k, *v, *o;  // o aliases q when there is no room for both
    uint64_t *full_q, *empty_q, *full_k, *full_v, *empty_k, *empty_v;

    __device__ __forceinline__ explicit Smem(uint8_t *raw) {
        // The 128-byte swizzle repeats every 1024 bytes: align every tile to it.
        uint8_t *base = reinterpret_cast<uint8_t *>(
            (reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
        q = base;
        k = q + Cfg::kQBytes;
        v = k + Cfg::kStages * Cfg::kKVBytes;
        uint8_t *end = v + Cfg::kStages * Cfg::kKVBytes;
        o = Cfg::kSeparateO ? end : q;
        auto *bars = reinterpret_cast<uint64_t *>(end + (Cfg::kSeparateO ? Cfg::kQBytes : 0));
        full_q = bars;
        empty_q = bars + 1;
        full_k = bars + 2;
        full_v = full_k + Cfg::kStages;
        empty_k = full_v + Cfg::kStages;
        empty_v = empty_k + Cfg::kStages;
    }
};

// Paged caches: where lane `lane` of the producer warp reads its chunk of key
// tile j. The chunk's rows divide both the page and the key tile, so a chunk
// never straddles pages. Chunks past the sequence's last page re-read that
// page: their keys are masked and their V rows zeroed (zero_v_tail). A table
// entry outside the pool reads as zeros (TMA bounds), never faults.
struct PagedChunk {
    int row;   // in its page
    int page;  // block-table entry
};

template <typename Cfg>
__device__ __forceinline__ PagedChunk paged_chunk(const Sm90Params &params, const Sequence &seq,
                                                  int batch, int j, int lane) {
    const FwdParams &p = params.fwd;
    const int key = j * Cfg::BN + lane * params.paged_chunk_rows;
    const int block = fast_divide(key, p.page_div);
    const int last_block = fast_divide(max(seq.len_k - 1, 0), p.page_div);
    const int32_t *table = p.block_table + int64_t(batch) * p.max_pages_per_seq;
    return {key - block * p.page_size, __ldg(table + min(block, last_block))};
}

// Loads one K or V stage: `leader` arms the stage's barrier with the tile's
// bytes, then a contiguous tile is one box per 64 columns (leader), a paged
// one one box per 64 columns of each lane's chunk.
template <typename Cfg, bool kPaged>
__device__ __forceinline__ void load_kv_stage(const Sm90Params &params, const TmaDescriptor *map,
                                              uint8_t *stage, uint64_t *full, bool leader,
                                              int k_row, int kv_head, int kb,
                                              const PagedChunk &chunk, bool loads_chunk,
                                              int lane) {
    if (leader) ptx::mbarrier_arrive_expect_tx(full, Cfg::kKVBytes);
    if constexpr (kPaged) {
        __syncwarp();
        if (loads_chunk)
            for (int b = 0; b < Cfg::kBoxes; ++b)
                ptx::tma_load_4d(stage + b * Cfg::BN * 128 + lane * params.paged_chunk_rows * 128,
                                 map, full, b * 64, chunk.row, kv_head, chunk.page);
    } else {
        for (int b = 0; b < Cfg::kBoxes; ++b)
            ptx::tma_load_4d(stage + b * Cfg::BN * 128, map, full, b * 64, k_row, kv_head, kb);
    }
}

// Issues every TMA load of the CTA's tiles: one thread for contiguous K/V
// (lane 0), the whole warp for a paged cache (every lane walks the same
// loop and barriers; lane 0 loads Q and arms the barriers).
template <typename Cfg, bool kPaged>
__device__ __forceinline__ void produce(const Sm90Params &params, const Smem<Cfg> &sm, int lane) {
    constexpr int BM = Cfg::BM, BN = Cfg::BN, kStages = Cfg::kStages;
    const bool leader = lane == 0;
    if (leader) {
        ptx::prefetch_tensor_map(&params.q);
        ptx::prefetch_tensor_map(&params.k);
        ptx::prefetch_tensor_map(&params.v);
    }
    const int shift = params.group_shift;
    int q_iter = 0, kv_iter = 0;
    const int stride = params.persistent ? gridDim.x : params.total_tiles;
    for (int idx = blockIdx.x; idx < params.total_tiles; idx += stride) {
        const Tile tile = decode_tile(params, idx);
        const Sequence seq = sequence_of(params.fwd, tile.batch);
        const int m0 = tile.m_block * BM;
        if (m0 >= tile_rows(seq, shift)) continue;  // past a shorter sequence of a varlen batch
        const int kv_head = kv_head_of(params, tile);
        const KeyTiles keys =
            split_key_tiles(params, key_tiles<Cfg>(seq, m0, shift), split_of(params, idx));
        const int q_row = static_cast<int>(seq.q_row0) + (m0 >> shift);
        const int k_row0 = static_cast<int>(seq.k_row0);
        const int qb = q_batch_coord(params.fwd, tile.batch);
        const int kb = k_batch_coord(params.fwd, tile.batch);
        if (q_iter > 0) ptx::mbarrier_wait(sm.empty_q, (q_iter - 1) & 1);
        ++q_iter;
        if (leader) {
            ptx::mbarrier_arrive_expect_tx(sm.full_q, Cfg::kQBytes);
            for (int b = 0; b < Cfg::kBoxes; ++b)
                ptx::tma_load_5d(sm.q + b * BM * 128, &params.q, sm.full_q, b * 64, 0, q_row,
                                 tile.head, qb);
        }
        for (int j = keys.begin; j < keys.end; ++j, ++kv_iter) {
            const int s = kv_iter % kStages;
            const int use = kv_iter / kStages;
            // K and V share the block table: one lookup per lane serves both.
            const bool loads_chunk = kPaged && lane < params.paged_chunks;
            PagedChunk chunk{0, 0};
            if (loads_chunk) chunk = paged_chunk<Cfg>(params, seq, tile.batch, j, lane);
            const int k_row = k_row0 + j * BN;
            if (use > 0) ptx::mbarrier_wait(&sm.empty_k[s], (use - 1) & 1);
            load_kv_stage<Cfg, kPaged>(params, &params.k, sm.k + s * Cfg::kKVBytes, &sm.full_k[s],
                                       leader, k_row, kv_head, kb, chunk, loads_chunk, lane);
            if (use > 0) ptx::mbarrier_wait(&sm.empty_v[s], (use - 1) & 1);
            load_kv_stage<Cfg, kPaged>(params, &params.v, sm.v + s * Cfg::kKVBytes, &sm.full_v[s],
                                       leader, k_row, kv_head, kb, chunk, loads_chunk, lane);
        }
    }
}

// Zeroes key rows [first_row, BN) of a V stage, split over the consumer
// warpgroups, which then meet at a barrier. A sequence's last key tile may
// extend past its keys into rows the caller never wrote (a cache slot past
// seqused_k, padding after the packed keys): their P is 0, but 0 x NaN is NaN.
template <typename Cfg>
__device__ __forceinline__ void zero_v_tail(uint8_t *v_stage, int first_row, int consumer,
                                            int tid) {
    constexpr int BN = Cfg::BN;
    const int rows = BN - first_row;
    const int chunks = rows * 8 * Cfg::kBoxes;  // 16-byte chunks: 8 per 128-byte box row
    for (int i = consumer * 128 + tid; i < chunks; i += 128 * Cfg::kConsumers) {
        const int box = i / (rows * 8), rem = i % (rows * 8);
        *reinterpret_cast<uint4 *>(v_stage + box * BN * 128 + (first_row + rem / 8) * 128 +
                                   (rem % 8) * 16) = make_uint4(0, 0, 0, 0);
    }
    ptx::fence_proxy_async_shared();  // generic writes, then wgmma reads
    ptx::named_barrier_sync(kZeroTailBarrier, 128 * Cfg::kConsumers);
}

// Ping-pong: the consumer warpgroups take turns issuing their GEMMs (named
// barriers 8.., one per warpgroup), so one's softmax runs under another's
// GEMMs. The last warpgroup opens the ring once; warpgroup 0 closes it.
template <typename Cfg>
struct Turns {
    int consumer;
    bool started = false;

    __device__ __forceinline__ void mine() {
        if constexpr (!kPingPong || Cfg::kConsumers < 2) return;
        if (!started) {
            started = true;
            if (consumer == Cfg::kConsumers - 1) ptx::named_barrier_arrive(8, 256);
        }
        ptx::named_barrier_sync(8 + consumer, 256);
    }
    __device__ __forceinline__ void yours() {
        if constexpr (!kPingPong || Cfg::kConsumers < 2) return;
        ptx::named_barrier_arrive(8 + (consumer + 1) % Cfg::kConsumers, 256);
    }
    __device__ __forceinline__ void finish() {
        if constexpr (!kPingPong || Cfg::kConsumers < 2) return;
        if (started && consumer == 0) ptx::named_barrier_sync(8, 256);
    }
};

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

// Split-KV epilogue: this thread's two rows of normalized O (fp32) and their
// LSE go to the split's partials, for the combine kernel.
template <typename Cfg>
__device__ __forceinline__ void store_partials(const Sm90Params &params,
                                               const float (&o)[Cfg::kOChunks][Cfg::kORegs],
                                               const float (&inv)[2], const float (&lse)[2],
                                               const Sequence &seq, const Tile &tile, int split,
                                               int row_base, int t) {
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
        float *dst = params.partial_o + part_row * Cfg::D;
#pragma unroll
        for (int c = 0; c < Cfg::kOChunks; ++c)
#pragma unroll
            for (int i = 2 * half; i < Cfg::kORegs; i += 4) {
                const int col = c * Cfg::kOChunkN + (i / 4) * 8 + 2 * t;
                if (col < Cfg::D)  // hd96: the padded columns are not stored
                    *reinterpret_cast<float2 *>(dst + col) =
                        make_float2(o[c][i] * inv[half], o[c][i + 1] * inv[half]);
            }
        if (t == 0)
            params.partial_lse[(int64_t(split) * p.num_q_heads + head) * params.q_rows + q_row] =
                lse[half];
    }
}

// Epilogue: normalized O staged in the TMA 128-byte swizzled layout (row r's
// 16-byte chunk c sits at chunk c ^ (r % 8)) and stored with TMA (row by row
// for packed Q), then the LSE.
template <bool kBf16, typename Cfg>
__device__ __forceinline__ void store_output(const Sm90Params &params,
                                             const float (&o)[Cfg::kOChunks][Cfg::kORegs],
                                             const float (&inv)[2], const float (&lse)[2],
                                             const Sequence &seq, const Tile &tile,
                                             uint8_t *o_mine, int first_row, int row_base,
                                             int consumer, int tid) {
    constexpr int BM = Cfg::BM;
    const FwdParams &p = params.fwd;
    const int shift = params.group_shift;
    const int warp = tid / 32, g = (tid % 32) / 4, t = tid % 4;
    if constexpr (Cfg::kSeparateO) {
        // The previous tile's store must have read the buffer.
        if (tid == 0) ptx::tma_store_wait_read();
        ptx::named_barrier_sync(1 + consumer, 128);
    }
#pragma unroll
    for (int c = 0; c < Cfg::kOChunks; ++c) {
#pragma unroll
        for (int i = 0; i < Cfg::kORegs; i += 2) {
            const int col = c * Cfg::kOChunkN + (i / 4) * 8 + 2 * t;
            const int half = (i % 4) / 2;
            const int r = warp * 16 + g + 8 * half;
            uint8_t *dst = o_mine + (col / 64) * BM * 128 + r * 128 +
                           ((((col % 64) / 8) ^ (r % 8)) << 4) + 4 * t;
            *reinterpret_cast<uint32_t *>(dst) =
                Elem<kBf16>::pack(o[c][i] * inv[half], o[c][i + 1] * inv[half]);
        }
    }
    if (p.cu_seqlens_q == nullptr) {
        ptx::fence_proxy_async_shared();
        ptx::named_barrier_sync(1 + consumer, 128);
        if (tid == 0) {
            for (int b = 0; b < Cfg::kBoxes; ++b)
                ptx::tma_store_5d(&params.o, o_mine + b * BM * 128, b * 64, 0,
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
        constexpr int kChunks = Cfg::D / 8;
        for (int idx = tid; idx < 64 * kChunks; idx += 128) {
            const int r = idx / kChunks, c = idx % kChunks;
            const int pos = (first_row + r) >> shift;
            const int head = head_of_row(params, tile, first_row + r);
            if (pos >= seq.len_q || head < 0) continue;
            const uint8_t *src = o_mine + (c / 8) * BM * 128 + r * 128 + (((c % 8) ^ (r % 8)) << 4);
            *reinterpret_cast<uint4 *>(o_seq + int64_t(pos) * p.o_stride.seq +
                                       int64_t(head) * p.o_stride.head + c * 8) =
                *reinterpret_cast<const uint4 *>(src);
        }
    }
    if (p.lse != nullptr && t == 0) {
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

template <bool kBf16, typename Cfg>
__device__ __forceinline__ void consume(const Sm90Params &params, const Smem<Cfg> &sm,
                                        int consumer, int tid) {
    constexpr int BM = Cfg::BM, BN = Cfg::BN, kStages = Cfg::kStages;
    const FwdParams &p = params.fwd;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int g = lane / 4;
    const int t = lane % 4;
    const uint8_t *q_mine = sm.q + consumer * 64 * 128;  // this warpgroup's rows in each Q box
    uint8_t *o_mine = sm.o + consumer * 64 * 128;
    Turns<Cfg> turns{consumer};
    const int shift = params.group_shift;

    float o[Cfg::kOChunks][Cfg::kORegs];
    float sacc[Cfg::kSRegs];
    uint32_t pa[BN / 16][4];
    int q_iter = 0, kv_iter = 0;
    const int stride = params.persistent ? gridDim.x : params.total_tiles;
    for (int idx = blockIdx.x; idx < params.total_tiles; idx += stride, ++q_iter) {
        const Tile tile = decode_tile(params, idx);
        const Sequence seq = sequence_of(p, tile.batch);
        const int m0 = tile.m_block * BM;
        if (m0 >= tile_rows(seq, shift)) {  // as the producer: skipped without a barrier phase
            --q_iter;
            continue;
        }
        const int first_row = m0 + consumer * 64;
        const int row_base = first_row + warp * 16 + g;  // this thread's rows: +0, +8
        const int split = split_of(params, idx);
        const KeyTiles keys = split_key_tiles(params, key_tiles<Cfg>(seq, m0, shift), split);
        const int n_tiles = keys.count();
        const int n0 = keys.begin * BN;  // first key of this split
        Softmax<Cfg> softmax;
#pragma unroll
        for (int c = 0; c < Cfg::kOChunks; ++c)
#pragma unroll
            for (int i = 0; i < Cfg::kORegs; ++i) o[c][i] = 0.f;

        // With a separate O buffer, Q is free once the last S GEMM is done.
        auto release_q_early = [&](bool last_s_gemm) {
            if (Cfg::kSeparateO && last_s_gemm) ptx::mbarrier_arrive(sm.empty_q);
        };
        ptx::mbarrier_wait(sm.full_q, q_iter & 1);
        if (n_tiles > 0) {
            const int s0 = kv_iter % kStages;
            ptx::mbarrier_wait(&sm.full_k[s0], (kv_iter / kStages) & 1);
            turns.mine();
            issue_s_gemm<kBf16, Cfg>(sacc, q_mine, sm.k + s0 * Cfg::kKVBytes);
            turns.yours();
            ptx::wgmma_wait<0>();
            ptx::fence_registers(sacc);
            ptx::mbarrier_arrive(&sm.empty_k[s0]);
            release_q_early(n_tiles == 1);
            softmax.template update<true>(sacc, p, seq, n0, row_base, t, first_row, shift);
            pack_p<kBf16, Cfg>(pa, sacc);

            for (int j = 1; j < n_tiles; ++j) {
                const int it = kv_iter + j;
                const int s = it % kStages, s_prev = (it - 1) % kStages;
                // Issue S_j = Q·K_jᵀ and O += P_{j-1}·V_{j-1} back to back; the
                // softmax of S_j then runs while P·V is still on the tensor cores.
                ptx::mbarrier_wait(&sm.full_k[s], (it / kStages) & 1);
                ptx::mbarrier_wait(&sm.full_v[s_prev], ((it - 1) / kStages) & 1);
                turns.mine();
                issue_s_gemm<kBf16, Cfg>(sacc, q_mine, sm.k + s * Cfg::kKVBytes);
                issue_pv_gemm<kBf16, Cfg>(o, pa, sm.v + s_prev * Cfg::kKVBytes);
                turns.yours();
                ptx::wgmma_wait<1>();  // S_j is ready (groups retire in order)
                ptx::fence_registers(sacc);
                ptx::mbarrier_arrive(&sm.empty_k[s]);
                release_q_early(j == n_tiles - 1);
                softmax.template update<false>(sacc, p, seq, n0 + j * BN, row_base, t, first_row,
                                               shift);
                ptx::wgmma_wait<0>();  // P_{j-1}·V_{j-1} is done: O and P may change
#pragma unroll
                for (int c = 0; c < Cfg::kOChunks; ++c) ptx::fence_registers(o[c]);
                ptx::mbarrier_arrive(&sm.empty_v[s_prev]);
                softmax.rescale(o);
                pack_p<kBf16, Cfg>(pa, sacc);
            }

            const int it_last = kv_iter + n_tiles - 1;
            const int s_last = it_last % kStages;
            ptx::mbarrier_wait(&sm.full_v[s_last], (it_last / kStages) & 1);
            // Only lengths from cu_seqlens_k / seqused_k stop inside a tensor;
            // a page's rows past the sequence hold whatever the cache has.
            const int tail_keys = seq.len_k - (n0 + (n_tiles - 1) * BN);
            if (tail_keys < BN && (p.cu_seqlens_k != nullptr || p.seqused_k != nullptr ||
                                   p.block_table != nullptr))
                zero_v_tail<Cfg>(sm.v + s_last * Cfg::kKVBytes, tail_keys, consumer, tid);
            turns.mine();
            issue_pv_gemm<kBf16, Cfg>(o, pa, sm.v + s_last * Cfg::kKVBytes);
            turns.yours();
            ptx::wgmma_wait<0>();
#pragma unroll
            for (int c = 0; c < Cfg::kOChunks; ++c) ptx::fence_registers(o[c]);
            ptx::mbarrier_arrive(&sm.empty_v[s_last]);
        } else {
            release_q_early(true);
        }
        kv_iter += n_tiles;

        // Epilogue: normalize; the output (or this split's partials) and the LSE.
        float lse[2], inv[2], sums[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float sum = softmax.row_sum[r];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            sums[r] = sum;
            inv[r] = sum > 0.f ? 1.f / sum : 0.f;  // a row that saw no key: O = 0
            lse[r] = sum > 0.f ? (softmax.row_max[r] * p.scale_log2 + __log2f(sum)) *
                                     0.6931471805599453f
                               : -CUDART_INF_F;
        }
        // Sinks join the whole answer's denominator; split partials leave them
        // to the combine kernel.
        if (Cfg::kScoreMods && p.sinks != nullptr && params.partial_o == nullptr)
            add_sinks(params, tile, softmax.row_max, sums, row_base, inv, lse);
        if (params.partial_o != nullptr) {
            store_partials<Cfg>(params, o, inv, lse, seq, tile, split, row_base, t);
        } else {
            store_output<kBf16, Cfg>(params, o, inv, lse, seq, tile, o_mine, first_row,
                                     row_base, consumer, tid);
        }
        if constexpr (!Cfg::kSeparateO) {
            // O was staged in Q's rows: Q is free once the store has read them.
            ptx::named_barrier_sync(1 + consumer, 128);
            ptx::mbarrier_arrive(sm.empty_q);
        }
    }
    turns.finish();
    if (tid == 0) ptx::tma_store_wait_read();  // shared memory must outlive the stores
}

template <bool kBf16, int D, bool kWideKeys, bool kScoreMods>
__device__ __forceinline__ void forward(const Sm90Params &params) {
    using Cfg = Config<D, kWideKeys, kScoreMods>;
    extern __shared__ uint8_t smem_raw[];
    const Smem<Cfg> sm(smem_raw);
    if (threadIdx.x == 0) {
        ptx::mbarrier_init(sm.full_q, 1);
        ptx::mbarrier_init(sm.empty_q, Cfg::kConsumers * 128);
        for (int s = 0; s < Cfg::kStages; ++s) {
            ptx::mbarrier_init(&sm.full_k[s], 1);
            ptx::mbarrier_init(&sm.full_v[s], 1);
            ptx::mbarrier_init(&sm.empty_k[s], Cfg::kConsumers * 128);
            ptx::mbarrier_init(&sm.empty_v[s], Cfg::kConsumers * 128);
        }
        ptx::fence_mbarrier_init();
    }
    __syncthreads();

    const int warpgroup = threadIdx.x / 128;
    if (warpgroup == 0) {
        ptx::setmaxnreg_dec<Cfg::kProducerRegs>();
        if (params.paged_chunks > 0) {
            if (threadIdx.x < 32) produce<Cfg, true>(params, sm, threadIdx.x);
        } else if (threadIdx.x == 0) {
            produce<Cfg, false>(params, sm, 0);
        }
    } else {
        ptx::setmaxnreg_inc<Cfg::kConsumerRegs>();
        consume<kBf16, Cfg>(params, sm, warpgroup - 1, threadIdx.x % 128);
    }
}

}  // namespace fmha::sm90

// Entry points per (dtype, head dim, key tile), each plain and with score
// modifiers (`_scoremod`: sliding windows, softcap, sinks); named in
// launch_sm90.cpp.
#define FMHA_SM90_ENTRY(name, bf16, d, wide, mods)                                      \
    extern "C" __global__ void __launch_bounds__(fmha::sm90_threads(d), 1)              \
        name(const __grid_constant__ fmha::Sm90Params params) {                         \
        fmha::sm90::forward<bf16, d, wide, mods>(params);                               \
    }
#define FMHA_SM90_ENTRIES(dt, bf16, d, suffix, wide)                                    \
    FMHA_SM90_ENTRY(fmha_fwd_sm90_##dt##_hd##d##suffix, bf16, d, wide, false)           \
    FMHA_SM90_ENTRY(fmha_fwd_sm90_##dt##_hd##d##suffix##_scoremod, bf16, d, wide, true)

FMHA_SM90_ENTRIES(bf16, true, 64, , false)
FMHA_SM90_ENTRIES(bf16, true, 96, , false)
FMHA_SM90_ENTRIES(bf16, true, 128, , false)
FMHA_SM90_ENTRIES(bf16, true, 128, _wide, true)
FMHA_SM90_ENTRIES(bf16, true, 256, , false)
FMHA_SM90_ENTRIES(fp16, false, 64, , false)
FMHA_SM90_ENTRIES(fp16, false, 96, , false)
FMHA_SM90_ENTRIES(fp16, false, 128, , false)
FMHA_SM90_ENTRIES(fp16, false, 128, _wide, true)
FMHA_SM90_ENTRIES(fp16, false, 256, , false)
