// Descriptor validation: every rule a problem must satisfy, each failure
// naming the field, its value and the rule.
#pragma once
#include "problem.h"

namespace fmha {

// Checks the version and every device-independent rule, applies defaults
// (head_dim_v, softmax_scale, FMHA_FORCE_KERNEL) and fills *out.
fmha_status read_descriptor(const fmha_descriptor *desc, Problem *out);

// Strides of one tensor of `owner` ("descriptor", "merge_descriptor"):
// `extents` are its batch, seq and head sizes; the stride of a size-1
// dimension is never followed and not checked.
fmha_status check_strides(const char *owner, const char *tensor, const fmha_strides &s,
                          const int64_t (&extents)[3]);

// The output's rows must not alias each other: sorted by stride, each
// dimension must start past the end of the previous ones.
fmha_status check_no_overlap(const char *owner, const fmha_strides &o,
                             const int64_t (&extents)[3], int64_t head_dim);

// Rules that depend on the device's compute capability (major*10+minor).
fmha_status check_device(const Problem &p, int sm);

}  // namespace fmha
