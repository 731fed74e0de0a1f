// Builds the kernel parameter block shared by every forward kernel family.
#pragma once
#include <cuda.h>

#include "driver.h"
#include "kernels/params.h"
#include "problem.h"

namespace fmha {

FwdParams make_fwd_params(const Problem &p, const fmha_tensors &t, int block_m);

// Launches `fn` with one by-value parameter block, on `stream`.
fmha_status launch(const Driver &drv, CUfunction fn, unsigned grid_x, unsigned grid_y,
                   unsigned grid_z, unsigned threads, unsigned smem_bytes, CUstream stream,
                   void *params, const char *kernel_name);

// As launch(), with programmatic stream serialization when `dependent` (the
// plan's launches_as_dependent for the kernel's image) and the driver has
// cuLaunchKernelEx: the kernel may be scheduled while its predecessor in
// `stream` drains, so its launch latency hides under the predecessor's tail.
// The kernel must execute griddepcontrol.wait (ptx::wait_for_predecessor)
// before it touches global memory.
fmha_status launch_dependent(const Driver &drv, bool dependent, CUfunction fn, unsigned grid_x,
                             unsigned grid_y, unsigned grid_z, unsigned threads,
                             unsigned smem_bytes, CUstream stream, void *params,
                             const char *kernel_name);

// As launch_dependent(), in clusters of `cluster_x` CTAs along x (grid_x a
// multiple of it). Needs cuLaunchKernelEx (DeviceLimits::cluster_launch)
// and a kernel compiled for sm_90+.
fmha_status launch_in_clusters(const Driver &drv, bool dependent, unsigned cluster_x, CUfunction fn,
                               unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned threads,
                               unsigned smem_bytes, CUstream stream, void *params,
                               const char *kernel_name);

}  // namespace fmha
