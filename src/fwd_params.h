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

// As launch(), for a kernel that depends on the previous one in `stream`:
// on sm_90+ (and when the driver has cuLaunchKernelEx) it is launched with
// programmatic stream serialization, so it is scheduled while its
// predecessor drains and waits on griddepcontrol.wait before reading the
// predecessor's output.
fmha_status launch_dependent(const Driver &drv, int device_sm, CUfunction fn, unsigned grid_x,
                             unsigned threads, CUstream stream, void *params,
                             const char *kernel_name);

}  // namespace fmha
