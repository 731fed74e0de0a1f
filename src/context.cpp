#include "context.h"

#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "errors.h"

namespace fmha {
namespace {

fmha_status describe_device(const Driver &drv, CUdevice dev, DeviceContext *out) {
    int major = 0, minor = 0;
    FMHA_CU(drv, device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    FMHA_CU(drv, device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    FMHA_CU(drv, device_get_attribute(&out->num_sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    FMHA_CU(drv, device_get_attribute(&out->max_smem_optin,
                                      CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
    // Drivers that do not know the attribute leave 0: kernel selection then
    // uses its architecture table.
    int per_sm = 0;
    if (drv.device_get_attribute(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
                                 dev) == CUDA_SUCCESS)
        out->smem_per_sm = per_sm;
    out->sm = major * 10 + minor;
    out->device = dev;
    return FMHA_STATUS_SUCCESS;
}

// `owner` names the struct whose device field gave `ordinal` ("descriptor",
// "merge_descriptor").
fmha_status get_device(const Driver &drv, int ordinal, const char *owner, CUdevice *dev) {
    int count = 0;
    FMHA_CU(drv, device_get_count(&count));
    if (count == 0) return fail(FMHA_STATUS_NO_DEVICE, "the CUDA driver reports no device");
    if (ordinal >= count)
        return fail(FMHA_STATUS_NO_DEVICE, "%s.device is %d: only %d CUDA device(s) are present",
                    owner, ordinal, count);
    FMHA_CU(drv, device_get(dev, ordinal));
    return FMHA_STATUS_SUCCESS;
}

// Ordinal of a CUdevice: the driver has no reverse lookup, so scan.
int ordinal_of(const Driver &drv, CUdevice dev) {
    int count = 0;
    drv.device_get_count(&count);
    for (int i = 0; i < count; ++i) {
        CUdevice d;
        if (drv.device_get(&d, i) == CUDA_SUCCESS && d == dev) return i;
    }
    return 0;
}

struct ModuleKey {
    unsigned long long ctx_id;
    const EmbeddedImage *image;
    bool operator<(const ModuleKey &o) const {
        return ctx_id != o.ctx_id ? ctx_id < o.ctx_id : image < o.image;
    }
};

// One (context, image) pair's module. Its own lock is held while the image
// loads, so a pair loads once while other pairs (another device, another
// family) load at the same time.
struct ModuleSlot {
    std::mutex load_mutex;
    CUmodule module = nullptr;  // null until a load succeeds
};

// Guards the map only; never held across a driver call.
std::mutex g_modules_mutex;
// Kept until process exit: functions outlive plans. Context ids are never
// reused, so a destroyed context's entries are never looked up again; a
// primary context re-created after a reset gets a new id too (same handle,
// driver 580 on the H200; tests/gpu/test_context_reset.cpp runs plans across
// resets).
std::map<ModuleKey, std::unique_ptr<ModuleSlot>> g_modules;

ModuleSlot &module_slot(const ModuleKey &key) {
    std::lock_guard<std::mutex> lock(g_modules_mutex);
    std::unique_ptr<ModuleSlot> &slot = g_modules[key];
    if (!slot) slot.reset(new ModuleSlot);
    return *slot;  // the map never erases, so the slot stays where it is
}

fmha_status load_module(const Driver &drv, CUcontext ctx, const EmbeddedImage &image,
                        CUmodule *out) {
    ScopedContext scope(drv, ctx);
    FMHA_TRY(scope.status());
    char log[4096] = "";
    CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[] = {log, reinterpret_cast<void *>(sizeof log)};
    CUresult res = drv.module_load_data_ex(out, image.begin, 2, opts, vals);
    if (res != CUDA_SUCCESS) {
        driver_fail(drv, res, "cuModuleLoadDataEx");
        return fail(FMHA_STATUS_DRIVER_ERROR,
                    "loading the %s image for sm_%d%s failed: %s (JIT log: %.300s)",
                    image.family, image.sm, image.is_ptx ? " (PTX)" : "",
                    fmha_last_error_message(), log);
    }
    return FMHA_STATUS_SUCCESS;
}

}  // namespace

fmha_status acquire_context(const Driver &drv, int ordinal, const char *owner,
                            DeviceContext *out) {
    DeviceContext dc;
    FMHA_CU(drv, ctx_get_current(&dc.ctx));
    if (dc.ctx != nullptr) {
        CUdevice dev;
        FMHA_CU(drv, ctx_get_device(&dev));
        FMHA_TRY(describe_device(drv, dev, &dc));
        dc.ordinal = ordinal_of(drv, dev);
    } else {
        CUdevice dev;
        FMHA_TRY(get_device(drv, ordinal, owner, &dev));
        FMHA_TRY(describe_device(drv, dev, &dc));
        FMHA_CU(drv, primary_ctx_retain(&dc.ctx, dev));
        dc.ordinal = ordinal;
        dc.retained_primary = true;
    }
    *out = dc;
    return FMHA_STATUS_SUCCESS;
}

void release_context(const Driver &drv, const DeviceContext &dc) {
    if (dc.retained_primary) drv.primary_ctx_release(dc.device);
}

fmha_status query_device(const Driver &drv, int ordinal, DeviceContext *out) {
    CUdevice dev;
    CUcontext ctx = nullptr;
    FMHA_CU(drv, ctx_get_current(&ctx));
    if (ctx != nullptr) {
        FMHA_CU(drv, ctx_get_device(&dev));
    } else {
        FMHA_TRY(get_device(drv, ordinal, "descriptor", &dev));
    }
    DeviceContext dc;
    FMHA_TRY(describe_device(drv, dev, &dc));
    *out = dc;
    return FMHA_STATUS_SUCCESS;
}

fmha_status load_function(const Driver &drv, CUcontext ctx, const EmbeddedImage &image,
                          const char *kernel_name, CUfunction *out) {
    unsigned long long ctx_id = 0;
    FMHA_CU(drv, ctx_get_id(ctx, &ctx_id));
    ModuleSlot &slot = module_slot(ModuleKey{ctx_id, &image});
    CUmodule module = nullptr;
    {
        std::lock_guard<std::mutex> lock(slot.load_mutex);
        if (slot.module == nullptr) {
            FMHA_TRY(load_module(drv, ctx, image, &module));  // a failed load is retried next time
            slot.module = module;
        }
        module = slot.module;
    }
    CUresult res = drv.module_get_function(out, module, kernel_name);
    if (res != CUDA_SUCCESS) {
        driver_fail(drv, res, "cuModuleGetFunction");
        return fail(FMHA_STATUS_INTERNAL_ERROR, "kernel %s missing from the %s image: %s",
                    kernel_name, image.family, fmha_last_error_message());
    }
    return FMHA_STATUS_SUCCESS;
}

ScopedContext::ScopedContext(const Driver &drv, CUcontext ctx) : drv_(drv) {
    CUcontext current = nullptr;
    CUresult res = drv.ctx_get_current(&current);
    if (res != CUDA_SUCCESS) {
        status_ = driver_fail(drv, res, "cuCtxGetCurrent");
        return;
    }
    if (current == ctx) return;
    res = drv.ctx_push_current(ctx);
    if (res != CUDA_SUCCESS) {
        status_ = driver_fail(drv, res, "cuCtxPushCurrent");
        if (is_context_error(res))  // e.g. the plan's context was destroyed
            status_ = fail(FMHA_STATUS_CONTEXT_MISMATCH,
                           "making the plan's context current: %s (is it still alive?)",
                           fmha_last_error_message());
        return;
    }
    pushed_ = true;
}

ScopedContext::~ScopedContext() {
    if (pushed_) {
        CUcontext popped;
        drv_.ctx_pop_current(&popped);
    }
}

}  // namespace fmha
