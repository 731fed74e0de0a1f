// CPU references of attention: a float64 one (the truth) and a
// "same-precision" float32 one that rounds like a bf16/fp16 kernel may.
#pragma once
#include <cstdint>
#include <vector>

#include "fmha/fmha.h"

namespace fmha_test {

// What the references need of a problem; strides as in fmha_descriptor.
struct RefProblem {
    fmha_dtype dtype = FMHA_DTYPE_BF16;
    int64_t batch = 1, num_q_heads = 1, num_kv_heads = 1;
    int64_t seqlen_q = 1, seqlen_k = 1, head_dim = 64;
    fmha_mask mask = FMHA_MASK_NONE;
    double softmax_scale = 0;  // 0 means 1/sqrt(head_dim), as in the descriptor
    fmha_strides q{}, k{}, v{}, o{};
    int32_t window_left = -1, window_right = -1;  // as in the descriptor
    double softcap = 0;                            // 0: off
    std::vector<double> sinks;                     // [num_q_heads], or empty

    double scale() const;
    // Keys row i may see: [first_visible_key(i), last_visible_key(i)]; the
    // row sees none when last < first (the diagonal and windows as in fmha.h).
    int64_t first_visible_key(int64_t i) const;
    int64_t last_visible_key(int64_t i) const;
    // The scaled (and soft-capped) score of a raw dot product.
    double score(double dot) const;
};

// Results in logical order: o[((b * Hq + h) * Sq + i) * D + d],
// lse[(b * Hq + h) * Sq + i] (natural log; -inf for a row that sees no key,
// or the head's sink logit when there are sinks).
struct RefResult {
    std::vector<double> o;
    std::vector<double> lse;
};

// q, k, v: the low-precision inputs, element (b, s, h, d) at
// ptr[b*stride.batch + s*stride.seq + h*stride.head + d] (pointers already at
// the view's offset). Work is spread over `threads` threads by (batch, head);
// 0 means std::thread::hardware_concurrency().
RefResult reference_fp64(const RefProblem &p, const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, int threads = 0);

// The same math in float32, with P = exp(S - rowmax) rounded to the dtype
// before P.V (the row sum taken from the unrounded P) and O rounded to the
// dtype, the way a low-precision kernel computes it.
RefResult reference_lowp(const RefProblem &p, const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, int threads = 0);

}  // namespace fmha_test
