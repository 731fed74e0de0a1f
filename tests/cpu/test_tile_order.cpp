// The Hopper kernel's tile orders (src/kernels/tile_order.h): every order
// must visit each (query block, head, batch) exactly once, or a persistent
// CTA would skip or repeat a tile with nothing on the GPU to notice but the
// numerical tests; and the splits of a query block's key tiles must cover
// them exactly once, in order.
#include <vector>

#include "fmha_catch.h"
#include "kernels/tile_order.h"
#include "visit_counts.h"

TEST_CASE("Hopper tile orders visit every tile once, longest blocks first", "[cpu][tile-order]") {
    struct Shape {
        int m_blocks, heads, batch;
    } shapes[] = {{1, 1, 1}, {3, 32, 32}, {6, 32, 16}, {11, 32, 8}, {16, 16, 8}, {43, 5, 3}, {4, 8, 32}};
    for (const Shape &s : shapes) {
        const int pairs = s.heads * s.batch;
        const int total = s.m_blocks * pairs;
        for (int group : {0, 1, 2, 3, 7, 8, 32, pairs}) {
            if (group > pairs) continue;  // the host clamps the group to every (batch, head)
            INFO("m_blocks " << s.m_blocks << " heads " << s.heads << " batch " << s.batch
                             << " head_group " << group);
            std::vector<int> seen(static_cast<size_t>(total), 0);
            std::vector<int> last_block(static_cast<size_t>(pairs), s.m_blocks);
            int bad_range = 0, out_of_order = 0;
            for (int idx = 0; idx < total; ++idx) {
                const fmha::TileCoord t = fmha::sm90_tile_coord(idx, s.m_blocks, s.heads, s.batch, group);
                if (t.m_block < 0 || t.m_block >= s.m_blocks || t.head < 0 || t.head >= s.heads ||
                    t.batch < 0 || t.batch >= s.batch) {
                    ++bad_range;
                    continue;
                }
                const int pair = t.batch * s.heads + t.head;
                ++seen[static_cast<size_t>(pair * s.m_blocks + t.m_block)];
                // Each (batch, head) meets its blocks last first (the causal longest first).
                if (t.m_block >= last_block[static_cast<size_t>(pair)]) ++out_of_order;
                last_block[static_cast<size_t>(pair)] = t.m_block;
            }
            CHECK(bad_range == 0);
            CHECK(out_of_order == 0);
            const VisitCounts visits = visit_counts(seen);
            CHECK(visits.missing == 0);
            CHECK(visits.repeated == 0);
        }
    }
}

TEST_CASE("Hopper tile order: the kernel's reciprocal divisors give the same tiles",
          "[cpu][tile-order]") {
    struct Shape {
        int m_blocks, heads, batch;
    } shapes[] = {{1, 1, 1},   {3, 32, 32}, {6, 32, 16}, {11, 32, 8}, {16, 16, 8},
                  {43, 5, 3},  {4, 8, 32},  {1, 64, 3}, {128, 1, 1}, {7, 3, 100}};
    for (const Shape &s : shapes) {
        const int pairs = s.heads * s.batch;
        const int total = s.m_blocks * pairs;
        for (int group : {0, 1, 2, 3, 7, 8, 32, pairs}) {
            if (group > pairs) continue;
            INFO("m_blocks " << s.m_blocks << " heads " << s.heads << " batch " << s.batch
                             << " head_group " << group);
            const fmha::TileDivisors div = fmha::make_tile_divisors(s.m_blocks, s.heads, group);
            int differ = 0;
            for (int idx = 0; idx < total; ++idx) {
                const fmha::TileCoord a = fmha::sm90_tile_coord(idx, s.m_blocks, s.heads, s.batch, group);
                const fmha::TileCoord b =
                    fmha::sm90_tile_coord(idx, s.m_blocks, s.heads, s.batch, group, div);
                differ += a.m_block != b.m_block || a.head != b.head || a.batch != b.batch;
            }
            CHECK(differ == 0);
        }
    }
    // Near the int32 limit of a split's tiles: the reciprocals stay exact.
    const int m_blocks = 1 << 14, heads = 128, batch = (1 << 30) / (m_blocks * heads) * 2 - 1;
    const fmha::TileDivisors div = fmha::make_tile_divisors(m_blocks, heads, 0);
    for (int idx : {0, 1, m_blocks - 1, m_blocks, m_blocks * heads - 1, m_blocks * heads * (batch - 1),
                    m_blocks * heads * batch - 1}) {
        const fmha::TileCoord a = fmha::sm90_tile_coord(idx, m_blocks, heads, batch, 0);
        const fmha::TileCoord b = fmha::sm90_tile_coord(idx, m_blocks, heads, batch, 0, div);
        INFO("idx " << idx);
        CHECK((a.m_block == b.m_block && a.head == b.head && a.batch == b.batch));
    }
}

TEST_CASE("Hopper split-KV: the splits cover a block's key tiles once, in order",
          "[cpu][tile-order]") {
    for (int n_tiles : {0, 1, 2, 3, 7, 16, 43, 171, 1000})
        for (int splits : {1, 2, 3, 5, 16, 33, 128}) {
            INFO("n_tiles " << n_tiles << " num_splits " << splits);
            int next = 0, longest = 0, nonempty = 0;
            for (int s = 0; s < splits; ++s) {
                const fmha::KeyTiles k = fmha::key_tiles_of_split(n_tiles, s, splits);
                REQUIRE(k.count() >= 0);
                if (k.count() == 0) continue;
                CHECK(k.begin == next);  // contiguous, in split order
                next = k.end;
                longest = k.count() > longest ? k.count() : longest;
                ++nonempty;
            }
            CHECK(next == n_tiles);
            // The longest split sets the time: no more than ceil(n / splits).
            CHECK(longest == (n_tiles + splits - 1) / splits);
            CHECK(nonempty <= splits);
        }
}

TEST_CASE("Hopper tile order without empty slots: every real block of a varlen batch once",
          "[cpu][tile-order]") {
    const std::vector<std::vector<int>> batches = {
        {1},          {3},          {0, 2, 0},    {5, 0, 0, 1}, {7, 31, 10, 7, 10, 9, 8, 5, 31, 15},
        {0, 0, 4, 0}, {1, 1, 1, 1}, {2, 0, 3, 0, 0, 9}};
    for (int heads : {1, 3, 16}) {
        for (const std::vector<int> &blocks : batches) {
            const int batch = static_cast<int>(blocks.size());
            std::vector<int> before(static_cast<size_t>(batch) + 1, 0);
            for (int b = 0; b < batch; ++b)
                before[static_cast<size_t>(b) + 1] = before[static_cast<size_t>(b)] + heads * blocks[b];
            const int total = before.back();
            INFO("heads " << heads << " batch " << batch << " tiles " << total);
            std::vector<std::vector<int>> seen(static_cast<size_t>(batch));
            for (int b = 0; b < batch; ++b) seen[b].assign(static_cast<size_t>(heads * blocks[b]), 0);
            int bad = 0, out_of_order = 0;
            int prev_pair = -1, prev_block = 0;
            for (int idx = 0; idx < total; ++idx) {
                const fmha::TileCoord t = fmha::compact_tile_coord(idx, before.data(), batch, heads);
                if (t.batch < 0 || t.batch >= batch || t.head < 0 || t.head >= heads ||
                    t.m_block < 0 || t.m_block >= blocks[t.batch]) {
                    ++bad;
                    continue;
                }
                ++seen[t.batch][static_cast<size_t>(t.head * blocks[t.batch] + t.m_block)];
                // Sequences and heads in turn, each head's blocks last first.
                const int pair = t.batch * heads + t.head;
                if (pair == prev_pair ? t.m_block != prev_block - 1
                                      : pair < prev_pair || t.m_block != blocks[t.batch] - 1)
                    ++out_of_order;
                prev_pair = pair;
                prev_block = t.m_block;
            }
            CHECK(bad == 0);
            CHECK(out_of_order == 0);
            int missing = 0, repeated = 0;
            for (const std::vector<int> &counts : seen) {
                const VisitCounts visits = visit_counts(counts);
                missing += visits.missing;
                repeated += visits.repeated;
            }
            CHECK(missing == 0);
            CHECK(repeated == 0);
        }
    }
}
