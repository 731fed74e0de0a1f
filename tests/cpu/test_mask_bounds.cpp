// The Hopper kernel's masked tiles (src/kernels/mask_bounds.h): the column
// range of a row must select exactly the keys the per-key rule makes visible,
// for every offset of a tile, under causal diagonals, windows on either side,
// sequence ends inside and outside the tile, and offsets far past 32 bits.
#include <cstdint>
#include <random>

#include "fmha_catch.h"
#include "kernels/mask_bounds.h"

namespace {

bool visible(int64_t row, int64_t key, int len_k, bool has_hi, int64_t hi, bool has_lo,
             int64_t lo) {
    return key < len_k && (!has_hi || key <= row + hi) && (!has_lo || key >= row + lo);
}

// Checks every offset of a `width`-key tile starting at col0; returns the
// number of offsets where range and rule disagree.
int mismatches(int64_t row, int64_t col0, int len_k, bool has_hi, int64_t hi, bool has_lo,
               int64_t lo, int width) {
    const fmha::ColumnRange r =
        fmha::visible_columns(row, col0, len_k, has_hi, hi, has_lo, lo, width);
    int bad = 0;
    for (int c = 0; c < width; ++c)
        bad += (c >= r.lo && c <= r.hi) != visible(row, col0 + c, len_k, has_hi, hi, has_lo, lo);
    return bad;
}

}  // namespace

TEST_CASE("mask bounds: a row's column range selects the visible keys of a tile",
          "[cpu][mask-bounds]") {
    // Exhaustive over a small neighbourhood: rows and tiles around a
    // 300-key sequence, diagonals and windows of a few keys to past the tile.
    int bad = 0, cases = 0;
    for (int width : {64, 80, 128, 192})
        for (int len_k : {0, 1, 17, 300})
            for (int64_t row = 0; row < 320; row += 7)
                for (int64_t col0 = 0; col0 < 400; col0 += 13)
                    for (int64_t hi : {-1000, -5, 0, 3, 64, 5000})
                        for (int64_t lo : {-5000, -128, -3, 0, 2})
                            for (int flags = 0; flags < 4; ++flags) {
                                bad += mismatches(row, col0, len_k, flags & 1, hi, flags & 2,
                                                  lo, width);
                                ++cases;
                            }
    INFO(cases << " cases");
    CHECK(bad == 0);
}

TEST_CASE("mask bounds: far offsets and extreme windows clamp without overflow",
          "[cpu][mask-bounds]") {
    std::mt19937_64 rng(0x6d61736bULL);
    const int64_t big = int64_t(1) << 31;
    std::uniform_int_distribution<int64_t> pos(0, big - 1), shift(-2 * big, 2 * big);
    std::uniform_int_distribution<int> len(0, int(big - 1)), pick(0, 3);
    int bad = 0;
    for (int i = 0; i < 20000; ++i) {
        const int64_t row = pos(rng);
        // Tiles near the interesting edges as well as anywhere.
        const int64_t hi = pick(rng) == 0 ? -row : shift(rng);
        const int64_t lo = pick(rng) == 0 ? -row : shift(rng);
        const int len_k = len(rng);
        int64_t col0 = pos(rng);
        switch (pick(rng)) {
        case 0: col0 = row + hi - 40; break;
        case 1: col0 = row + lo - 40; break;
        case 2: col0 = int64_t(len_k) - 40; break;
        default: break;
        }
        if (col0 < 0) col0 = 0;
        bad += mismatches(row, col0, len_k, pick(rng) & 1, hi, pick(rng) & 1, lo, 128);
    }
    CHECK(bad == 0);
}
