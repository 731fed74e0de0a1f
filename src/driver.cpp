#include "driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "errors.h"

namespace fmha {
namespace {

using GetProcAddress = CUresult (*)(const char *, void **, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult *);

// ABI version the entry points are requested at; the typedefs in Driver match it.
constexpr int kRequestedApi = 12000;

struct LoadResult {
    Driver driver;
    fmha_status status = FMHA_STATUS_SUCCESS;
    char message[512] = "";
};

template <typename Fn>
bool fetch(GetProcAddress get, const char *name, Fn *out, LoadResult &r) {
    void *fn = nullptr;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult res = get(name, &fn, kRequestedApi, CU_GET_PROC_ADDRESS_DEFAULT, &found);
    if (res != CUDA_SUCCESS || fn == nullptr || found != CU_GET_PROC_ADDRESS_SUCCESS) {
        r.status = FMHA_STATUS_NO_DRIVER;
        std::snprintf(r.message, sizeof r.message,
                      "the CUDA driver lacks entry point %s (CUDA 12.0 or newer needed)", name);
        return false;
    }
    *out = reinterpret_cast<Fn>(fn);
    return true;
}

// An entry point the library can do without: null when the driver lacks it.
template <typename Fn>
void fetch_optional(GetProcAddress get, const char *name, Fn *out) {
    void *fn = nullptr;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult res = get(name, &fn, kRequestedApi, CU_GET_PROC_ADDRESS_DEFAULT, &found);
    *out = res == CUDA_SUCCESS && found == CU_GET_PROC_ADDRESS_SUCCESS
               ? reinterpret_cast<Fn>(fn)
               : nullptr;
}

void load(LoadResult &r) {
    const char *path = std::getenv("FMHA_LIBCUDA");
    if (path == nullptr || path[0] == '\0') path = "libcuda.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        const char *why = dlerror();
        r.status = FMHA_STATUS_NO_DRIVER;
        std::snprintf(r.message, sizeof r.message,
                      "no CUDA driver: dlopen(\"%s\") failed: %s", path, why ? why : "unknown");
        return;
    }
    auto get = reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2"));
    if (get == nullptr) {
        r.status = FMHA_STATUS_NO_DRIVER;
        std::snprintf(r.message, sizeof r.message,
                      "the CUDA driver at \"%s\" has no cuGetProcAddress_v2 (driver 12.0 or "
                      "newer needed)", path);
        return;
    }
    Driver &d = r.driver;
    bool ok = fetch(get, "cuInit", &d.init, r) &&
              fetch(get, "cuDriverGetVersion", &d.driver_get_version, r) &&
              fetch(get, "cuGetErrorName", &d.get_error_name, r) &&
              fetch(get, "cuGetErrorString", &d.get_error_string, r) &&
              fetch(get, "cuDeviceGetCount", &d.device_get_count, r) &&
              fetch(get, "cuDeviceGet", &d.device_get, r) &&
              fetch(get, "cuDeviceGetAttribute", &d.device_get_attribute, r) &&
              fetch(get, "cuDevicePrimaryCtxRetain", &d.primary_ctx_retain, r) &&
              fetch(get, "cuDevicePrimaryCtxRelease", &d.primary_ctx_release, r) &&
              fetch(get, "cuCtxGetCurrent", &d.ctx_get_current, r) &&
              fetch(get, "cuCtxPushCurrent", &d.ctx_push_current, r) &&
              fetch(get, "cuCtxPopCurrent", &d.ctx_pop_current, r) &&
              fetch(get, "cuCtxGetDevice", &d.ctx_get_device, r) &&
              fetch(get, "cuCtxGetId", &d.ctx_get_id, r) &&
              fetch(get, "cuModuleLoadDataEx", &d.module_load_data_ex, r) &&
              fetch(get, "cuModuleGetFunction", &d.module_get_function, r) &&
              fetch(get, "cuFuncSetAttribute", &d.func_set_attribute, r) &&
              fetch(get, "cuLaunchKernel", &d.launch_kernel, r) &&
              fetch(get, "cuTensorMapEncodeTiled", &d.tensor_map_encode_tiled, r);
    if (!ok) return;  // the library handle stays open: harmless, and it may be in use
    fetch_optional(get, "cuLaunchKernelEx", &d.launch_kernel_ex);
    CUresult res = d.init(0);
    if (res != CUDA_SUCCESS) {
        const char *name = "?";
        d.get_error_name(res, &name);
        r.status = res == CUDA_ERROR_NO_DEVICE ? FMHA_STATUS_NO_DEVICE : FMHA_STATUS_DRIVER_ERROR;
        std::snprintf(r.message, sizeof r.message, "cuInit(0) failed: %s (%d)", name, (int)res);
        return;
    }
    d.driver_get_version(&d.version);
}

}  // namespace

fmha_status load_driver(const Driver **out) {
    static LoadResult result;
    static std::once_flag once;
    std::call_once(once, [] { load(result); });
    if (result.status != FMHA_STATUS_SUCCESS) return fail(result.status, "%s", result.message);
    *out = &result.driver;
    return FMHA_STATUS_SUCCESS;
}

bool is_context_error(CUresult result) {
    return result == CUDA_ERROR_INVALID_HANDLE || result == CUDA_ERROR_INVALID_CONTEXT ||
           result == CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

fmha_status driver_fail(const Driver &drv, CUresult result, const char *what) {
    const char *name = "CUDA_ERROR_UNKNOWN";
    const char *text = "";
    drv.get_error_name(result, &name);
    drv.get_error_string(result, &text);
    return fail(FMHA_STATUS_DRIVER_ERROR, "%s failed: %s (%d): %s", what, name, (int)result,
                text ? text : "");
}

}  // namespace fmha
