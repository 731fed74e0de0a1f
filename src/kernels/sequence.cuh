// Per-sequence geometry on the device: lengths from cu_seqlens / seqused_k,
// where a sequence's rows start in packed tensors, which keys each query row
// sees, and the address of key j in a contiguous or paged K/V cache. Shared
// by the portable and decode kernels.
#pragma once
#include <stdint.h>

#include "kernels/fast_divide.h"
#include "kernels/params.h"

namespace fmha {

struct Sequence {
    int len_q, len_k;
    int64_t q_row0;  // first row of the sequence in Q/O (packed) or 0
    int64_t k_row0;  // first row in packed K/V, or 0 (dense, paged)
    // Key j is visible to query row i iff j < len_k and
    // (!has_lo || j >= i + lo) and (!has_hi || j <= i + hi).
    int64_t lo, hi;
    bool has_lo, has_hi;

    __device__ __forceinline__ bool visible(int64_t i, int64_t j) const {
        return j < len_k && (!has_lo || j >= i + lo) && (!has_hi || j <= i + hi);
    }
};

__device__ __forceinline__ Sequence sequence_of(const FwdParams &p, int b) {
    Sequence s;
    s.q_row0 = 0;
    s.len_q = p.seqlen_q;
    // Device-side lengths are trusted only within the tensors: a cu_seqlens
    // entry outside [0, total] is clamped, so a broken array gives a wrong
    // result but never an access outside Q, K, V or O.
    if (p.cu_seqlens_q != nullptr) {
        const int begin = min(max(p.cu_seqlens_q[b], 0), p.total_q);
        const int end = min(max(p.cu_seqlens_q[b + 1], begin), p.total_q);
        s.q_row0 = begin;
        s.len_q = min(end - begin, p.seqlen_q);
    }
    s.k_row0 = 0;
    int len_k = p.seqlen_k;
    if (p.cu_seqlens_k != nullptr) {
        int begin = p.cu_seqlens_k[b], end = p.cu_seqlens_k[b + 1];
        if (p.block_table == nullptr) {  // packed K/V: rows of this sequence
            begin = min(max(begin, 0), p.total_k);
            end = min(max(end, begin), p.total_k);
            s.k_row0 = begin;
        }
        // Wrapping (unsigned) subtraction: a broken array may hold INT32_MIN
        // and INT32_MAX, and a signed overflow would be undefined. A wrapped
        // difference is negative and counts as no keys below.
        len_k = static_cast<int>(static_cast<unsigned>(end) - static_cast<unsigned>(begin));
    }
    if (p.seqused_k != nullptr) {
        // Never past the sequence's own packed rows.
        len_k = p.cu_seqlens_k != nullptr && p.block_table == nullptr
                    ? min(p.seqused_k[b], len_k)
                    : p.seqused_k[b];
    }
    s.len_k = min(max(len_k, 0), p.seqlen_k);
    // The diagonal of row i is i + diag (fmha.h: top-left, else bottom-right).
    const int64_t diag = p.mask == 1 ? 0 : int64_t(s.len_k) - s.len_q;
    s.has_hi = p.mask != 0 || p.window_right >= 0;
    s.hi = p.mask != 0 ? diag : diag + p.window_right;
    s.has_lo = p.window_left >= 0;
    s.lo = diag - p.window_left;
    return s;
}

// Keys [begin, end) that some row in [row_first, row_last] may see.
__device__ __forceinline__ void visible_key_range(const Sequence &s, int row_first, int row_last,
                                                  int *begin, int *end) {
    int64_t e = s.len_k, b = 0;
    if (s.has_hi) e = min(e, int64_t(row_last) + s.hi + 1);
    if (s.has_lo) b = max(b, int64_t(row_first) + s.lo);
    *begin = static_cast<int>(b);
    *end = static_cast<int>(max(e, b));
}

// Rows of K (or V) of one (sequence, kv head): contiguous or paged.
template <typename T>
struct KvRows {
    const T *base;           // at the head (and, unpaged, the sequence's first row)
    int64_t seq_stride;      // between rows (within a page)
    int64_t page_stride;     // between pages
    const int32_t *table;    // this sequence's block-table row, or null
    FastDivide page_div;     // key index / page_size
    int page_size, num_pages;

    // Block-table column of key j, and (page, row in page) of key j from the
    // table entry of that column (paged caches only). K and V share the
    // block table, so one lookup serves both. Branch-free for every page size.
    __device__ __forceinline__ int block_of(int j) const { return fast_divide(j, page_div); }
    __device__ __forceinline__ int2 slot_of(int entry, int j) const {
        const int in_page = j - block_of(j) * page_size;
        // Out-of-range entries are clamped: a broken table never faults.
        return make_int2(min(max(entry, 0), num_pages - 1), in_page);
    }
    __device__ __forceinline__ const T *at(int2 slot) const {
        return base + int64_t(slot.x) * page_stride + int64_t(slot.y) * seq_stride;
    }
};

// Key 0 of (batch b, KV head kv_head) in a batch-strided contiguous cache.
// The sequence's own first key is k_row0 rows further (packed caches).
template <typename T>
__device__ __forceinline__ const T *dense_head_base(const void *ptr, const TensorStrides &st, int b,
                                                    int kv_head) {
    return static_cast<const T *>(ptr) + int64_t(kv_head) * st.head + int64_t(b) * st.batch;
}

template <typename T>
__device__ __forceinline__ KvRows<T> kv_rows(const FwdParams &p, const void *ptr,
                                             const TensorStrides &st, const Sequence &s, int b,
                                             int kv_head) {
    KvRows<T> r;
    r.seq_stride = st.seq;
    r.page_stride = st.batch;
    r.page_size = p.page_size;
    r.page_div = p.page_div;
    r.num_pages = p.num_pages;
    if (p.block_table != nullptr) {
        r.table = p.block_table + int64_t(b) * p.max_pages_per_seq;
        r.base = static_cast<const T *>(ptr) + int64_t(kv_head) * st.head;
    } else {
        r.table = nullptr;
        r.base = dense_head_base<T>(ptr, st, b, kv_head) + s.k_row0 * st.seq;
    }
    return r;
}

}  // namespace fmha
