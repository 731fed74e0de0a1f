// The validated, defaulted problem that plans and launchers work from.
#pragma once
#include <cstdint>

#include "fmha/fmha.h"
#include "kernels/fast_divide.h"

namespace fmha {

constexpr int kMaxSplits = 128;  // descriptor.num_splits upper bound

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
    // Descriptor version 3: variable lengths, paged KV, split-KV.
    bool varlen_q = false;       // Q/O packed [total_q, heads, dim], cu_seqlens_q
    bool varlen_k = false;       // key counts (and, unpaged, K/V rows) from cu_seqlens_k
    bool seqused_k = false;      // key counts from seqused_k
    bool paged_kv = false;       // K/V [num_pages, page_size, heads, dim] + block_table
    int64_t total_q = 0, total_k = 0;
    int64_t num_pages = 0, max_pages_per_seq = 0;
    int32_t page_size = 0;
    // key index / page_size on the device (kernels/fast_divide.h), derived
    // once here rather than per run.
    FastDivide page_div{0u, 0};
    int32_t num_splits = 0;      // as requested: 0 automatic

    // True when every sequence has seqlen_q queries and seqlen_k keys in
    // plain strided tensors: what the Hopper kernel's tensor maps address.
    bool is_dense() const { return !varlen_q && !varlen_k && !seqused_k && !paged_kv; }
    // Rows of Q/O as the kernels index them: packed rows, or batch x seqlen_q.
    int64_t q_rows() const { return varlen_q ? total_q : batch * seqlen_q; }

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
