// Split-KV partial results shared by the kernels that split the keys (decode
// and Hopper): the workspace layout of the fp32 partials and the launch of the
// combine kernel that merges them into O and LSE.
#pragma once
#include <cuda.h>

#include "kernels/params.h"
#include "problem.h"

struct fmha_plan;

namespace fmha {

// Partial O: fp32 [split][q_rows][num_q_heads][head_dim_v]; partial LSE:
// fp32 [split][num_q_heads][q_rows], each 256-byte aligned in the workspace.
struct SplitWorkspace {
    uint64_t partial_o_bytes = 0, partial_lse_bytes = 0;
    uint64_t total() const { return partial_o_bytes + partial_lse_bytes; }
};

SplitWorkspace split_workspace(const Problem &p, int splits);

// Plan-time limits of a split into `splits` parts: the combine launches at
// most one CTA per (query row, head) in grid x (at most 2^31-1), which also
// bounds split_workspace's sizes. NOT_SUPPORTED, with the numbers, beyond them.
fmha_status check_split_kv(const Problem &p, int splits);

// Where the partials of a run go inside `workspace`.
struct SplitPartials {
    float *o = nullptr;
    float *lse = nullptr;
};
SplitPartials split_partials(const Problem &p, int splits, void *workspace);

// Threads of the combine kernel per (row, head) for `parts` parts of
// head_dim columns: whole warps covering the row's 4-column chunks, doubled
// (up to the CTA's 128) while a thread would sum more than 4 parts.
int combine_team(int64_t head_dim, int parts);
// Its grid: CTAs of kCombineThreads / team teams over `pairs` (row, head) pairs.
unsigned combine_blocks(int64_t pairs, int team);

// The split-KV combine's entry point for the output dtype and the team size
// (fmha_combine.cu: one per team size), and the merge's.
const char *split_combine_kernel_name(fmha_dtype dtype, int team);
const char *merge_kernel_name(fmha_dtype dtype, int team);

// Launches the plan's combine kernel (a programmatic dependent of the kernel
// that wrote the partials) over every (row, head). `fwd` gives the LSE
// strides of the output.
fmha_status launch_split_combine(const fmha_plan &plan, const fmha_tensors &t,
                                 const SplitPartials &parts, int splits, const FwdParams &fwd,
                                 CUstream stream);

}  // namespace fmha
