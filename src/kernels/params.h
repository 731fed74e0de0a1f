// Kernel parameters shared by the host launchers and the device code. Plain
// C++ with fixed-width types so both compilers lay it out identically.
#pragma once
#include <stdint.h>

namespace fmha {

struct TensorStrides {
    int64_t batch, seq, head;  // elements
};

struct FwdParams {
    const void *q;
    const void *k;
    const void *v;
    void *o;
    float *lse;  // [batch][num_q_heads][seqlen_q], or null
    TensorStrides q_stride, k_stride, v_stride, o_stride;
    int64_t causal_offset;     // key j visible to query i iff j <= i + causal_offset
    int32_t batch;
    int32_t num_q_heads;
    int32_t q_heads_per_kv;    // num_q_heads / num_kv_heads
    int32_t seqlen_q;
    int32_t seqlen_k;
    int32_t num_m_blocks;      // ceil(seqlen_q / block_m)
    int32_t causal;            // 0 or 1
    float scale_log2;          // multiplies a (capped) score into base-2 softmax units
    float softmax_scale;
    // Visible keys of row i, for the portable kernel (masks and windows):
    // i + lo_offset <= j (if has_lo) and j <= i + hi_offset (if has_hi).
    int64_t lo_offset;
    int64_t hi_offset;
    int32_t has_lo;
    int32_t has_hi;
    float softcap;             // > 0: s = softcap * tanh(s * softcap_scale)
    float softcap_scale;       // softmax_scale / softcap
    const float *sinks;        // [num_q_heads] logits joining the denominator, or null
};

}  // namespace fmha

namespace fmha {

// Opaque CUtensorMap (cuda.h): 128 bytes, 64-byte aligned. The host checks
// the sizes agree.
struct alignas(64) TmaDescriptor {
    uint64_t opaque[16];
};

// Tensor maps address every (batch, head) slice: dims (dim, seq, head, batch).
struct Sm90Params {
    TmaDescriptor q, k, v, o;
    FwdParams fwd;
    int32_t total_tiles;  // query blocks x heads x batch
    int32_t persistent;   // 1: gridDim.x CTAs loop over the tiles; 0: one tile per CTA
};

}  // namespace fmha
