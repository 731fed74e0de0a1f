// Which kernel runs a problem on a device, and how it is launched.
#pragma once
#include <cuda.h>

#include "kernels/tile_order.h"
#include "problem.h"
#include "tensor_map.h"

struct fmha_plan;

namespace fmha {

using LaunchFn = fmha_status (*)(const fmha_plan &plan, const fmha_tensors &t, void *workspace,
                                 CUstream stream);

// The Hopper kernel's walk over its tiles, fixed at plan time
// (sm90_configure), so that fmha_run only copies it into the kernel's
// parameters: no division loops or reciprocals per run.
struct Sm90Schedule {
    int64_t box_group = 1;         // query heads packed per KV head, padded to a power of two
    int32_t group_shift = 0;       // log2(box_group)
    int32_t num_m_blocks = 0;      // query blocks per (batch, tile head)
    int32_t tile_heads = 0;        // heads the tiles walk
    int32_t tiles_per_split = 0;
    int32_t total_tiles = 0;       // tiles_per_split x splits
    int32_t persistent = 0;        // 1: the grid loops over the tiles
    int32_t head_group = 0;        // persistent causal grids: heads walked together
    int32_t k_box_rows = 0;        // rows of a K/V box: the key tile, or a page chunk
    int32_t paged_chunks = 0;      // boxes per key tile of a paged cache (0: contiguous)
    int32_t compact_batch = 0;     // > 0: packed Q walked without empty slots (Sm90Params)
    // `_paged16` (K and V one box per 16-row chunk): how K's map folds the KV
    // heads; kNone for every other entry point.
    HeadFold k_head_fold = HeadFold::kNone;
    uint32_t ctas = 0;             // grid size
    FastDivide div_tiles_per_split{0u, 0};
    TileDivisors tile_div{};
};

// The decode kernel's grid as the plan fixed it (fmha_run reads it as is):
// with paired hd64 heads (launch_decode.cpp, d39) half the KV heads, twice
// the group and twice the K/V head strides.
struct DecodeSchedule {
    bool paired = false;
    int32_t q_heads_per_kv = 0;  // query heads per KV head the kernel sees
    int32_t m_tiles = 0;         // 16-row tiles per (sequence, KV head)
    int64_t kv_heads = 0;        // KV heads the kernel sees
    int64_t k_head_stride = 0, v_head_stride = 0;  // elements
    bool cluster_merge = false;  // two splits as clusters of two CTAs, no combine (d71)
};

struct KernelChoice {
    fmha_kernel_family family = FMHA_KERNEL_AUTO;
    const char *image_family = nullptr;  // family name in the image table
    const char *kernel_name = nullptr;   // static entry-point name in the cubin
    int tile_m = 0, tile_n = 0, threads = 0;
    int smem_bytes = 0;
    uint64_t workspace_bytes = 0;
    int num_splits = 1;                          // split-KV parts (decode kernel)
    DecodeSchedule decode;                       // decode kernel only
    const char *combine_kernel_name = nullptr;   // second entry point (split-KV combine), if any
    int combine_team = 0;                        // its threads per (row, head) (split_kv.h)
    Sm90Schedule sm90;                           // Hopper kernel only
    LaunchFn launch = nullptr;
};

bool is_supported_head_dim(int64_t head_dim);

// What kernel selection knows of the device. A support query by sm number
// (fmha_check_support with an sm) knows no SM count (num_sms 0) and takes
// max_smem from the architecture (support_query_limits).
struct DeviceLimits {
    int sm = 0;        // compute capability, major*10+minor
    int num_sms = 0;   // for split-KV and persistent grids
    int max_smem = 0;  // opt-in shared memory per block, bytes
    int smem_per_sm = 0;  // shared memory per SM, bytes (0: shared_memory_per_sm's table)
    bool smem_capped = false;  // max_smem lowered by FMHA_SHARED_MEMORY_LIMIT
    bool cluster_launch = false;  // the driver launches thread-block clusters (cuLaunchKernelEx)
};

// The limits of an unseen device of compute capability `sm`: its
// architecture's opt-in shared memory per block, the smallest of the
// supported architectures where that is not known.
DeviceLimits support_query_limits(int sm);

// Shared memory per SM, which bounds how many CTAs an SM holds at once: what
// the driver reported for the device, else its architecture's.
int shared_memory_per_sm(const DeviceLimits &dev);

// Picks the family (honouring p.kernel) and fills the launch shape, with a
// kernel whose shared memory fits dev.max_smem. Fails with NOT_SUPPORTED or
// NO_KERNEL_IMAGE, naming why.
fmha_status select_kernel(const Problem &p, const DeviceLimits &dev, KernelChoice *out);

// Per-family configuration, in launch_<family>.cpp.
// What the portable kernel cannot run on any device (head_dim 512); support
// queries without a device (FMHA_SM_ANY) ask it of PORTABLE problems too.
fmha_status portable_takes(const Problem &p);
fmha_status portable_configure(const Problem &p, const DeviceLimits &dev, KernelChoice *out);
// The portable kernel's automatic split count for a grid of `ctas` CTAs.
int portable_auto_splits(const Problem &p, const DeviceLimits &dev, int64_t ctas);
fmha_status sm90_configure(const Problem &p, const DeviceLimits &dev, KernelChoice *out);
// Tile rows per query position when the Hopper kernel packs the query heads
// of a KV head into one M tile: their count rounded up to a power of two (1:
// no packing; launch_sm90.cpp says when).
int64_t sm90_packed_heads(const Problem &p);
fmha_status decode_configure(const Problem &p, const DeviceLimits &dev, KernelChoice *out);
// True when AUTO should use the decode kernel: up to 16 query rows per KV
// head (one decode tile), an explicit split count, or head_dim 512 the
// Hopper kernel cannot run; where the Hopper kernel does not run the problem
// (`hopper_runs_it` false), also while its K/V reads are at most 1.5 times
// the portable kernel's, and up to 32 query positions over pages or at
// head_dim 64 (where the portable kernel's 64-row block is half empty).
bool prefers_decode(const Problem &p, bool hopper_runs_it);

}  // namespace fmha
