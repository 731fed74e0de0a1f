// The portable mma.sync kernel family: configuration and launch.
#include <climits>

#include "errors.h"
#include "fwd_params.h"
#include "kernel_select.h"
#include "kernels/tile_traits.h"
#include "plan.h"

namespace fmha {
namespace {

// The `_paged` entry points carry the paged copy path (and only they do);
// the `_short` ones the 64-row query block (hd256 has only that block).
const char *kernel_name(fmha_dtype dtype, int64_t head_dim, bool paged, bool short_queries) {
    static const char *const kNames[2][2][2][4] = {
        {{{"fmha_fwd_portable_fp16_hd64", "fmha_fwd_portable_fp16_hd96",
           "fmha_fwd_portable_fp16_hd128", "fmha_fwd_portable_fp16_hd256"},
          {"fmha_fwd_portable_paged_fp16_hd64", "fmha_fwd_portable_paged_fp16_hd96",
           "fmha_fwd_portable_paged_fp16_hd128", "fmha_fwd_portable_paged_fp16_hd256"}},
         {{"fmha_fwd_portable_short_fp16_hd64", "fmha_fwd_portable_short_fp16_hd96",
           "fmha_fwd_portable_short_fp16_hd128", "fmha_fwd_portable_fp16_hd256"},
          {"fmha_fwd_portable_paged_short_fp16_hd64", "fmha_fwd_portable_paged_short_fp16_hd96",
           "fmha_fwd_portable_paged_short_fp16_hd128", "fmha_fwd_portable_paged_fp16_hd256"}}},
        {{{"fmha_fwd_portable_bf16_hd64", "fmha_fwd_portable_bf16_hd96",
           "fmha_fwd_portable_bf16_hd128", "fmha_fwd_portable_bf16_hd256"},
          {"fmha_fwd_portable_paged_bf16_hd64", "fmha_fwd_portable_paged_bf16_hd96",
           "fmha_fwd_portable_paged_bf16_hd128", "fmha_fwd_portable_paged_bf16_hd256"}},
         {{"fmha_fwd_portable_short_bf16_hd64", "fmha_fwd_portable_short_bf16_hd96",
           "fmha_fwd_portable_short_bf16_hd128", "fmha_fwd_portable_bf16_hd256"},
          {"fmha_fwd_portable_paged_short_bf16_hd64", "fmha_fwd_portable_paged_short_bf16_hd96",
           "fmha_fwd_portable_paged_short_bf16_hd128", "fmha_fwd_portable_paged_bf16_hd256"}}}};
    int d;
    switch (head_dim) {
    case 64: d = 0; break;
    case 96: d = 1; break;
    case 128: d = 2; break;
    case 256: d = 3; break;
    default: return nullptr;
    }
    return kNames[dtype == FMHA_DTYPE_BF16][short_queries][paged][d];
}

fmha_status portable_launch(const fmha_plan &plan, const fmha_tensors &t, void *,
                            CUstream stream) {
    const KernelChoice &c = plan.choice;
    FwdParams params = make_fwd_params(plan.problem, t, c.tile_m);
    // One CTA per (query block, head, batch), flattened into x.
    const int64_t ctas = int64_t(params.num_m_blocks) * params.num_q_heads * params.batch;
    return launch(*plan.drv, plan.function, static_cast<unsigned>(ctas), 1, 1, c.threads,
                  c.smem_bytes, stream, &params, c.kernel_name);
}

}  // namespace

fmha_status portable_configure(const Problem &p, KernelChoice *out) {
    if (p.head_dim == 512 || p.num_splits > 1)
        return fail(FMHA_STATUS_NOT_SUPPORTED,
                    "head_dim %lld / num_splits %d: head_dim 512 and split-KV run on the "
                    "decode and Hopper kernels",
                    (long long)p.head_dim, p.num_splits);
    // At most 64 query rows per sequence (multi-token decode): the 64-row
    // block. A 128-row one wasted half its MMAs and ran T=32 over pages of
    // 16 1.8x slower (kernel notes p9).
    const bool short_queries = p.seqlen_q <= kPortableShortRows;
    const int head_dim = static_cast<int>(p.head_dim);
    const TileShape tile = portable_tile(head_dim, short_queries, p.paged_kv);
    const int64_t m_blocks = (p.seqlen_q + tile.block_m - 1) / tile.block_m;
    // In double: the product may not fit 64 bits.
    if (double(m_blocks) * double(p.num_q_heads) * double(p.batch) > double(INT_MAX))
        return fail(FMHA_STATUS_NOT_SUPPORTED,
                    "batch %lld x num_q_heads %lld x ceil(seqlen_q/%d) %lld exceeds 2^31-1 CTAs",
                    (long long)p.batch, (long long)p.num_q_heads, tile.block_m,
                    (long long)m_blocks);
    KernelChoice c;
    c.family = FMHA_KERNEL_PORTABLE;
    c.image_family = "portable";
    c.kernel_name = kernel_name(p.dtype, p.head_dim, p.paged_kv, short_queries);
    c.tile_m = tile.block_m;
    c.tile_n = tile.block_n;
    c.threads = tile.threads;
    c.smem_bytes = portable_smem_bytes(head_dim, short_queries, p.paged_kv);
    c.workspace_bytes = 0;
    c.launch = portable_launch;
    *out = c;
    return FMHA_STATUS_SUCCESS;
}

}  // namespace fmha
