// The images this libfmha build embeds, for tests whose answer depends on them.
#pragma once
#include <cstdint>
#include <vector>

#include "fmha/fmha.h"

namespace fmha_test {

// fmha_embedded_archs as a vector: the sm of every embedded cubin.
inline std::vector<int32_t> embedded_archs() {
    std::vector<int32_t> v(size_t(fmha_embedded_archs(nullptr, 0)));
    fmha_embedded_archs(v.data(), int32_t(v.size()));
    return v;
}

// Whether a cubin for exactly `sm` is embedded.
inline bool embeds(int sm) {
    for (int32_t a : embedded_archs())
        if (a == sm) return true;
    return false;
}

}  // namespace fmha_test
