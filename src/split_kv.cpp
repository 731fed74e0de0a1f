#include "split_kv.h"

#include <algorithm>
#include <climits>

#include "errors.h"
#include "fwd_params.h"
#include "plan.h"

namespace fmha {

// With rows x heads <= 2^31-1 (check_split_kv), splits <= kMaxSplits and
// head_dim_v <= 512, the fp32 partials stay far below 2^64 bytes.
static_assert(uint64_t(INT_MAX) * kMaxSplits * 512 * sizeof(float) < (uint64_t(1) << 62),
              "split_workspace's products cannot overflow");

fmha_status check_split_kv(const Problem &p, int splits) {
    if (splits <= 1) return FMHA_STATUS_SUCCESS;
    const int64_t rows = p.q_rows();
    if (rows > INT_MAX / p.num_q_heads)  // divided: the product may not fit 64 bits
        return fail(FMHA_STATUS_NOT_SUPPORTED,
                    "descriptor.num_splits gives %d splits: their combine indexes the (query row, "
                    "head) pairs in one grid dimension, and %lld query rows x %lld num_q_heads "
                    "is more than 2^31-1",
                    splits, (long long)rows, (long long)p.num_q_heads);
    return FMHA_STATUS_SUCCESS;
}

SplitWorkspace split_workspace(const Problem &p, int splits) {
    SplitWorkspace w;
    if (splits <= 1) return w;
    const uint64_t rows = uint64_t(p.q_rows()) * p.num_q_heads * splits;
    w.partial_o_bytes = (rows * p.head_dim_v * sizeof(float) + 255) / 256 * 256;
    w.partial_lse_bytes = (rows * sizeof(float) + 255) / 256 * 256;
    return w;
}

SplitPartials split_partials(const Problem &p, int splits, void *workspace) {
    SplitPartials parts;
    if (splits <= 1) return parts;
    parts.o = static_cast<float *>(workspace);
    parts.lse = reinterpret_cast<float *>(static_cast<char *>(workspace) +
                                          split_workspace(p, splits).partial_o_bytes);
    return parts;
}

// A team whose every thread loads at most 4 parts keeps all of them in flight
// at once (kernel-notes d52); one CTA per (row, head) before left 3/4 of its
// threads idle with 2 parts at hd128, and 1024-2048 rows x heads ran in 2-3
// rounds of CTAs next to the decode grid (combine 3.4 us at 256 pairs, 4.9 at
// 1024, 7.2 at 2048; ncu).
int combine_team(int64_t head_dim, int parts) {
    const int chunks = static_cast<int>(head_dim / 4);
    int team = (chunks + 31) / 32 * 32;
    // At most the CTA: a team of 96 (merge head_dim 264-384) doubled to 192
    // would leave combine_blocks 0 teams per CTA (a division by zero).
    while (team < kCombineThreads && parts > 4 * (team / chunks))
        team = std::min(2 * team, kCombineThreads);
    return team;
}

unsigned combine_blocks(int64_t pairs, int team) {
    const int64_t per_cta = kCombineThreads / team;
    return static_cast<unsigned>((pairs + per_cta - 1) / per_cta);
}

// Entry points by [bf16][team 32, 64, 128]: one team of 128 keeps the
// unsuffixed name (the code of before teams).
static const char *team_name(const char *const (&names)[2][3], fmha_dtype dtype, int team) {
    return names[dtype == FMHA_DTYPE_BF16][team == 32 ? 0 : team == 64 ? 1 : 2];
}

const char *split_combine_kernel_name(fmha_dtype dtype, int team) {
    static const char *const kNames[2][3] = {
        {"fmha_combine_splits_fp16_team32", "fmha_combine_splits_fp16_team64",
         "fmha_combine_splits_fp16"},
        {"fmha_combine_splits_bf16_team32", "fmha_combine_splits_bf16_team64",
         "fmha_combine_splits_bf16"}};
    return team_name(kNames, dtype, team);
}

const char *merge_kernel_name(fmha_dtype dtype, int team) {
    static const char *const kNames[2][3] = {
        {"fmha_merge_fp16_team32", "fmha_merge_fp16_team64", "fmha_merge_fp16"},
        {"fmha_merge_bf16_team32", "fmha_merge_bf16_team64", "fmha_merge_bf16"}};
    return team_name(kNames, dtype, team);
}

fmha_status launch_split_combine(const fmha_plan &plan, const fmha_tensors &t,
                                 const SplitPartials &parts, int splits, const FwdParams &fwd,
                                 CUstream stream) {
    const Problem &p = plan.problem;
    // Packed (varlen) rows are one batch of total_q rows.
    SplitCombineParams cp{};
    CombineShape &sh = cp.shape;
    const int64_t heads = p.num_q_heads, d = p.head_dim_v, q_rows = p.q_rows();
    const int64_t batch = p.varlen_q ? 1 : p.batch;
    const int64_t seqlen = p.varlen_q ? p.total_q : p.seqlen_q;
    cp.o_parts = parts.o;
    cp.lse_parts = parts.lse;
    cp.o_part_step = q_rows * heads * d;
    cp.lse_part_step = heads * q_rows;
    sh.part_stride = {seqlen * heads * d, heads * d, d};
    sh.lse_part_stride = {seqlen, 1, q_rows};
    sh.o = t.o;
    sh.o_stride = {p.o.batch, p.o.seq, p.o.head};
    sh.lse = p.write_lse ? t.lse : nullptr;
    sh.lse_stride = {fwd.lse_batch_stride, 1, fwd.lse_head_stride};
    sh.sinks = p.sinks ? t.sinks : nullptr;
    sh.row_limit = p.varlen_q ? t.cu_seqlens_q + p.batch : nullptr;
    sh.rows = batch * seqlen;
    sh.seqlen = static_cast<int32_t>(seqlen);
    sh.heads = static_cast<int32_t>(heads);
    sh.head_dim = static_cast<int32_t>(d);
    sh.num_parts = splits;
    // At most one CTA per (row, head): at most 2^31-1 (check_split_kv, at plan
    // time). The plan chose the team and loaded its entry point.
    const unsigned blocks = combine_blocks(sh.rows * heads, plan.choice.combine_team);
    return launch_dependent(*plan.drv, plan.combine_dependent, plan.combine_function, blocks, 1, 1,
                            kCombineThreads, 0, stream, &cp, plan.choice.combine_kernel_name);
}

}  // namespace fmha
