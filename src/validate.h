// Descriptor validation: every rule a problem must satisfy, each failure
// naming the field, its value and the rule.
#pragma once
#include "kernel_select.h"
#include "problem.h"

namespace fmha {

// Checks the version and every device-independent rule, applies defaults
// (head_dim_v, softmax_scale) and fills *out. Reads nothing but `desc`: the
// environment is applied by apply_forced_kernel, for plans and support
// queries only (fmha_check_block_table must not depend on it).
fmha_status read_descriptor(const fmha_descriptor *desc, Problem *out);

// FMHA_FORCE_KERNEL (auto, portable, hopper or decode) replaces an AUTO
// kernel family; INVALID_ARGUMENT for any other value.
fmha_status apply_forced_kernel(Problem *p);

// Strides of one tensor of `owner` ("descriptor", "merge_descriptor"):
// `extents` are its batch, seq and head sizes; the stride of a size-1
// dimension is never followed and not checked. The rows may reach at most
// 2^60 elements from the base.
fmha_status check_strides(const char *owner, const char *tensor, const fmha_strides &s,
                          const int64_t (&extents)[3]);

// The output's rows must not alias each other: sorted by stride, each
// dimension must start past the end of the previous ones.
fmha_status check_no_overlap(const char *owner, const fmha_strides &o,
                             const int64_t (&extents)[3], int64_t head_dim);

// Rules that depend on the device (compute capability, shared memory per
// block): picks the kernel into *choice as plan creation would.
fmha_status check_device(const Problem &p, const DeviceLimits &dev, KernelChoice *choice);

}  // namespace fmha
