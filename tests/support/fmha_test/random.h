// Seeded random inputs.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "fmha/fmha.h"
#include "fmha_test/layout.h"

namespace fmha_test {

// Base seed of a run: env FMHA_TEST_SEED (decimal or 0x hex) or a fixed default.
uint64_t base_seed();

// A well-mixed seed for case number `index` (splitmix64 of base ^ index).
uint64_t case_seed(uint64_t base, uint64_t index);

// A tensor's whole allocation: normal(0, 1) values rounded to `dtype` at every
// element the layout addresses, and the NaN gap pattern everywhere else (so a
// kernel that reads outside the view produces NaN). With row_growth > 0 the
// values of sequence position s are scaled by 1 + row_growth * s.
std::vector<uint16_t> random_tensor(const TensorLayout &layout, int64_t batch, int64_t seqlen,
                                    int64_t heads, int64_t head_dim, fmha_dtype dtype,
                                    std::mt19937_64 &rng, float row_growth = 0.f);

}  // namespace fmha_test
