// The plan object behind the opaque fmha_plan handle. Immutable after
// creation, so concurrent fmha_run calls on one plan need no locking.
#pragma once
#include <cuda.h>

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
    bool is_merge = false;                  // made by fmha_create_merge_plan
    fmha::MergeProblem merge;               // valid when is_merge
};
