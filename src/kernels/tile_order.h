// The order in which the Hopper kernel's CTAs take their (query block, head,
// batch) tiles. Shared by the kernel and the host tests, which check that
// every order visits each tile exactly once.
#pragma once

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

// Split-KV: the key tiles [begin, end) of a query block's n_tiles that split
// `split` of `num_splits` takes: equal runs in order, the last ones shorter or
// empty (an empty split writes a partial with no key, LSE -inf).
struct KeyTiles {
    int begin, end;
    FMHA_HOST_DEVICE int count() const { return end - begin; }
};

FMHA_HOST_DEVICE inline KeyTiles sm90_split_key_tiles(int n_tiles, int split, int num_splits) {
    const int per = (n_tiles + num_splits - 1) / num_splits;
    const int begin = split * per < n_tiles ? split * per : n_tiles;
    return KeyTiles{begin, begin + per < n_tiles ? begin + per : n_tiles};
}

}  // namespace fmha
