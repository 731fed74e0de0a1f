// The Hopper (sm_90a) TMA + wgmma kernel family: configuration and launch.
#include <algorithm>
#include <climits>
#include <cstring>

#include "errors.h"
#include "fwd_params.h"
#include "kernel_select.h"
#include "kernels/params.h"
#include "kernels/tile_traits.h"
#include "plan.h"
#include "split_kv.h"
#include "tensor_map.h"

static_assert(sizeof(fmha::TmaDescriptor) == sizeof(CUtensorMap), "CUtensorMap layout");

namespace fmha {
namespace {

// Packing pays while a query is short enough that its rows alone would leave
// most of a 128-row M tile empty, and K/V would be read once per query head.
// The TMA box takes 64 / P positions per warpgroup for the group padded to a
// power of two P, so groups up to 64; hd512's 64-row blocks also take P = 128
// as two boxes of one position (sm90_max_packed_group). Packed (varlen) Q
// packs the same way; its rows are stored row by row.
constexpr int64_t kSm90PackMaxQueryLen = 256;

// Entry points of fmha_fwd_sm90.cu: [bf16][head dim][Sm90Shape][score modifiers].
// hd64's row-mask shape with score modifiers is the default tile's scoremod
// entry point, whose masks take per-row bounds already.
const char *kernel_name(fmha_dtype dtype, int64_t head_dim, int shape, bool score_mods) {
    static const char *const kNames[2][5][5][2] = {
        {{{"fmha_fwd_sm90_fp16_hd64", "fmha_fwd_sm90_fp16_hd64_scoremod"}, {nullptr, nullptr},
          {nullptr, "fmha_fwd_sm90_fp16_hd64_narrow_scoremod"}, {nullptr, nullptr},
          {"fmha_fwd_sm90_fp16_hd64_rowmask", "fmha_fwd_sm90_fp16_hd64_scoremod"}},
         {{"fmha_fwd_sm90_fp16_hd96", "fmha_fwd_sm90_fp16_hd96_scoremod"}, {nullptr, nullptr},
          {nullptr, nullptr}, {nullptr, nullptr}, {nullptr, nullptr}},
         {{"fmha_fwd_sm90_fp16_hd128", "fmha_fwd_sm90_fp16_hd128_scoremod"},
          {"fmha_fwd_sm90_fp16_hd128_wide", "fmha_fwd_sm90_fp16_hd128_wide_scoremod"},
          {nullptr, nullptr}, {nullptr, nullptr}, {nullptr, nullptr}},
         {{"fmha_fwd_sm90_fp16_hd256", "fmha_fwd_sm90_fp16_hd256_scoremod"}, {nullptr, nullptr},
          {nullptr, nullptr}, {nullptr, nullptr}, {nullptr, nullptr}},
         {{"fmha_fwd_sm90_fp16_hd512", "fmha_fwd_sm90_fp16_hd512_scoremod"}, {nullptr, nullptr},
          {nullptr, nullptr},
          {"fmha_fwd_sm90_fp16_hd512_shared_s", "fmha_fwd_sm90_fp16_hd512_shared_s_scoremod"},
          {nullptr, nullptr}}},
        {{{"fmha_fwd_sm90_bf16_hd64", "fmha_fwd_sm90_bf16_hd64_scoremod"}, {nullptr, nullptr},
          {nullptr, "fmha_fwd_sm90_bf16_hd64_narrow_scoremod"}, {nullptr, nullptr},
          {"fmha_fwd_sm90_bf16_hd64_rowmask", "fmha_fwd_sm90_bf16_hd64_scoremod"}},
         {{"fmha_fwd_sm90_bf16_hd96", "fmha_fwd_sm90_bf16_hd96_scoremod"}, {nullptr, nullptr},
          {nullptr, nullptr}, {nullptr, nullptr}, {nullptr, nullptr}},
         {{"fmha_fwd_sm90_bf16_hd128", "fmha_fwd_sm90_bf16_hd128_scoremod"},
          {"fmha_fwd_sm90_bf16_hd128_wide", "fmha_fwd_sm90_bf16_hd128_wide_scoremod"},
          {nullptr, nullptr}, {nullptr, nullptr}, {nullptr, nullptr}},
         {{"fmha_fwd_sm90_bf16_hd256", "fmha_fwd_sm90_bf16_hd256_scoremod"}, {nullptr, nullptr},
          {nullptr, nullptr}, {nullptr, nullptr}, {nullptr, nullptr}},
         {{"fmha_fwd_sm90_bf16_hd512", "fmha_fwd_sm90_bf16_hd512_scoremod"}, {nullptr, nullptr},
          {nullptr, nullptr},
          {"fmha_fwd_sm90_bf16_hd512_shared_s", "fmha_fwd_sm90_bf16_hd512_shared_s_scoremod"},
          {nullptr, nullptr}}}};
    const int index = head_dim == 64 ? 0 : head_dim == 96 ? 1 : head_dim == 128 ? 2
                    : head_dim == 256 ? 3 : head_dim == 512 ? 4 : -1;
    if (index < 0 || shape < 0 || shape > 4) return nullptr;
    return kNames[dtype == FMHA_DTYPE_BF16][index][shape][score_mods];
}

// Entry points of the plain tiles' variants (Sm90Variant in
// kernels/tile_traits.h): `_varlen` (default tiles) walks only the real query
// blocks of packed Q (sm90_compact_walk), `_paged16` (default tiles, and
// hd128's wide one) reads a paged cache's K and V in one TMA box each per
// 16-row chunk (sm90_paged_chunk_boxes). nullptr where the variant was not
// built (`_gather`: gather_kernel_name).
const char *variant_kernel_name(fmha_dtype dtype, int64_t head_dim, int shape,
                                Sm90Variant variant) {
    // [variant - 1][bf16][hd64, hd96, hd128, hd256, hd128's wide tile]
    static const char *const kNames[2][2][5] = {
        {{"fmha_fwd_sm90_fp16_hd64_varlen", "fmha_fwd_sm90_fp16_hd96_varlen",
          "fmha_fwd_sm90_fp16_hd128_varlen", "fmha_fwd_sm90_fp16_hd256_varlen", nullptr},
         {"fmha_fwd_sm90_bf16_hd64_varlen", "fmha_fwd_sm90_bf16_hd96_varlen",
          "fmha_fwd_sm90_bf16_hd128_varlen", "fmha_fwd_sm90_bf16_hd256_varlen", nullptr}},
        {{nullptr, nullptr, "fmha_fwd_sm90_fp16_hd128_paged16", "fmha_fwd_sm90_fp16_hd256_paged16",
          "fmha_fwd_sm90_fp16_hd128_wide_paged16"},
         {nullptr, nullptr, "fmha_fwd_sm90_bf16_hd128_paged16", "fmha_fwd_sm90_bf16_hd256_paged16",
          "fmha_fwd_sm90_bf16_hd128_wide_paged16"}}};
    const int index = shape == kSm90WideKeys ? (head_dim == 128 ? 4 : -1)
                    : shape != kSm90Default  ? -1
                    : head_dim == 64         ? 0
                    : head_dim == 96         ? 1
                    : head_dim == 128        ? 2
                    : head_dim == 256        ? 3
                                             : -1;
    if (index < 0 || variant == Sm90Variant::kPlain) return nullptr;
    return kNames[static_cast<int>(variant) - 1][dtype == FMHA_DTYPE_BF16][index];
}

// `_gather` entry points (Sm90Variant::kPagedGather): the rows of the pages
// sm90_pages_gathered names, plain or with score modifiers (`_scoremod`), on
// the default tiles and at hd512 on both split-D tiles (default and shared
// S); nullptr otherwise.
const char *gather_kernel_name(fmha_dtype dtype, int64_t head_dim, int shape, bool score_mods) {
    if (head_dim == 512) {
        if (shape != kSm90Default && shape != kSm90SharedS) return nullptr;
        // [bf16][score_mods][shared S]
        static const char *const kHd512[2][2][2] = {
            {{"fmha_fwd_sm90_fp16_hd512_gather", "fmha_fwd_sm90_fp16_hd512_shared_s_gather"},
             {"fmha_fwd_sm90_fp16_hd512_gather_scoremod",
              "fmha_fwd_sm90_fp16_hd512_shared_s_gather_scoremod"}},
            {{"fmha_fwd_sm90_bf16_hd512_gather", "fmha_fwd_sm90_bf16_hd512_shared_s_gather"},
             {"fmha_fwd_sm90_bf16_hd512_gather_scoremod",
              "fmha_fwd_sm90_bf16_hd512_shared_s_gather_scoremod"}}};
        return kHd512[dtype == FMHA_DTYPE_BF16][score_mods][shape == kSm90SharedS];
    }
    if (shape != kSm90Default) return nullptr;
    // [bf16][score_mods][hd64, hd96, hd128, hd256]
    static const char *const kNames[2][2][4] = {
        {{"fmha_fwd_sm90_fp16_hd64_gather", "fmha_fwd_sm90_fp16_hd96_gather",
          "fmha_fwd_sm90_fp16_hd128_gather", "fmha_fwd_sm90_fp16_hd256_gather"},
         {"fmha_fwd_sm90_fp16_hd64_gather_scoremod", "fmha_fwd_sm90_fp16_hd96_gather_scoremod",
          "fmha_fwd_sm90_fp16_hd128_gather_scoremod", "fmha_fwd_sm90_fp16_hd256_gather_scoremod"}},
        {{"fmha_fwd_sm90_bf16_hd64_gather", "fmha_fwd_sm90_bf16_hd96_gather",
          "fmha_fwd_sm90_bf16_hd128_gather", "fmha_fwd_sm90_bf16_hd256_gather"},
         {"fmha_fwd_sm90_bf16_hd64_gather_scoremod", "fmha_fwd_sm90_bf16_hd96_gather_scoremod",
          "fmha_fwd_sm90_bf16_hd128_gather_scoremod", "fmha_fwd_sm90_bf16_hd256_gather_scoremod"}}};
    const int index = head_dim == 64 ? 0 : head_dim == 96 ? 1 : head_dim == 128 ? 2
                    : head_dim == 256 ? 3 : -1;
    if (index < 0) return nullptr;
    return kNames[dtype == FMHA_DTYPE_BF16][score_mods][index];
}

// TMA cannot broadcast: a zero stride over an extent > 1 needs the portable
// kernel. Returns the name of such a stride of `s`, or nullptr.
const char *broadcast_stride(const fmha_strides &s, int64_t seqlen, int64_t heads,
                             int64_t batch) {
    if (s.seq == 0 && seqlen > 1) return "seq";
    if (s.head == 0 && heads > 1) return "head";
    if (s.batch == 0 && batch > 1) return "batch";
    return nullptr;
}

int32_t log2_of(int64_t power_of_two) {
    int32_t s = 0;
    while ((int64_t(1) << s) < power_of_two) ++s;
    return s;
}

// Heads the tiles walk: KV heads when their query heads are packed.
int64_t sm90_tile_heads(const Problem &p) {
    return sm90_packed_heads(p) > 1 ? p.num_kv_heads : p.num_q_heads;
}

// Query blocks per (batch, tile head): the packed heads' rows together.
int64_t sm90_m_blocks(const Problem &p, int block_m) {
    return (p.seqlen_q * sm90_packed_heads(p) + block_m - 1) / block_m;
}

// Keys one query row sees under a left window (its right edge is the
// diagonal under a causal mask), or -1 without one.
int64_t window_keys(const Problem &p) {
    if (p.window_left < 0) return -1;
    const int64_t right = p.mask != FMHA_MASK_NONE ? 0 : std::max(p.window_right, 0);
    return p.window_left + right + 1;
}

// The most keys a block of `positions` query positions sees: seqlen_k, or
// fewer under a left window (its span plus the block's other rows).
int64_t keys_per_block(const Problem &p, int64_t positions) {
    if (window_keys(p) < 0) return p.seqlen_k;
    return std::min<int64_t>(p.seqlen_k, window_keys(p) + positions - 1);
}

// Measured on the H200 (docs/kernel-notes.md, v3-v7): a persistent grid
// pays off where the key loop is short and per-tile setup weighs most
// (seqlen_k <= 2048, with or without a causal mask); on long rows one tile
// per CTA was faster. hd64's 192-row blocks are the fewest per head, so one
// CTA per block pays its fill and epilogue most: its grid stays persistent
// up to 4096 keys (h14: +3.9% full, +2.8% causal at s4096; hd256 causal lost
// 1.5% with the same bound). So does hd128's, on its 128-key tile rather than
// the wide one (h17: +4.2% full, +5.9% causal at s4096; the wide tile on a
// persistent grid lost 3-34% on causal rows of 8192-16384 keys). A left
// window makes every key loop short whatever seqlen_k (h6, B1 H32/8 S8192
// causal: windows of 128-1024 keys ran 1.33-1.59x faster with this grid and
// the 128-key tile together).
// The FMHA_SM90_TUNE_* macros override the bounds for tuning runs only.
#ifdef FMHA_SM90_TUNE_PERSISTENT_MAX_KEYS
constexpr int64_t kSm90PersistentMaxKeys = FMHA_SM90_TUNE_PERSISTENT_MAX_KEYS;
#else
constexpr int64_t kSm90PersistentMaxKeys = 2048;
#endif
#ifdef FMHA_SM90_TUNE_PERSISTENT_MAX_KEYS_HD64
constexpr int64_t kSm90PersistentMaxKeysHd64 = FMHA_SM90_TUNE_PERSISTENT_MAX_KEYS_HD64;
#else
constexpr int64_t kSm90PersistentMaxKeysHd64 = 4096;
#endif
// hd128: the wide tile's bound (tile_traits.h), so the persistent grid always
// runs the 128-key tile, whose O has its own buffer.
constexpr int64_t kSm90PersistentMaxKeysHd128 = kSm90WideKeysAbove;

bool use_persistent_grid(const Problem &p) {
    const int64_t bound = p.head_dim == 64    ? kSm90PersistentMaxKeysHd64
                        : p.head_dim == 128 ? kSm90PersistentMaxKeysHd128
                                            : kSm90PersistentMaxKeys;
    return keys_per_block(p, 128) <= bound;
}

// Causal tiles differ in length, so the persistent grid walks them in
// groups of heads whose K and V fit a slice of L2, longest blocks first
// (see decode_tile in fmha_fwd_sm90.cu). The slice was tuned on the H200:
// 16 MB for hd64's 192-row tiles, 4 MB for the 128-row ones (v7).
int32_t persistent_head_group(const Problem &p, int64_t tile_heads) {
    if (p.mask == FMHA_MASK_NONE || !use_persistent_grid(p)) return 0;
    const int64_t l2_slice = (p.head_dim == 64 ? 16 : 4) << 20;
    const int64_t kv_bytes_per_head = std::max<int64_t>(1, p.seqlen_k * (p.head_dim + p.head_dim_v) * 2);
    // At most every (batch, head): a group's tiles then never exceed total_tiles.
    const int64_t heads = p.batch * tile_heads;
    return static_cast<int32_t>(std::clamp<int64_t>(l2_slice / kv_bytes_per_head, 1, heads));
}

// The launch's four TMA maps (Q, K, V, O) into `maps`; with `maps` and `t`
// null (at plan time) only TMA's limits on them are checked.
fmha_status sm90_tensor_maps(const Driver *drv, const Problem &p, const KernelChoice &c,
                             const fmha_tensors *t, CUtensorMap *maps) {
    auto map = [&](int i) { return maps != nullptr ? &maps[i] : nullptr; };
    // Packed (varlen) tensors are mapped as one batch of all their rows; the
    // kernel offsets each sequence by its cu_seqlens entry. A map needs at
    // least one row even when no sequence has keys (none is then read).
    const int64_t q_rows = p.varlen_q ? p.total_q : p.seqlen_q;
    const int64_t q_batch = p.varlen_q ? 1 : p.batch;
    const int64_t k_rows = p.varlen_k ? std::max<int64_t>(p.total_k, 1) : p.seqlen_k;
    const int64_t k_batch = p.varlen_k ? 1 : p.batch;
    const Sm90Schedule &sched = c.sm90;
    const int64_t group = sched.box_group > 1 ? p.num_q_heads / p.num_kv_heads : 1;
    FMHA_TRY(encode_grouped_tensor_map(drv, map(0), p.dtype, t ? t->q : nullptr, p.head_dim,
                                       q_rows, p.num_q_heads, q_batch, p.q, group,
                                       sched.box_group, c.tile_m, "q"));
    // A paged pool is mapped as (dim, row in page, head, page), read in
    // boxes of a page chunk; a contiguous cache in boxes of a key tile.
    const int64_t k_map_rows = p.paged_kv ? p.page_size : k_rows;
    const int64_t k_map_outer = p.paged_kv ? p.num_pages : k_batch;
    const HeadFold fold = sched.k_head_fold;
    const void *k = t ? t->k : nullptr, *v = t ? t->v : nullptr;
    if (sched.k_box_rows == 0) {
        // `_gather`: K/V rows are copied from their addresses, no maps.
    } else if (fold != HeadFold::kNone) {  // `_paged16`: one box per 16-row chunk, all its columns
        FMHA_TRY(encode_group_boxed_tensor_map(drv, map(1), p.dtype, k, p.head_dim, k_map_rows,
                                               p.num_kv_heads, k_map_outer, p.k,
                                               sched.k_box_rows, fold, "k"));
        FMHA_TRY(encode_column_boxed_tensor_map(drv, map(2), p.dtype, v, p.head_dim_v,
                                                k_map_rows, p.num_kv_heads, k_map_outer, p.v,
                                                sched.k_box_rows, "v"));
    } else {
        FMHA_TRY(encode_tensor_map(drv, map(1), p.dtype, k, p.head_dim, k_map_rows,
                                   p.num_kv_heads, k_map_outer, p.k, sched.k_box_rows, "k"));
        FMHA_TRY(encode_tensor_map(drv, map(2), p.dtype, v, p.head_dim_v, k_map_rows,
                                   p.num_kv_heads, k_map_outer, p.v, sched.k_box_rows, "v"));
    }
    // Each consumer warpgroup stores its own 64 rows (dense only: packed
    // rows are stored row by row).
    return encode_grouped_tensor_map(drv, map(3), p.dtype, t ? t->o : nullptr, p.head_dim_v,
                                     q_rows, p.num_q_heads, q_batch, p.o, group, sched.box_group,
                                     64, "o");
}

fmha_status sm90_launch(const fmha_plan &plan, const fmha_tensors &t, void *workspace,
                        CUstream stream) {
    const Problem &p = plan.problem;
    const KernelChoice &c = plan.choice;
    Sm90Params params;
    std::memset(&params, 0, sizeof params);
    auto *maps = reinterpret_cast<CUtensorMap *>(&params);
    if (p.varlen_q && p.total_q == 0) return FMHA_STATUS_SUCCESS;  // no query rows at all
    FMHA_TRY(sm90_tensor_maps(plan.drv, p, c, &t, maps));
    const HeadFold fold = c.sm90.k_head_fold;
    if (c.sm90.k_box_rows > 0 && fold != HeadFold::kNone) {  // `_paged16`
        params.k_head_boxes = fold == HeadFold::kColumns ? int32_t(p.head_dim / 64) : 0;
        params.k_head_groups = fold == HeadFold::kGroups ? int32_t(p.page_size / 8) : 0;
    }
    const Sm90Schedule &sched = c.sm90;
    params.fwd = make_fwd_params(p, t, c.tile_m);
    params.fwd.num_m_blocks = sched.num_m_blocks;
    params.group_shift = sched.group_shift;
    params.tile_heads = sched.tile_heads;
    params.tiles_per_split = sched.tiles_per_split;
    params.num_splits = c.num_splits;
    params.total_tiles = sched.total_tiles;
    params.persistent = sched.persistent;
    params.compact_batch = sched.compact_batch;
    params.head_group = sched.head_group;
    params.div_tiles_per_split = sched.div_tiles_per_split;
    params.tile_div = sched.tile_div;
    const SplitPartials parts = split_partials(p, c.num_splits, workspace);
    params.partial_o = parts.o;
    params.partial_lse = parts.lse;
    params.q_rows = p.q_rows();
    if (p.paged_kv) {
        params.paged_chunk_rows = sched.k_box_rows;
        params.paged_chunks = sched.paged_chunks;
    }
    FMHA_TRY(launch(*plan.drv, plan.function, sched.ctas, 1, 1, c.threads, c.smem_bytes, stream,
                    &params, c.kernel_name));
    if (c.num_splits == 1) return FMHA_STATUS_SUCCESS;
    return launch_split_combine(plan, t, parts, c.num_splits, params.fwd, stream);
}

// hd128's wide tile pays on long key loops (seqlen_k is the longest
// sequence's key count under varlen). A left window shortens every loop, and
// its two edges waste more of a wide tile: measured on the H200 (bench_serving
// features, h6), a 4096-key window ran 7% faster on the 128-key tile, so
// windowed loops take the wide tile only from twice the length.
bool sm90_wide_keys(const Problem &p) {
    const int64_t keys = keys_per_block(p, 128);
    return window_keys(p) < 0 ? keys > kSm90WideKeysAbove : keys >= 2 * kSm90WideKeysAbove;
}

// hd64 under a narrow left window takes 128-row blocks: a 192-row block sees
// its window plus 191 keys, a 128-row one 64 fewer, for the same window per
// row (h8: window 128 +3.5%, 512 +1%; a 2048-key window lost 11% on them, so
// the bound stays at 1024 keys a 128-row block sees).
// FMHA_SM90_TUNE_NARROW_ROWS_MAX_KEYS overrides it for tuning runs only.
#ifdef FMHA_SM90_TUNE_NARROW_ROWS_MAX_KEYS
constexpr int64_t kSm90NarrowRowsMaxKeys = FMHA_SM90_TUNE_NARROW_ROWS_MAX_KEYS;
#else
constexpr int64_t kSm90NarrowRowsMaxKeys = 1024;
#endif

// hd512's two consumers share S (each computes half of the head dim) where
// a KV head has 64 or more query rows, so every block's rows are all used
// and the S GEMM is what bounds it; with fewer, the redundant S measured
// faster (h9b: 128 heads 4-6% faster shared, 16 heads 1-5% slower).
constexpr int64_t kSm90SharedSMinRows = 64;

bool sm90_shared_s(const Problem &p) {
    return p.head_dim == 512 &&
           p.seqlen_q * (p.num_q_heads / p.num_kv_heads) >= kSm90SharedSMinRows;
}

// hd64 causal prefill over short key sequences: most of its tiles cross the
// diagonal, and the entry point that masks them with per-row column bounds
// (one compare per score) ran s512 +7.6%, s1024 +4.9%, s2048 +2.9% against
// the per-score form (h15). The same masks in the plain kernel cost s4096
// causal 0.9% and non-causal rows 1-6%, so it keeps the per-score form.
// FMHA_SM90_TUNE_ROW_MASKS_MAX_KEYS overrides the bound for tuning runs only.
#ifdef FMHA_SM90_TUNE_ROW_MASKS_MAX_KEYS
constexpr int64_t kSm90RowMasksMaxKeys = FMHA_SM90_TUNE_ROW_MASKS_MAX_KEYS;
#else
constexpr int64_t kSm90RowMasksMaxKeys = 2048;
#endif

bool sm90_row_masks(const Problem &p) {
    return p.head_dim == 64 && p.mask != FMHA_MASK_NONE && p.seqlen_k <= kSm90RowMasksMaxKeys;
}

bool sm90_narrow_rows(const Problem &p) {
    return p.head_dim == 64 && window_keys(p) > 0 &&
           keys_per_block(p, 128) <= kSm90NarrowRowsMaxKeys;
}

// Automatic split-KV, only for short queries (up to kSm90PackMaxQueryLen
// positions, where AUTO's other choice is the decode kernel, which splits
// too) whose query blocks fill less than half of the SMs: enough splits to
// fill them, each of at least sm90_min_split_key_tiles key tiles. A split's
// fixed cost (pipeline fill, its share of the combine) is about one tile's
// stream, so short splits pay off where blocks are few. Measured on the H200
// against 4 tiles, on the short-query problems whose count changes (MQA
// decode at 2k-32k keys, T=8-32 with few KV heads; kernel-notes d31, d33):
// hd64, hd96 and hd128 split down to 1 tile (1.14x, 1.16x and 1.19x
// geometric means); hd256 to 2 (1.07x; 1 tile lost up to 5.5% where it
// made 100+ splits); hd512's 32-key tiles keep 4 (2 measured 5-14% slower).
int64_t sm90_min_split_key_tiles(const Problem &p) {
    return p.head_dim == 512 ? 4 : p.head_dim == 256 ? 2 : 1;
}

// At most 64 automatic splits at hd512: every split adds a 2 KB fp32 partial
// O row per query row, which the combine reads back; with 64+ query heads
// that outweighs what the extra CTAs stream. Forced counts 16-128 on MQA
// decode (16-128 heads, 4k-32k keys; kernel-notes d36): 64 splits against
// 128 ran 1.07-1.16x at 16k-32k keys; only 16 heads at 32k keys lost (44.0
// against 42.0 us). Other head dims keep kMaxSplits.
int64_t sm90_max_auto_splits(const Problem &p) {
    return p.head_dim == 512 ? 64 : kMaxSplits;
}

int sm90_auto_splits(const Problem &p, const DeviceLimits &dev, const Sm90Tile &tile,
                     int64_t tiles) {
    if (dev.num_sms <= 0 || p.seqlen_q > kSm90PackMaxQueryLen || tiles * 2 > dev.num_sms)
        return 1;
    // A left window bounds the keys a short query's block sees.
    const int64_t keys = keys_per_block(p, p.seqlen_q);
    const int64_t key_tiles = (keys + tile.block_n - 1) / tile.block_n;
    const int64_t splits = std::min<int64_t>({dev.num_sms / tiles,
                                              key_tiles / sm90_min_split_key_tiles(p),
                                              sm90_max_auto_splits(p)});
    return static_cast<int>(std::max<int64_t>(1, splits));
}

// Packed (varlen) Q on a persistent grid walks only the real query blocks:
// the slot order gives every sequence the longest one's block count, so a
// batch of 532-3953 tokens left 57% of the slots empty, each costing the CTA
// that met it a length lookup, and loaded the busiest CTA 10% above the mean
// (kernel-notes h26). Only the plain order (no causal head groups, no packed
// heads, no split) and up to kSm90CompactMaxBatch sequences, whose block
// counts each CTA sums into shared memory at its start.
bool sm90_compact_walk(const Problem &p, const Sm90Schedule &s) {
    return p.varlen_q && s.persistent && s.head_group == 0 && s.group_shift == 0 &&
           p.batch <= kSm90CompactMaxBatch;
}

// A paged cache read in 16-row chunks (pages of 16, or of 48, 80, ...) makes
// a plain tile's producer issue one TMA box per 64 columns of every chunk:
// 32 boxes per hd128 key tile, and the chunked prefill of 16-row pages ran at
// 0.84 of a contiguous cache where 32-row pages (16 boxes) ran at 0.96-0.98,
// with the pages in order as slow as shuffled (kernel-notes h28). The
// `_paged16` entry points keep each chunk's V columns together in shared
// memory, and each 8-row group's K columns, so one box loads a chunk's V
// and one its K: 16 boxes per tile (h28, h31). K's map folds the KV heads
// into its column pieces or its 8-row groups, which needs a pool laid out
// [page, row, head, dim] or [page, head, row, dim] (group_boxed_head_fold);
// other pools keep the plain kernel. kNone: not `_paged16`.
HeadFold sm90_paged_chunk_boxes(const Problem &p, const Sm90Schedule &s) {
    if (!p.paged_kv || s.k_box_rows != 16 || p.head_dim_v != p.head_dim) return HeadFold::kNone;
    return group_boxed_head_fold(p.k, p.head_dim, p.page_size, p.num_kv_heads);
}

// The tile walk of a plan (everything but the tensors): configure computes it
// once, sm90_launch copies it. `dev.num_sms` is 0 for a support query, whose
// grid size is never used.
Sm90Schedule sm90_schedule(const Problem &p, const DeviceLimits &dev, const Sm90Tile &tile,
                           int splits) {
    Sm90Schedule s;
    s.box_group = sm90_packed_heads(p);
    s.group_shift = log2_of(s.box_group);
    s.num_m_blocks = static_cast<int32_t>(sm90_m_blocks(p, tile.block_m));
    s.tile_heads = static_cast<int32_t>(sm90_tile_heads(p));
    const int64_t tiles_per_split = int64_t(s.num_m_blocks) * s.tile_heads * p.batch;
    const int64_t tiles = tiles_per_split * splits;  // <= INT_MAX: checked by the caller
    s.tiles_per_split = static_cast<int32_t>(tiles_per_split);
    s.total_tiles = static_cast<int32_t>(tiles);
    s.persistent = splits == 1 && use_persistent_grid(p);
    s.head_group = s.persistent ? persistent_head_group(p, s.tile_heads) : 0;
    s.compact_batch = sm90_compact_walk(p, s) ? static_cast<int32_t>(p.batch) : 0;
    // 0 rows: pages gathered row by row (`_gather`).
    s.k_box_rows = !p.paged_kv ? tile.block_n
                 : sm90_pages_gathered(true, p.page_size, static_cast<int>(p.head_dim))
                     ? 0
                     : sm90_paged_chunk_rows(p.page_size, tile.block_n);
    s.paged_chunks = p.paged_kv && s.k_box_rows > 0 ? tile.block_n / s.k_box_rows : 0;
    s.ctas = static_cast<uint32_t>(s.persistent && dev.num_sms > 0 && tiles > dev.num_sms
                                       ? dev.num_sms
                                       : tiles);
    s.div_tiles_per_split = make_fast_divide(s.tiles_per_split);
    s.tile_div = make_tile_divisors(s.num_m_blocks, s.tile_heads, s.head_group);
    return s;
}

}  // namespace

int64_t sm90_packed_heads(const Problem &p) {
    const int64_t group = p.num_q_heads / p.num_kv_heads;
    if (group < 2 || group > sm90_max_packed_group(static_cast<int>(p.head_dim)) ||
        p.seqlen_q > kSm90PackMaxQueryLen)
        return 1;
    int64_t padded = 2;
    while (padded < group) padded *= 2;
    return padded;
}

fmha_status sm90_configure(const Problem &p, const DeviceLimits &dev, KernelChoice *out) {
    // K/V as TMA sees them: a pool of pages, packed rows, or batch x seqlen_k.
    const int64_t q_batch = p.varlen_q ? 1 : p.batch;
    const int64_t k_batch = p.paged_kv ? p.num_pages : p.varlen_k ? 1 : p.batch;
    const int64_t q_rows = p.varlen_q ? p.total_q : p.seqlen_q;
    const int64_t k_rows = p.paged_kv ? p.page_size : p.varlen_k ? p.total_k : p.seqlen_k;
    const struct {
        const char *tensor;
        const char *stride;
    } inputs[] = {{"q_strides", broadcast_stride(p.q, q_rows, p.num_q_heads, q_batch)},
                  {"k_strides", broadcast_stride(p.k, k_rows, p.num_kv_heads, k_batch)},
                  {"v_strides", broadcast_stride(p.v, k_rows, p.num_kv_heads, k_batch)}};
    for (const auto &in : inputs)
        if (in.stride != nullptr)
            return fail(FMHA_STATUS_NOT_SUPPORTED,
                        "descriptor.%s.%s is 0: the Hopper kernel reads through TMA, which "
                        "cannot broadcast a zero stride (the decode and portable kernels can)",
                        in.tensor, in.stride);
    const int d = static_cast<int>(p.head_dim);
    // Windows, softcap and sinks take the entry points that mask window
    // edges, cap scores and add sinks; the plain ones stay as they were.
    const bool score_mods = p.has_window() || p.softcap > 0.0f || p.sinks;
    int shape = d == 128 && sm90_wide_keys(p) ? kSm90WideKeys
              : sm90_narrow_rows(p)            ? kSm90NarrowRows
              : sm90_shared_s(p)               ? kSm90SharedS
              : sm90_row_masks(p)              ? kSm90RowMasks
                                               : kSm90Default;
    // Pages that no TMA box of 16, 32 or 64 rows fits (it must divide both
    // the page and the key tile; every tile is a multiple of 16 keys), and at
    // hd512 pages of no 32-row multiple (h40), are gathered row by row by the
    // `_gather` entry points (plain, or with score modifiers as
    // `_gather_scoremod`): default tiles, and hd512's split-D tiles (h39, h41).
    const bool gathered = sm90_pages_gathered(p.paged_kv, p.page_size, d);
    if (gathered && d != 512) shape = kSm90Default;  // hd512 keeps its default or shared-S tile
    const Sm90Tile tile = sm90_tile(d, shape);
    const int64_t m_blocks = sm90_m_blocks(p, tile.block_m);
    const int64_t tile_heads = sm90_tile_heads(p);
    // One CTA per (tile, split), at most 2^31-1; counted in double, as batch
    // x heads x blocks may not fit 64 bits.
    auto check_ctas = [&](int splits) {
        const double ctas = double(p.batch) * double(tile_heads) * double(m_blocks) * splits;
        if (ctas <= double(INT_MAX)) return FMHA_STATUS_SUCCESS;
        return fail(FMHA_STATUS_NOT_SUPPORTED,
                    "descriptor.batch is %lld: the Hopper kernel would launch batch x %lld tile "
                    "heads x %lld query blocks of %d rows x %d splits = %.0f CTAs, more than "
                    "2^31-1",
                    (long long)p.batch, (long long)tile_heads, (long long)m_blocks,
                    tile.block_m, splits, ctas);
    };
    FMHA_TRY(check_ctas(std::max(p.num_splits, 1)));
    const int64_t tiles = m_blocks * tile_heads * p.batch;  // < 2^31: checked above
    const int splits = p.num_splits > 0 ? p.num_splits : sm90_auto_splits(p, dev, tile, tiles);
    FMHA_TRY(check_ctas(splits));
    FMHA_TRY(check_split_kv(p, splits));
    KernelChoice c;
    c.family = FMHA_KERNEL_HOPPER;
    c.image_family = "sm90";
    c.kernel_name = kernel_name(p.dtype, p.head_dim, shape, score_mods);
    c.tile_m = tile.block_m;
    c.tile_n = tile.block_n;
    c.threads = sm90_threads(d, shape);
    c.smem_bytes = sm90_smem_bytes(tile);
    c.num_splits = splits;
    c.workspace_bytes = split_workspace(p, splits).total();
    if (splits > 1) {
        c.combine_team = combine_team(p.head_dim_v, splits);
        c.combine_kernel_name = split_combine_kernel_name(p.dtype, c.combine_team);
    }
    c.sm90 = sm90_schedule(p, dev, tile, splits);
    // One variant per plan: gathered pages first (their rows have no other
    // path), then the compact walk of packed Q, then `_paged16`.
    const char *walker = score_mods || gathered ? nullptr
                         : variant_kernel_name(p.dtype, p.head_dim, shape,
                                               Sm90Variant::kCompactWalk);
    if (gathered) c.kernel_name = gather_kernel_name(p.dtype, p.head_dim, shape, score_mods);
    if (c.sm90.compact_batch > 0 && walker != nullptr) c.kernel_name = walker;
    else c.sm90.compact_batch = 0;  // only the plain default tiles walk compactly
    const char *chunked =
        score_mods ? nullptr
                   : variant_kernel_name(p.dtype, p.head_dim, shape, Sm90Variant::kPagedChunks16);
    const HeadFold fold = sm90_paged_chunk_boxes(p, c.sm90);  // kNone when gathered
    if (c.sm90.compact_batch == 0 && fold != HeadFold::kNone && chunked != nullptr) {
        c.kernel_name = chunked;
        c.sm90.k_head_fold = fold;
    }
    FMHA_TRY(sm90_tensor_maps(nullptr, p, c, nullptr, nullptr));  // what a run will encode
    c.launch = sm90_launch;
    *out = c;
    return FMHA_STATUS_SUCCESS;
}

}  // namespace fmha
