// Which kernel runs a problem on a device, and how it is launched.
#pragma once
#include <cuda.h>

#include "problem.h"

struct fmha_plan;

namespace fmha {

using LaunchFn = fmha_status (*)(const fmha_plan &plan, const fmha_tensors &t, void *workspace,
                                 CUstream stream);

struct KernelChoice {
    fmha_kernel_family family = FMHA_KERNEL_AUTO;
    const char *image_family = nullptr;  // family name in the image table
    const char *kernel_name = nullptr;   // static entry-point name in the cubin
    int tile_m = 0, tile_n = 0, threads = 0;
    int smem_bytes = 0;
    uint64_t workspace_bytes = 0;
    LaunchFn launch = nullptr;
};

bool is_supported_head_dim(int64_t head_dim);

// Picks the family (honouring p.kernel) and fills the launch shape. `sm` is
// the device's compute capability. Fails with NOT_SUPPORTED or
// NO_KERNEL_IMAGE, naming why.
fmha_status select_kernel(const Problem &p, int sm, KernelChoice *out);

// Per-family configuration, in launch_<family>.cpp.
fmha_status portable_configure(const Problem &p, KernelChoice *out);
fmha_status sm90_configure(const Problem &p, KernelChoice *out);

}  // namespace fmha
