#include "fmha_test/random.h"

#include <cstdlib>

#include "fmha_test/half.h"

namespace fmha_test {

uint64_t base_seed() {
    const char *env = std::getenv("FMHA_TEST_SEED");
    if (env != nullptr && env[0] != '\0') return std::strtoull(env, nullptr, 0);
    return 20240601u;
}

uint64_t case_seed(uint64_t base, uint64_t index) {
    uint64_t z = base ^ (index * 0x9E3779B97F4A7C15ull) ^ 0xD1B54A32D192ED03ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

std::vector<uint16_t> random_tensor(const TensorLayout &layout, int64_t batch, int64_t seqlen,
                                    int64_t heads, int64_t head_dim, fmha_dtype dtype,
                                    std::mt19937_64 &rng, float row_growth) {
    std::vector<uint16_t> out(layout.alloc_elems, kGuard16);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t s = 0; s < seqlen; ++s) {
            const float scale = 1.f + row_growth * float(s);
            for (int64_t h = 0; h < heads; ++h)
                for (int64_t d = 0; d < head_dim; ++d)
                    out[size_t(layout.offset + element_offset(layout.strides, b, s, h, d))] =
                        float_to_lowp(normal(rng) * scale, dtype);
        }
    return out;
}

}  // namespace fmha_test
