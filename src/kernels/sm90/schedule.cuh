// Hopper forward kernel: which tile a CTA works on, the heads and key tiles it
// visits (packed heads, splits, windows) and the TMA coordinates of a sequence.
#pragma once
#include "kernels/params.h"
#include "kernels/sequence.cuh"
#include "kernels/tile_order.h"

namespace fmha::sm90 {

// Schedule (order in kernels/tile_order.h): a CTA takes tiles blockIdx.x,
// + stride, ...: stride = gridDim.x in persistent mode (one CTA per SM; the
// next tile's loads overlap this tile's epilogue), else the grid covers every
// tile once.
using Tile = TileCoord;

// kFast (Config::kFastTileDecode): the divisions by multiply-shift
// reciprocals computed on the host (TileDivisors); else integer divisions.
template <bool kFast>
__device__ __forceinline__ int split_of(const Sm90Params &params, int idx) {
    return kFast ? fast_divide(idx, params.div_tiles_per_split) : idx / params.tiles_per_split;
}

template <bool kFast>
__device__ __forceinline__ Tile decode_tile(const Sm90Params &params, int idx) {
    const FwdParams &p = params.fwd;
    if constexpr (!kFast)
        return sm90_tile_coord(idx % params.tiles_per_split, p.num_m_blocks, params.tile_heads,
                               p.batch, params.head_group);
    const int in_split = idx - split_of<true>(params, idx) * params.tiles_per_split;
    return sm90_tile_coord(in_split, p.num_m_blocks, params.tile_heads, p.batch,
                           params.head_group, params.tile_div);
}

// Packed Q without empty slots (Sm90Params::compact_batch > 0, `_varlen`
// entry points): tile heads x the query blocks of the sequences before b, for
// compact_tile_coord. Static shared memory, so that its address costs the key
// loops no register (a pointer kept live across them spilled).
__shared__ int sm90_tiles_before[kSm90CompactMaxBatch + 1];

// Every thread of the CTA takes part; the caller's barrier publishes it.
template <typename Cfg>
__device__ __forceinline__ void build_compact_walk(const Sm90Params &params) {
    int *before = sm90_tiles_before;
    const int batch = params.compact_batch;
    for (int b = threadIdx.x; b < batch; b += blockDim.x) {  // each sequence's tiles
        const int len_q = sequence_of(params.fwd, b).len_q;
        before[b + 1] = (len_q + Cfg::BM - 1) / Cfg::BM * params.tile_heads;
    }
    __syncthreads();
    if (threadIdx.x >= 32) return;
    // Warp 0 turns the counts into running sums: each lane a run of entries.
    const int lane = threadIdx.x, per = (batch + 31) / 32;
    const int b0 = min(lane * per, batch), b1 = min(b0 + per, batch);
    int mine = 0;
    for (int b = b0; b < b1; ++b) mine += before[b + 1];
    int sum = mine;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        const int x = __shfl_up_sync(0xffffffffu, sum, d);
        if (lane >= d) sum += x;
    }
    sum -= mine;  // the lanes before this one
    for (int b = b0; b < b1; ++b) {
        sum += before[b + 1];
        before[b + 1] = sum;
    }
    if (lane == 0) before[0] = 0;
}

// The tile walk: every slot of the order (tile_order.h), or (the `_varlen`
// entry points) only the real blocks, which may end before total_tiles.
template <typename Cfg>
__device__ __forceinline__ bool past_walk(const Sm90Params &params, int idx) {
    if constexpr (Cfg::kCompactWalk) return idx >= sm90_tiles_before[params.compact_batch];
    return false;
}

template <typename Cfg>
__device__ __forceinline__ Tile walk_tile(const Sm90Params &params, int idx) {
    if constexpr (Cfg::kCompactWalk)
        return compact_tile_coord(idx, sm90_tiles_before, params.compact_batch, params.tile_heads);
    return decode_tile<Cfg::kFastTileDecode>(params, idx);
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

// Split `split`'s share of a query block's key tiles.
__device__ __forceinline__ KeyTiles split_key_tiles(const Sm90Params &params, KeyTiles tiles,
                                                    int split) {
    const KeyTiles share = key_tiles_of_split(tiles.count(), split, params.num_splits);
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

// How many of a block's key tiles `keys` (those of its split) the consumer
// whose 64 rows start at `first_row` computes. A causal diagonal (or right
// window) below its rows ends their keys before those of the block's last
// rows: the later tiles, fully masked for these rows, are loaded for the other
// consumers and skipped (the producer releases their stages for it). Rows past
// the sequence (never stored) compute none; split D consumers share their
// rows and compute every tile, and so does every consumer of a mask without a
// right edge (skipping only the rows past a sequence cost hd64 s512
// non-causal prefill 2.9%; with this early return, 1.4%).
template <typename Cfg>
__device__ __forceinline__ int consumer_tile_count(const Sequence &seq, KeyTiles keys,
                                                   int first_row, int shift) {
    const int n_tiles = keys.count();
    if (!Cfg::kConsumerKeyRanges || n_tiles == 0 || !seq.has_hi) return n_tiles;
    const int rows = tile_rows(seq, shift);
    if (first_row >= rows) return 0;
    int n_begin, n_end;
    visible_key_range(seq, first_row >> shift,
                      (min(first_row + Cfg::kConsumerRows, rows) - 1) >> shift, &n_begin, &n_end);
    const int end = (n_end + Cfg::BN - 1) / Cfg::BN;
    return max(1, min(end, keys.end) - keys.begin);
}

// The consumers that compute a block's last key tile (consumer_tile_count ==
// n_tiles, keys.count() as the caller holds it) share zeroing its V rows past
// the keys (zero_v_tail): how many they are and where `consumer` ranks among
// them. Without per-consumer key ranges every consumer computes every tile.
struct TileReaders {
    int rank;
    int count;
};
template <typename Cfg>
__device__ __forceinline__ TileReaders last_tile_readers(const Sequence &seq, KeyTiles keys,
                                                         int n_tiles, int m0, int consumer,
                                                         int shift) {
    TileReaders readers{consumer, Cfg::kConsumers};
    if (Cfg::kConsumerKeyRanges) readers.rank = readers.count = 0;
#pragma unroll
    for (int c = 0; c < Cfg::kConsumers && Cfg::kConsumerKeyRanges; ++c) {
        const bool reads = consumer_tile_count<Cfg>(seq, keys, m0 + c * Cfg::kConsumerRows,
                                                    shift) == n_tiles;
        readers.rank += reads && c < consumer;
        readers.count += reads;
    }
    return readers;
}

// TMA coordinates of a sequence's rows: packed tensors are one batch of
// total rows, and a sequence starts at its cu_seqlens offset.
__device__ __forceinline__ int q_batch_coord(const FwdParams &p, int batch) {
    return p.cu_seqlens_q != nullptr ? 0 : batch;
}
__device__ __forceinline__ int k_batch_coord(const FwdParams &p, int batch) {
    return p.cu_seqlens_k != nullptr ? 0 : batch;
}

}  // namespace fmha::sm90
