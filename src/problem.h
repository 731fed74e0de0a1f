// The validated, defaulted problem that plans and launchers work from.
#pragma once
#include <cstdint>

#include "fmha/fmha.h"

namespace fmha {

struct Problem {
    fmha_dtype dtype;
    int64_t batch, num_q_heads, num_kv_heads;
    int64_t seqlen_q, seqlen_k;
    int64_t head_dim, head_dim_v;
    fmha_strides q, k, v, o;
    float softmax_scale;  // defaulted: never 0
    fmha_mask mask;
    bool write_lse;
    fmha_kernel_family kernel;  // as requested (AUTO, or forced)
    int device;

    // Key j is visible to query i iff j <= i + causal_offset() (causal masks only).
    int64_t causal_offset() const {
        return mask == FMHA_MASK_CAUSAL_BOTTOM_RIGHT ? seqlen_k - seqlen_q : 0;
    }
    int64_t element_bytes() const { return 2; }
};

}  // namespace fmha
