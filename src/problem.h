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
    bool sinks;                  // FMHA_FLAG_SINKS
    int32_t window_left = -1;    // -1: unbounded
    int32_t window_right = -1;
    float softcap = 0.0f;        // 0: off

    // The diagonal of row i is i + diagonal_offset().
    int64_t diagonal_offset() const {
        return mask == FMHA_MASK_CAUSAL_TOP_LEFT ? 0 : seqlen_k - seqlen_q;
    }
    bool has_window() const { return window_left >= 0 || window_right >= 0; }

    // Key j is visible to query i iff j <= i + causal_offset() (causal masks only).
    int64_t causal_offset() const {
        return mask == FMHA_MASK_CAUSAL_BOTTOM_RIGHT ? seqlen_k - seqlen_q : 0;
    }
    int64_t element_bytes() const { return 2; }
};

}  // namespace fmha
