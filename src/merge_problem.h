// The validated problem of a merge plan (fmha_create_merge_plan).
#pragma once
#include <cstdint>

#include "fmha/fmha.h"

namespace fmha {

struct MergeProblem {
    fmha_dtype dtype = FMHA_DTYPE_BF16;
    int64_t batch = 0, seqlen_q = 0, num_heads = 0, head_dim = 0;
    fmha_strides part{}, o{};
    int32_t num_parts = 0;
    bool write_lse = false;
};

}  // namespace fmha
