// The Hopper kernel's `_gather` copies (sm90_gather_first_copy and
// sm90_gather_copy_offset in src/kernels/tile_traits.h): every copy of every
// producer lane must land where the TMA boxes would put the same 16-byte
// chunk (64-column box b of row r at b * block_n * 128 + r * 128, chunk c of
// the box at (c ^ r % 8) * 16), and the copies of a stage must fill it
// exactly once. The kernel's row-step shortcut (an XOR constant per step)
// is only valid while no carry reaches the lane's row offset; this checks it
// for every tile the `_gather` entry points compile.
#include <vector>

#include "fmha_catch.h"
#include "kernels/tile_traits.h"

namespace {

void check_gather_tile(int head_dim) {
    const fmha::Sm90Tile tile = fmha::sm90_tile(head_dim, fmha::kSm90Default);
    const int block_n = tile.block_n, dp = tile.padded_dim;
    const int lanes = fmha::sm90_gather_lanes_per_row(dp);
    const int rows_per_copy = fmha::sm90_gather_rows_per_copy(dp);
    const int copies_per_row = dp / 8 / lanes;
    const int rows_per_warp = block_n / 4;
    INFO("head_dim " << head_dim << " block_n " << block_n << " padded " << dp);
    REQUIRE(rows_per_warp % rows_per_copy == 0);
    const uint32_t stage = 3 * 1024;  // any 1024-byte aligned base
    std::vector<int> hits(size_t(block_n) * size_t(dp / 8), 0);
    int wrong = 0, wrong_holder = 0;
    for (int warp = 0; warp < 4; ++warp)
        for (int lane = 0; lane < 32; ++lane)
            for (int k = 0; k < copies_per_row; ++k) {
                const uint32_t first =
                    fmha::sm90_gather_first_copy(stage, block_n, dp, warp, lane, k);
                const int chunk = k * lanes + lane % lanes;
                for (int i = 0; i < rows_per_warp; i += rows_per_copy) {
                    const int row = warp * rows_per_warp + i + lane / lanes;
                    const uint32_t want = stage + uint32_t((chunk / 8) * block_n * 128 + row * 128 +
                                                           (((chunk % 8) ^ (row % 8)) << 4));
                    const uint32_t got = fmha::sm90_gather_copy_offset(first, i);
                    if (got != want) ++wrong;
                    // The shuffle's source: lane i / rows per copy of this
                    // lane's group must hold this row.
                    const int holder = (lane / lanes) * lanes + i / rows_per_copy;
                    if (warp * rows_per_warp + fmha::sm90_gather_held_row(dp, holder) != row)
                        ++wrong_holder;
                    ++hits[size_t(row) * size_t(dp / 8) + size_t(chunk)];
                }
            }
    CHECK(wrong == 0);
    CHECK(wrong_holder == 0);
    // Each of the warp's rows is held by exactly one lane.
    for (int r = 0; r < rows_per_warp; ++r) {
        int holders = 0;
        for (int lane = 0; lane < 32; ++lane) holders += fmha::sm90_gather_held_row(dp, lane) == r;
        CHECK(holders == 1);
    }
    int missing = 0, repeated = 0;
    for (int h : hits) {
        missing += h == 0;
        repeated += h > 1;
    }
    CHECK(missing == 0);
    CHECK(repeated == 0);
}

}  // namespace

TEST_CASE("Hopper `_gather` copies land where the TMA boxes would", "[cpu][gather]") {
    for (int d : {64, 96, 128, 256, 512}) check_gather_tile(d);
}

