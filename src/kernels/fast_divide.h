// Division of non-negative 31-bit integers by a divisor known on the host,
// as a multiply-high and a shift (no branch, no division loop). The paged
// kernels split every key index into (block-table column, row in page)
// with it, for any page size.
#pragma once
#include <stdint.h>

#include "kernels/tile_traits.h"  // FMHA_HOST_DEVICE

namespace fmha {

// q = n / d for 0 <= n < 2^31: q = umulhi(n, magic) >> shift, with
// magic = ceil(2^(31 + L) / d) and shift = L - 1 for L = ceil(log2 d) >= 1
// (magic < 2^32 because d > 2^(L - 1); the error of the rounded-up
// reciprocal stays below one step of n / d for n < 2^31). d = 1 has
// magic 0 and returns n.
struct FastDivide {
    uint32_t magic;
    int32_t shift;
};

inline FastDivide make_fast_divide(int32_t d) {
    if (d <= 1) return FastDivide{0u, 0};
    int log2_ceil = 0;
    while ((int64_t(1) << log2_ceil) < d) ++log2_ceil;
    const uint64_t magic = ((uint64_t(1) << (31 + log2_ceil)) + uint64_t(d) - 1) / uint64_t(d);
    return FastDivide{static_cast<uint32_t>(magic), log2_ceil - 1};
}

FMHA_HOST_DEVICE inline int fast_divide(int n, FastDivide f) {
#if defined(__CUDA_ARCH__)
    const uint32_t high = __umulhi(static_cast<uint32_t>(n), f.magic);
#else
    const uint32_t high = static_cast<uint32_t>((uint64_t(uint32_t(n)) * f.magic) >> 32);
#endif
    return f.magic == 0u ? n : static_cast<int>(high >> f.shift);
}

}  // namespace fmha
