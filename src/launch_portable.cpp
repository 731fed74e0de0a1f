// The portable mma.sync kernel family: configuration and launch.
#include <algorithm>
#include <climits>
#include <string>

#include "errors.h"
#include "fwd_params.h"
#include "kernel_select.h"
#include "kernels/tile_traits.h"
#include "plan.h"
#include "split_kv.h"

namespace fmha {
namespace {

// Entry points: fmha_fwd_portable[_paged][_short]_{fp16,bf16}_hd{D}[_split].
// The `_paged` ones carry the paged copy path (and only they do); the
// `_short` ones the 64-row query block (hd256 has only that block); the
// `_split` ones write split-KV partials.
const char *kernel_name(fmha_dtype dtype, int64_t head_dim, bool paged, bool short_queries,
                        bool split) {
    static const int kDims[4] = {64, 96, 128, 256};
    // [bf16][short][paged][split][head_dim], built once (thread-safe static).
    struct Names {
        std::string s[2][2][2][2][4];
        Names() {
            for (int b = 0; b < 2; ++b)
                for (int sh = 0; sh < 2; ++sh)
                    for (int pg = 0; pg < 2; ++pg)
                        for (int sp = 0; sp < 2; ++sp)
                            for (int d = 0; d < 4; ++d)
                                s[b][sh][pg][sp][d] =
                                    std::string("fmha_fwd_portable") + (pg ? "_paged" : "") +
                                    (sh && kDims[d] != 256 ? "_short" : "") +
                                    (b ? "_bf16_hd" : "_fp16_hd") + std::to_string(kDims[d]) +
                                    (sp ? "_split" : "");
        }
    };
    static const Names names;
    for (int d = 0; d < 4; ++d)
        if (kDims[d] == head_dim)
            return names.s[dtype == FMHA_DTYPE_BF16][short_queries][paged][split][d].c_str();
    return nullptr;
}

fmha_status portable_launch(const fmha_plan &plan, const fmha_tensors &t, void *workspace,
                            CUstream stream) {
    const Problem &p = plan.problem;
    const KernelChoice &c = plan.choice;
    FwdParams params = make_fwd_params(p, t, c.tile_m);
    // One CTA per (query block, head, batch), flattened into x; splits in y.
    const int64_t ctas = int64_t(params.num_m_blocks) * params.num_q_heads * params.batch;
    if (c.num_splits == 1)
        return launch(*plan.drv, plan.function, static_cast<unsigned>(ctas), 1, 1, c.threads,
                      c.smem_bytes, stream, &params, c.kernel_name);
    if (p.q_rows() == 0) return FMHA_STATUS_SUCCESS;  // packed Q with no rows: nothing to do
    const SplitPartials parts = split_partials(p, c.num_splits, workspace);
    PortableSplitParams sp{};
    sp.fwd = params;
    sp.partial_o = parts.o;
    sp.partial_lse = parts.lse;
    sp.q_rows = p.q_rows();
    sp.num_splits = c.num_splits;
    FMHA_TRY(launch(*plan.drv, plan.function, static_cast<unsigned>(ctas),
                    static_cast<unsigned>(c.num_splits), 1, c.threads, c.smem_bytes, stream, &sp,
                    c.kernel_name));
    return launch_split_combine(plan, t, parts, c.num_splits, params, stream);
}

}  // namespace

// Automatic split-KV where the grid would not fill every SM's two CTA slots
// once (every block runs 128 threads, two CTAs per SM): splits up to that,
// each of at least kPortableMinSplitKeys keys of the longest sequence, at
// most kPortableMaxAutoSplits. Measured on the H200 with the count forced
// (kernel notes p13: B1 H32/8 and H16/2, 64 and 256 positions, 4k and 32k
// keys): the fastest count made 256 CTAs (1.94 per SM) on all 8 problems,
// and at 4096 keys 16 splits of 256 keys beat 8 of 512. One CTA per SM (the
// first rule) was 1.05-1.31x slower. A support query (no SM count) does not
// split.
constexpr int64_t kPortableMinSplitKeys = 256;
constexpr int64_t kPortableMaxAutoSplits = 64;

int portable_auto_splits(const Problem &p, const DeviceLimits &dev, int64_t ctas) {
    if (dev.num_sms <= 0 || ctas <= 0) return 1;
    const int64_t slots = int64_t(dev.num_sms) *
                          portable_min_ctas(static_cast<int>(p.head_dim),
                                            p.seqlen_q <= kPortableShortRows, p.paged_kv);
    const int64_t splits = std::min<int64_t>(
        {slots / ctas, p.seqlen_k / kPortableMinSplitKeys, kPortableMaxAutoSplits});
    return static_cast<int>(std::max<int64_t>(1, splits));
}

fmha_status portable_takes(const Problem &p) {
    if (p.head_dim == 512)
        return fail(FMHA_STATUS_NOT_SUPPORTED,
                    "descriptor.head_dim is %lld: the portable kernel (kernel PORTABLE, from "
                    "the descriptor or FMHA_FORCE_KERNEL) does not run it; the decode and "
                    "Hopper kernels do",
                    (long long)p.head_dim);
    return FMHA_STATUS_SUCCESS;
}

fmha_status portable_configure(const Problem &p, const DeviceLimits &dev, KernelChoice *out) {
    FMHA_TRY(portable_takes(p));
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
    const int64_t ctas = m_blocks * p.num_q_heads * p.batch;
    const int splits = p.num_splits > 0 ? p.num_splits : portable_auto_splits(p, dev, ctas);
    FMHA_TRY(check_split_kv(p, splits));
    KernelChoice c;
    c.family = FMHA_KERNEL_PORTABLE;
    c.image_family = "portable";
    c.kernel_name = kernel_name(p.dtype, p.head_dim, p.paged_kv, short_queries, splits > 1);
    c.tile_m = tile.block_m;
    c.tile_n = tile.block_n;
    c.threads = tile.threads;
    c.smem_bytes = portable_smem_bytes(head_dim, short_queries, p.paged_kv);
    c.num_splits = splits;
    c.workspace_bytes = split_workspace(p, splits).total();
    if (splits > 1) {
        c.combine_team = combine_team(p.head_dim_v, splits);
        c.combine_kernel_name = split_combine_kernel_name(p.dtype, c.combine_team);
    }
    c.launch = portable_launch;
    *out = c;
    return FMHA_STATUS_SUCCESS;
}

}  // namespace fmha
