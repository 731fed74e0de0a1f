// Hopper forward kernel: the producer warp's TMA loads of Q and of the K/V ring,
// contiguous or from a paged cache.
#pragma once
#include "kernels/fast_divide.h"
#include "kernels/params.h"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/tma.cuh"
#include "kernels/sequence.cuh"
#include "kernels/sm90/config.cuh"
#include "kernels/sm90/gather.cuh"
#include "kernels/sm90/schedule.cuh"

namespace fmha::sm90 {

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

// How a paged stage's 16-row chunk is one TMA box (`_paged16`).
enum class ChunkBox {
    kNone,  // one box per 64 columns of the chunk
    kK,     // group-major K: dims (64, row in group, column box, group, page), the heads
            // merged into the column boxes or the groups (Sm90Params::k_head_boxes)
    kV,     // chunk-major V: dims (64, row in page, column box, head, page)
};

// Loads one K or V stage: `leader` arms the stage's barrier with the tile's
// bytes, then a contiguous tile is one box per 64 columns (leader), a paged
// one one box per 64 columns of each lane's chunk, or with kChunk one box per
// lane's 16-row chunk, all its columns (config.cuh has both stage layouts).
template <typename Cfg, bool kPaged, ChunkBox kChunk = ChunkBox::kNone>
__device__ __forceinline__ void load_kv_stage(const Sm90Params &params, const TmaDescriptor *map,
                                              uint8_t *stage, uint64_t *full, bool leader,
                                              int k_row, int kv_head, int kb,
                                              const PagedChunk &chunk, bool loads_chunk,
                                              int lane) {
    if (leader) ptx::mbarrier_arrive_expect_tx(full, Cfg::kKVBytes);
    constexpr int kChunkBytes = 16 * Cfg::Dp * 2;
    if constexpr (kChunk == ChunkBox::kK) {
        __syncwarp();
        if (loads_chunk)
            ptx::tma_load_5d(stage + lane * kChunkBytes, map, full, 0, 0,
                             kv_head * params.k_head_boxes,
                             kv_head * params.k_head_groups + chunk.row / 8, chunk.page);
    } else if constexpr (kChunk == ChunkBox::kV) {
        __syncwarp();
        if (loads_chunk)
            ptx::tma_load_5d(stage + lane * kChunkBytes, map, full, 0, chunk.row, 0, kv_head,
                             chunk.page);
    } else if constexpr (kPaged) {
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

// One query block's K/V tiles gathered row by row (`_gather`): every thread
// of the producer warpgroup copies its part of each stage, and the next
// tile's rows are looked up after this tile's V copies (looking them up a
// whole tile ahead measured 5-7% slower on chunked prefill, h34).
template <typename Cfg>
__device__ __forceinline__ void produce_gathered(const Sm90Params &params, const Smem<Cfg> &sm,
                                                 const Sequence &seq, int batch, int kv_head,
                                                 const KeyTiles &keys,
                                                 const int (&consumer_tiles)[Cfg::kConsumers],
                                                 int kv_iter, int tid) {
    const FwdParams &p = params.fwd;
    const auto *k_pool = static_cast<const uint16_t *>(p.k);
    const auto *v_pool = static_cast<const uint16_t *>(p.v);
    if (keys.end <= keys.begin) return;
    GatherRows rows = look_up_rows<Cfg>(p, seq.len_k, batch, keys.begin, tid);
    for (int j = keys.begin; j < keys.end; ++j, ++kv_iter) {
        const int s = kv_iter % Cfg::kStages;
        const int use = kv_iter / Cfg::kStages;
        if (use > 0) ptx::mbarrier_wait(&sm.empty_k[s], (use - 1) & 1);
        int skipped = 0;
        if (Cfg::kConsumerKeyRanges && seq.has_hi)
#pragma unroll
            for (int c = 0; c < Cfg::kConsumers; ++c)
                skipped += j - keys.begin >= consumer_tiles[c];
        gather_stage<Cfg>(p, rows, k_pool, p.k_stride, kv_head, sm.k + s * Cfg::kKVBytes,
                          &sm.full_k[s], tid);
        if (tid == 0 && skipped > 0) ptx::mbarrier_arrive_count(&sm.empty_k[s], 128 * skipped);
        if (use > 0) ptx::mbarrier_wait(&sm.empty_v[s], (use - 1) & 1);
        gather_stage<Cfg>(p, rows, v_pool, p.v_stride, kv_head, sm.v + s * Cfg::kKVBytes,
                          &sm.full_v[s], tid);
        if (tid == 0 && skipped > 0) ptx::mbarrier_arrive_count(&sm.empty_v[s], 128 * skipped);
        if (j + 1 < keys.end) rows = look_up_rows<Cfg>(p, seq.len_k, batch, j + 1, tid);
    }
}

// Issues every load of the CTA's tiles: one thread for contiguous K/V
// (lane 0), the whole warp for a paged cache (every lane walks the same
// loop and barriers; lane 0 loads Q and arms the barriers), the whole
// warpgroup for gathered rows (`lane` is then its thread 0-127).
template <typename Cfg, bool kPaged>
__device__ __forceinline__ void produce(const Sm90Params &params, const Smem<Cfg> &sm, int lane) {
    constexpr int BM = Cfg::BM, BN = Cfg::BN, kStages = Cfg::kStages;
    const bool leader = lane == 0;
    if (leader) {
        ptx::prefetch_tensor_map(&params.q);
        if constexpr (!Cfg::kGatherKV) {  // gathered K/V have no maps
            ptx::prefetch_tensor_map(&params.k);
            ptx::prefetch_tensor_map(&params.v);
        }
    }
    const int shift = params.group_shift;
    int q_iter = 0, kv_iter = 0;
    const int stride = params.persistent ? gridDim.x : params.total_tiles;
    for (int idx = blockIdx.x; idx < params.total_tiles; idx += stride) {
        if (past_walk<Cfg>(params, idx)) break;
        const Tile tile = walk_tile<Cfg>(params, idx);
        const Sequence seq = sequence_of(params.fwd, tile.batch);
        const int m0 = tile.m_block * BM;
        if (m0 >= tile_rows(seq, shift)) continue;  // past a shorter sequence of a varlen batch
        const int kv_head = kv_head_of(params, tile);
        const KeyTiles keys = split_key_tiles(params, key_tiles<Cfg>(seq, m0, shift),
                                              split_of<Cfg::kFastTileDecode>(params, idx));
        const int q_row = static_cast<int>(seq.q_row0) + (m0 >> shift);
        const int k_row0 = static_cast<int>(seq.k_row0);
        const int qb = q_batch_coord(params.fwd, tile.batch);
        const int kb = k_batch_coord(params.fwd, tile.batch);
        // Tiles a consumer skips (consumer_tile_count): released for it here.
        int consumer_tiles[Cfg::kConsumers];
#pragma unroll
        for (int c = 0; c < Cfg::kConsumers; ++c)
            consumer_tiles[c] =
                consumer_tile_count<Cfg>(seq, keys, m0 + c * Cfg::kConsumerRows, shift);
        if (q_iter > 0) ptx::mbarrier_wait(sm.empty_q, (q_iter - 1) & 1);
        ++q_iter;
        if (leader) {
            // Groups wider than a box (hd512, P = 128) start a box inside one.
            const int group_row = Cfg::kMaxGroup > 64 ? m0 & ((1 << shift) - 1) : 0;
            ptx::mbarrier_arrive_expect_tx(sm.full_q, Cfg::kQBytes);
            for (int b = 0; b < Cfg::kBoxes; ++b)
                ptx::tma_load_5d(sm.q + b * BM * 128, &params.q, sm.full_q, b * 64, group_row,
                                 q_row, tile.head, qb);
        }
        if constexpr (Cfg::kGatherKV) {
            produce_gathered<Cfg>(params, sm, seq, tile.batch, kv_head, keys, consumer_tiles,
                                  kv_iter, lane);
            kv_iter += keys.count();
        } else {
            for (int j = keys.begin; j < keys.end; ++j, ++kv_iter) {
                const int s = kv_iter % kStages;
                const int use = kv_iter / kStages;
                // K and V share the block table: one lookup per lane serves both.
                const bool loads_chunk = kPaged && lane < params.paged_chunks;
                PagedChunk chunk{0, 0};
                if (loads_chunk) chunk = paged_chunk<Cfg>(params, seq, tile.batch, j, lane);
                const int k_row = k_row0 + j * BN;
                if (use > 0) ptx::mbarrier_wait(&sm.empty_k[s], (use - 1) & 1);
                // This use's phase of the stage's empty barriers has begun (the
                // last one completed): consumers that skip the tile arrive here.
                int skipped = 0;
                if (Cfg::kConsumerKeyRanges && seq.has_hi)
#pragma unroll
                    for (int c = 0; c < Cfg::kConsumers; ++c)
                        skipped += j - keys.begin >= consumer_tiles[c];
                constexpr bool kChunks16 = kPaged && Cfg::kChunkMajorV;
                load_kv_stage<Cfg, kPaged, kChunks16 ? ChunkBox::kK : ChunkBox::kNone>(
                    params, &params.k, sm.k + s * Cfg::kKVBytes, &sm.full_k[s], leader, k_row,
                    kv_head, kb, chunk, loads_chunk, lane);
                if (leader && skipped > 0)
                    ptx::mbarrier_arrive_count(&sm.empty_k[s], 128 * skipped);
                if (use > 0) ptx::mbarrier_wait(&sm.empty_v[s], (use - 1) & 1);
                load_kv_stage<Cfg, kPaged, kChunks16 ? ChunkBox::kV : ChunkBox::kNone>(
                    params, &params.v, sm.v + s * Cfg::kKVBytes, &sm.full_v[s], leader, k_row,
                    kv_head, kb, chunk, loads_chunk, lane);
                if (leader && skipped > 0)
                    ptx::mbarrier_arrive_count(&sm.empty_v[s], 128 * skipped);
            }
        }
    }
}

}  // namespace fmha::sm90
