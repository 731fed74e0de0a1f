// The decode kernel's K/V stage layout (decode_kv_offset in
// src/kernels/tile_traits.h): a wrong swizzle either loses data (two chunks
// on one slot; the GPU tests would see it) or only costs speed (ldmatrix
// bank conflicts, or a chunk leaving its row's lines: nothing fails but the
// timing). This checks all three for every head_dim the kernel compiles.
#include <set>
#include <vector>

#include "fmha_catch.h"
#include "kernels/tile_traits.h"
#include "visit_counts.h"

namespace {

template <int D>
void check_layout() {
    constexpr int kRows = 128;  // the longest key tile
    constexpr int kChunks = D / 8;
    INFO("head_dim " << D);
    std::vector<int> owner(static_cast<size_t>(kRows * kChunks), 0);
    int out_of_row = 0, misaligned = 0, conflicts = 0;
    for (int r = 0; r < kRows; ++r)
        for (int c = 0; c < kChunks; ++c) {
            const int off = fmha::decode_kv_offset<D>(r, c);
            if (off % 8 != 0) ++misaligned;
            if (off < r * D || off >= (r + 1) * D) {
                ++out_of_row;
                continue;
            }
            ++owner[static_cast<size_t>(off / 8)];
        }
    CHECK(misaligned == 0);
    CHECK(out_of_row == 0);
    const VisitCounts chunks = visit_counts(owner);  // chunk slots unused or shared
    CHECK(chunks.missing == 0);
    CHECK(chunks.repeated == 0);
    // ldmatrix reads one 16-byte chunk from each of 8 rows r0..r0+7 (r0 a
    // multiple of 8) per 8x8 matrix: the 8 addresses must fall on 8 distinct
    // 16-byte slots of the 128-byte bank line to take one pass.
    for (int r0 = 0; r0 < kRows; r0 += 8)
        for (int c = 0; c < kChunks; ++c) {
            std::set<int> slots;
            for (int r = r0; r < r0 + 8; ++r) slots.insert(fmha::decode_kv_offset<D>(r, c) * 2 / 16 % 8);
            conflicts += slots.size() != 8;
        }
    CHECK(conflicts == 0);
}

}  // namespace

TEST_CASE("decode K/V stages: every chunk in its row, once, and ldmatrix conflict-free",
          "[cpu][decode-layout]") {
    check_layout<64>();
    check_layout<96>();
    check_layout<128>();
    check_layout<192>();  // paired hd96 heads
    check_layout<256>();
    check_layout<512>();
}
