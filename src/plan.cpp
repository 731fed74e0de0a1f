// Plan creation and introspection, and the support query.
#include "plan.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "context.h"
#include "errors.h"
#include "struct_versions.h"
#include "validate.h"

namespace fmha {

fmha_status new_device_plan(int device, const char *owner, fmha_plan **out, DeviceContext *dc) {
    *out = nullptr;
    const Driver *drv;
    FMHA_TRY(load_driver(&drv));
    FMHA_TRY(acquire_context(*drv, device, owner, dc));
    auto *plan = new (std::nothrow) fmha_plan();
    if (plan == nullptr) {
        release_context(*drv, *dc);
        return fail(FMHA_STATUS_OUT_OF_MEMORY, "allocating the plan failed");
    }
    plan->drv = drv;
    plan->ctx = dc->ctx;
    plan->device = dc->device;
    plan->device_ordinal = dc->ordinal;
    plan->device_sm = dc->sm;
    plan->num_sms = dc->num_sms;
    plan->retained_primary = dc->retained_primary;
    *out = plan;
    return FMHA_STATUS_SUCCESS;
}

namespace {

// What kernel selection sees of a described device: the same limits for a
// plan and for a support query of the current device, so that both agree.
// FMHA_SHARED_MEMORY_LIMIT (bytes) lowers the opt-in shared memory per block
// it plans with, never raising it: a large GPU then runs the tiles chosen
// for smaller ones, as the tests do on the H200.
fmha_status limits_of(const Driver &drv, const DeviceContext &dc, DeviceLimits *out) {
    DeviceLimits dev;
    dev.sm = dc.sm;
    dev.num_sms = dc.num_sms;
    dev.max_smem = dc.max_smem_optin;
    dev.smem_per_sm = dc.smem_per_sm;
    dev.cluster_launch = dc.sm >= 90 && drv.launch_kernel_ex != nullptr;
    const char *env = std::getenv("FMHA_SHARED_MEMORY_LIMIT");
    if (env != nullptr && env[0] != '\0') {
        char *end = nullptr;
        errno = 0;
        const long long limit = std::strtoll(env, &end, 10);
        if (end == env || *end != '\0' || errno != 0 || limit < 1)
            return fail(FMHA_STATUS_INVALID_ARGUMENT,
                        "environment FMHA_SHARED_MEMORY_LIMIT is \"%s\": must be a positive "
                        "number of bytes",
                        env);
        if (limit < dev.max_smem) {
            dev.max_smem = static_cast<int>(limit);
            dev.smem_capped = true;
        }
    }
    *out = dev;
    return FMHA_STATUS_SUCCESS;
}

}  // namespace

}  // namespace fmha

extern "C" {

FMHA_API fmha_status fmha_check_support(const fmha_descriptor *desc, int32_t sm) {
    fmha::clear_error();
    fmha::Problem p;
    FMHA_TRY(fmha::read_descriptor(desc, &p));
    FMHA_TRY(fmha::apply_forced_kernel(&p));
    if (sm == FMHA_SM_ANY)  // no device: only what no device could run
        return p.kernel == FMHA_KERNEL_PORTABLE ? fmha::portable_takes(p) : FMHA_STATUS_SUCCESS;
    fmha::DeviceLimits dev;
    if (sm == FMHA_SM_CURRENT_DEVICE) {
        // The device and limits fmha_create_plan would see now.
        const fmha::Driver *drv;
        FMHA_TRY(fmha::load_driver(&drv));
        fmha::DeviceContext dc;
        FMHA_TRY(fmha::query_device(*drv, p.device, &dc));
        FMHA_TRY(fmha::limits_of(*drv, dc, &dev));
    } else if (sm < 0) {
        return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT,
                          "sm is %d: pass a compute capability (e.g. 90), FMHA_SM_ANY (0) or "
                          "FMHA_SM_CURRENT_DEVICE (-1)",
                          sm);
    } else {
        dev = fmha::support_query_limits(sm);
    }
    fmha::KernelChoice choice;
    return fmha::check_device(p, dev, &choice);
}

FMHA_API fmha_status fmha_create_plan(fmha_plan **plan_out, const fmha_descriptor *desc) {
    fmha::clear_error();
    if (plan_out == nullptr)
        return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT, "plan (the output pointer) is NULL");
    *plan_out = nullptr;
    fmha::Problem p;
    FMHA_TRY(fmha::read_descriptor(desc, &p));
    FMHA_TRY(fmha::apply_forced_kernel(&p));
    fmha::DeviceContext dc;
    fmha_plan *plan;
    FMHA_TRY(fmha::new_device_plan(p.device, "descriptor", &plan, &dc));
    plan->problem = p;
    const fmha::Driver *drv = plan->drv;

    fmha::DeviceLimits dev;
    fmha_status st = fmha::limits_of(*drv, dc, &dev);
    if (st == FMHA_STATUS_SUCCESS) st = fmha::check_device(p, dev, &plan->choice);
    if (st == FMHA_STATUS_SUCCESS) {
        plan->image = fmha::find_image(plan->choice.image_family, dc.sm);
        plan->function_dependent = fmha::launches_as_dependent(*plan->image, dc.sm);
        st = fmha::load_function(*drv, dc.ctx, *plan->image, plan->choice.kernel_name,
                                 &plan->function);
    }
    if (st == FMHA_STATUS_SUCCESS && plan->choice.combine_kernel_name != nullptr) {
        const fmha::EmbeddedImage *combine = fmha::find_image("combine", dc.sm);
        plan->combine_dependent = fmha::launches_as_dependent(*combine, dc.sm);
        st = fmha::load_function(*drv, dc.ctx, *combine, plan->choice.combine_kernel_name,
                                 &plan->combine_function);
    }
    if (st == FMHA_STATUS_SUCCESS && plan->choice.smem_bytes > 48 * 1024) {
        CUresult res = drv->func_set_attribute(plan->function,
                                               CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                               plan->choice.smem_bytes);
        if (res != CUDA_SUCCESS) st = fmha::driver_fail(*drv, res, "cuFuncSetAttribute");
    }
    if (st != FMHA_STATUS_SUCCESS) {
        fmha_destroy_plan(plan);
        return st;
    }
    *plan_out = plan;
    return FMHA_STATUS_SUCCESS;
}

FMHA_API void fmha_destroy_plan(fmha_plan *plan) {
    if (plan == nullptr) return;
    if (plan->retained_primary) plan->drv->primary_ctx_release(plan->device);
    delete plan;
}

FMHA_API fmha_status fmha_plan_workspace_size(const fmha_plan *plan, size_t *bytes) {
    fmha::clear_error();
    if (plan == nullptr) return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT, "plan is NULL");
    if (bytes == nullptr) return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT, "bytes is NULL");
    *bytes = plan->choice.workspace_bytes;
    return FMHA_STATUS_SUCCESS;
}

FMHA_API fmha_status fmha_plan_get_info(const fmha_plan *plan, fmha_plan_info *info) {
    fmha::clear_error();
    if (plan == nullptr) return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT, "plan is NULL");
    if (info == nullptr) return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT, "info is NULL");
    const size_t size = fmha::plan_info_size(info->version);
    if (size == 0)
        return fmha::unknown_version("fmha_plan_info.version", info->version,
                                     FMHA_PLAN_INFO_VERSION, "fmha_plan_info_init");
    fmha_plan_info full;
    std::memset(&full, 0, sizeof full);
    full.version = info->version;
    full.kernel_family = plan->choice.family;
    full.kernel_name = plan->choice.kernel_name;
    full.device = plan->device_ordinal;
    full.device_sm = plan->device_sm;
    full.image_sm = plan->image->sm;
    full.image_is_ptx = plan->image->is_ptx;
    full.tile_m = plan->choice.tile_m;
    full.tile_n = plan->choice.tile_n;
    full.threads_per_cta = plan->choice.threads;
    full.shared_memory_bytes = plan->choice.smem_bytes;
    full.workspace_bytes = plan->choice.workspace_bytes;
    full.num_splits = plan->choice.num_splits;
    std::memcpy(info, &full, size);  // only the caller's version: older structs are shorter
    return FMHA_STATUS_SUCCESS;
}

FMHA_API fmha_status fmha_driver_version(int32_t *version) {
    fmha::clear_error();
    if (version == nullptr) return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT, "version is NULL");
    const fmha::Driver *drv;
    FMHA_TRY(fmha::load_driver(&drv));
    *version = drv->version;
    return FMHA_STATUS_SUCCESS;
}

}  // extern "C"
