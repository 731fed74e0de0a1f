// Kernel parameters shared by the host launchers and the device code. Plain
// C++ with fixed-width types so both compilers lay it out identically.
#pragma once
#include <stdint.h>

#include "kernels/fast_divide.h"
#include "kernels/tile_order.h"

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
    // Descriptor version 3: per-sequence lengths and the paged KV cache. The
    // kernels resolve each sequence's lengths and visibility on the device
    // (kernels/sequence.cuh); null pointers mean the dense case.
    const int32_t *cu_seqlens_q;  // [batch + 1]: Q/O rows of each sequence
    const int32_t *cu_seqlens_k;  // [batch + 1]: key counts (and K/V rows unless paged)
    const int32_t *seqused_k;     // [batch]: key counts, overriding the above
    const int32_t *block_table;   // [batch][max_pages_per_seq]: page of each key block
    int32_t page_size;
    FastDivide page_div;          // key index / page_size
    int32_t max_pages_per_seq;
    int32_t num_pages;
    int32_t mask;                 // fmha_mask
    int32_t window_left;          // -1: unbounded
    int32_t window_right;
    int32_t total_q;              // rows of packed Q/O (varlen), for clamping cu_seqlens
    int32_t total_k;              // rows of packed K/V (varlen, unpaged)
    int64_t lse_batch_stride;     // LSE element (b, h, row): b*batch + h*head + row
    int64_t lse_head_stride;
};

// Split-KV decode: the forward parameters plus where partial results go.
struct DecodeParams {
    FwdParams fwd;
    float *partial_o;          // fp32 [split][q_rows][num_q_heads][head_dim], or null
    float *partial_lse;        // fp32 [split][num_q_heads][q_rows]
    int64_t q_rows;            // rows of the packed (or batch x seqlen_q) Q
    int32_t num_splits;
    int32_t q_heads_per_kv;    // rows of one query position packed in the M tile
    int32_t num_m_tiles;       // ceil(seqlen_q * q_heads_per_kv / 16)
    int32_t reserved;
};

// Split-KV on the portable kernel (the `_split` entry points): the forward
// parameters plus where split blockIdx.y's normalized fp32 O and LSE go, in
// the layout of src/split_kv.h, for the combine kernel.
struct PortableSplitParams {
    FwdParams fwd;
    float *partial_o;          // fp32 [split][q_rows][num_q_heads][head_dim]
    float *partial_lse;        // fp32 [split][num_q_heads][q_rows]
    int64_t q_rows;            // rows of the packed (or batch x seqlen_q) Q
    int32_t num_splits;
    int32_t reserved;
};

// Exact combination of partial (O, LSE) results over disjoint key sets: the
// split-KV epilogue and fmha_run_merge. Row (b, s, h) of part p is at
// part_o(p) + b*part_stride.batch + s*part_stride.seq + h*part_stride.head,
// its LSE at part_lse(p) + the same with lse_part_stride.
constexpr int kMaxCombineParts = 128;
// CTAs of this many threads, split into teams of 32-128 threads, one per
// (row, head) (combine_team in split_kv.h; one entry point per team size):
// on the H200, 256-thread CTAs of one team measured 1-2% slower end to end at
// B=8 (kernel-notes.md, d20).
constexpr int kCombineThreads = 128;
struct CombineShape {
    TensorStrides part_stride;
    TensorStrides lse_part_stride;
    void *o;
    TensorStrides o_stride;
    float *lse;                     // merged LSE, or null
    TensorStrides lse_stride;
    const float *sinks;             // [heads] extra denominator logits, or null
    const int32_t *row_limit;       // rows at or past *row_limit are skipped, or null
    int64_t rows;                   // batch * seqlen
    int32_t seqlen;
    int32_t heads;
    int32_t head_dim;
    int32_t num_parts;
};

// fmha_run_merge: the caller's parts, anywhere in memory.
struct CombineParams {
    CombineShape shape;
    const void *o_parts[kMaxCombineParts];
    const float *lse_parts[kMaxCombineParts];
};

// Split-KV: the parts lie in the workspace at a fixed step, so the kernel
// computes their addresses (no indexed parameter loads on the critical path)
// and the launch carries a small parameter block.
struct SplitCombineParams {
    CombineShape shape;
    const float *o_parts;           // part p at o_parts + p * o_part_step
    const float *lse_parts;         // part p at lse_parts + p * lse_part_step
    int64_t o_part_step;
    int64_t lse_part_step;
};

}  // namespace fmha

namespace fmha {

// Opaque CUtensorMap (cuda.h): 128 bytes, 64-byte aligned. The host checks
// the sizes agree.
struct alignas(64) TmaDescriptor {
    uint64_t opaque[16];
};

// Tensor maps address every (batch, head) slice: K and V as dims (dim, seq,
// head, batch), Q and O as (dim, group, seq, head / group, batch) with the
// group of packed query heads (1 unpacked) and boxes 2^group_shift wide in it
// (src/tensor_map.h).
struct Sm90Params {
    TmaDescriptor q, k, v, o;
    FwdParams fwd;
    int32_t total_tiles;  // query blocks x tile heads x batch x splits
    int32_t persistent;   // 1: gridDim.x CTAs loop over the tiles; 0: one tile per CTA
    int32_t head_group;   // 0: each (batch, head)'s blocks in turn; G: G heads' blocks, longest first
    // The query heads of one KV head packed into the M tile, their count
    // padded to 2^group_shift (0: none). Row r of a packed tile is query
    // position r >> group_shift of head tile_head * q_heads_per_kv + g, g = r
    // % 2^group_shift, or padding when g >= q_heads_per_kv (zero Q, never
    // stored), so a short query (decode of a few tokens) fills the tile and
    // K/V are read once per KV head.
    int32_t group_shift;
    int32_t tile_heads;   // heads the tiles walk: KV heads when packed, else query heads
    // Split-KV: total_tiles = tiles_per_split x num_splits; split s takes its
    // share of each query block's key tiles and writes normalized fp32 O and
    // the LSE to the partials (layout in src/split_kv.h), which the combine
    // kernel merges. num_splits 1: O and LSE directly, partials null.
    int32_t tiles_per_split;
    int32_t num_splits;
    FastDivide div_tiles_per_split;  // reciprocals of the tile order's divisors
    TileDivisors tile_div;
    float *partial_o;
    float *partial_lse;
    int64_t q_rows;
    // Paged KV cache: K/V maps are (dim, row in page, KV head, page) and each
    // key tile is read as paged_chunks boxes of paged_chunk_rows rows (a
    // divisor of both the page and the key tile), one per producer lane.
    // 0: contiguous K/V.
    int32_t paged_chunk_rows;
    int32_t paged_chunks;
    // Packed (varlen) Q on a persistent grid: > 0, the batch (at most
    // kSm90CompactMaxBatch), whose real query blocks the CTAs walk without the
    // empty slots of shorter sequences (compact_tile_coord in tile_order.h;
    // each CTA sums the tile counts into static shared memory at its start).
    int32_t compact_batch;
    // `_paged16` K map (encode_group_boxed_tensor_map): KV head h's 16-row
    // chunk at page row r is the box at column box h * k_head_boxes and 8-row
    // group h * k_head_groups + r / 8. Heads packed in a row merge into the
    // column boxes (D / 64, 0); heads outside the rows of a page ([page,
    // head, row, dim]) into the groups (0, page_size / 8).
    int32_t k_head_boxes;
    int32_t k_head_groups;
};

constexpr int kSm90CompactMaxBatch = 256;

}  // namespace fmha
