// Descriptor validation: every rule a problem must satisfy, each failure
// naming the field, its value and the rule.
#pragma once
#include "problem.h"

namespace fmha {

// Checks the version and every device-independent rule, applies defaults
// (head_dim_v, softmax_scale, FMHA_FORCE_KERNEL) and fills *out.
fmha_status read_descriptor(const fmha_descriptor *desc, Problem *out);

// Rules that depend on the device's compute capability (major*10+minor).
fmha_status check_device(const Problem &p, int sm);

}  // namespace fmha
