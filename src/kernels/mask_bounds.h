// Which keys of a tile one query row sees, as a range of column offsets: the
// Hopper kernel's masked tiles compare each score's offset against it instead
// of testing the key's index. Shared by the kernel and the host tests, which
// check it against the per-key rule.
#pragma once
#include <stdint.h>

#include "kernels/tile_traits.h"  // FMHA_HOST_DEVICE

namespace fmha {

// CUDA's 64-bit min/max on the device (min.s64 in PTX), plain compares on the host.
FMHA_HOST_DEVICE inline int64_t min64(int64_t a, int64_t b) {
#ifdef __CUDA_ARCH__
    return min(a, b);
#else
    return a < b ? a : b;
#endif
}
FMHA_HOST_DEVICE inline int64_t max64(int64_t a, int64_t b) {
#ifdef __CUDA_ARCH__
    return max(a, b);
#else
    return a > b ? a : b;
#endif
}

// Visible offsets c satisfy lo <= c <= hi (empty when lo > hi).
struct ColumnRange {
    int lo, hi;
};

// Key j is visible to query position `row` iff j < len_k, (!has_hi ||
// j <= row + hi) and (!has_lo || j >= row + lo). Offsets are from key col0,
// clamped so that any offset in [0, width) compares as the key would.
FMHA_HOST_DEVICE inline ColumnRange visible_columns(int64_t row, int64_t col0, int len_k,
                                                    bool has_hi, int64_t hi, bool has_lo,
                                                    int64_t lo, int width) {
    int64_t last = int64_t(len_k) - 1;
    if (has_hi) last = min64(last, row + hi);
    const int64_t first = has_lo ? row + lo : col0;
    const int64_t hi_rel = max64(min64(last - col0, width), -1);
    const int64_t lo_rel = max64(min64(first - col0, width), 0);
    return {static_cast<int>(lo_rel), static_cast<int>(hi_rel)};
}

}  // namespace fmha
