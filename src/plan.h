// The plan object behind the opaque fmha_plan handle. Immutable after
// creation, so concurrent fmha_run calls on one plan need no locking.
#pragma once
#include <cuda.h>

#include "context.h"
#include "driver.h"
#include "images.h"
#include "kernel_select.h"
#include "merge_problem.h"
#include "problem.h"

struct fmha_plan {
    fmha::Problem problem;
    fmha::KernelChoice choice;
    const fmha::Driver *drv = nullptr;
    CUcontext ctx = nullptr;
    CUdevice device = 0;
    int device_ordinal = 0;
    int device_sm = 0;
    int num_sms = 0;
    bool retained_primary = false;  // release the primary context on destroy
    const fmha::EmbeddedImage *image = nullptr;
    CUfunction function = nullptr;
    CUfunction combine_function = nullptr;  // split-KV combine or merge, if the plan has one
    // Programmatic dependent launch of `function` / `combine_function`
    // (launches_as_dependent of their images on this device).
    bool function_dependent = false;
    bool combine_dependent = false;
    bool is_merge = false;                  // made by fmha_create_merge_plan
    fmha::MergeProblem merge;               // valid when is_merge
};

namespace fmha {

// Loads the driver and makes a plan bound to `device`'s context (its device
// fields set, `dc` filled in); `owner` ("descriptor", "merge_descriptor")
// names the struct whose device field `device` is in errors. On failure
// nothing is held; on success the caller owns *out and frees it with
// fmha_destroy_plan.
fmha_status new_device_plan(int device, const char *owner, fmha_plan **out, DeviceContext *dc);

}  // namespace fmha
