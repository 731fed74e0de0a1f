// The order in which the Hopper kernel's CTAs take their (query block, head,
// batch) tiles. Shared by the kernel and the host tests, which check that
// every order visits each tile exactly once.
#pragma once

#include "kernels/fast_divide.h"
#include "kernels/tile_traits.h"  // FMHA_HOST_DEVICE

namespace fmha {

struct TileCoord {
    int m_block, head, batch;
};

// Tile `idx` of num_m_blocks x num_q_heads x batch tiles.
//  - head_group == 0: one (batch, head) after another, its query blocks last
//    first, so the CTAs working at one time share that head's K and V in L2
//    and, under a causal mask, the longest blocks start first.
//  - head_group == G > 0 (causal, persistent grid): groups of G (batch, head)
//    pairs whose K/V fit a slice of L2, the longest blocks of the whole group
//    first, so CTAs taking tiles round-robin get a mix of lengths.
FMHA_HOST_DEVICE inline TileCoord sm90_tile_coord(int idx, int num_m_blocks, int num_q_heads,
                                                  int batch, int head_group) {
    int m_rank, bh;
    if (head_group > 0) {
        const int per_group = head_group * num_m_blocks;
        const int group = idx / per_group, within = idx % per_group;
        const int bh0 = group * head_group;
        const int left = num_q_heads * batch - bh0;
        const int heads_here = head_group < left ? head_group : left;
        m_rank = within / heads_here;
        bh = bh0 + within % heads_here;
    } else {
        m_rank = idx % num_m_blocks;
        bh = idx / num_m_blocks;
    }
    return TileCoord{num_m_blocks - 1 - m_rank, bh % num_q_heads, bh / num_q_heads};
}

// The same order with the divisors of the common case as multiply-shift
// reciprocals: the kernel decodes a tile at every block boundary, where each
// integer division is ~20 dependent instructions (no hardware divider). Only
// the last, smaller head group of a causal order divides the slow way.
struct TileDivisors {
    FastDivide m_blocks;     // num_m_blocks
    FastDivide heads;        // num_q_heads (tile heads)
    FastDivide group;        // head_group (when > 0)
    FastDivide group_tiles;  // head_group x num_m_blocks (when head_group > 0)
};

inline TileDivisors make_tile_divisors(int num_m_blocks, int num_q_heads, int head_group) {
    return TileDivisors{make_fast_divide(num_m_blocks), make_fast_divide(num_q_heads),
                        make_fast_divide(head_group > 0 ? head_group : 1),
                        make_fast_divide(head_group > 0 ? head_group * num_m_blocks : 1)};
}

FMHA_HOST_DEVICE inline TileCoord sm90_tile_coord(int idx, int num_m_blocks, int num_q_heads,
                                                  int batch, int head_group,
                                                  const TileDivisors &div) {
    int m_rank, bh;
    if (head_group > 0) {
        const int group = fast_divide(idx, div.group_tiles);
        const int within = idx - group * head_group * num_m_blocks;
        const int bh0 = group * head_group;
        const int left = num_q_heads * batch - bh0;
        if (head_group <= left) {
            m_rank = fast_divide(within, div.group);
            bh = bh0 + within - m_rank * head_group;
        } else {
            m_rank = within / left;
            bh = bh0 + within % left;
        }
    } else {
        bh = fast_divide(idx, div.m_blocks);
        m_rank = idx - bh * num_m_blocks;
    }
    const int batch_of = fast_divide(bh, div.heads);
    return TileCoord{num_m_blocks - 1 - m_rank, bh - batch_of * num_q_heads, batch_of};
}

// Packed (varlen) Q without empty slots: sequence b's tiles are indices
// tiles_before[b] .. tiles_before[b + 1] - 1 (heads x its own query blocks),
// one head's blocks after another, last first, as head_group 0 above. The
// slot order above gives every sequence the longest one's block count, and a
// persistent CTA pays for each empty slot it meets (kernel-notes h26).
// tiles_before has batch + 1 entries, nondecreasing, tiles_before[0] == 0;
// idx < tiles_before[batch].
FMHA_HOST_DEVICE inline TileCoord compact_tile_coord(int idx, const int *tiles_before, int batch,
                                                     int heads) {
    int lo = 0, hi = batch;  // the last sequence whose tiles start at or before idx
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (tiles_before[mid] <= idx) lo = mid;
        else hi = mid;
    }
    const int within = idx - tiles_before[lo];
    const int blocks = (tiles_before[lo + 1] - tiles_before[lo]) / heads;
    const int head = within / blocks;
    return TileCoord{blocks - 1 - (within - head * blocks), head, lo};
}

// Split-KV: the key tiles [begin, end) of a query block's n_tiles that split
// `split` of `num_splits` takes: equal runs in order, the last ones shorter or
// empty (an empty split writes a partial with no key, LSE -inf).
struct KeyTiles {
    int begin, end;
    FMHA_HOST_DEVICE int count() const { return end - begin; }
};

FMHA_HOST_DEVICE inline KeyTiles key_tiles_of_split(int n_tiles, int split, int num_splits) {
    const int per = (n_tiles + num_splits - 1) / num_splits;
    const int begin = split * per < n_tiles ? split * per : n_tiles;
    return KeyTiles{begin, begin + per < n_tiles ? begin + per : n_tiles};
}

}  // namespace fmha
