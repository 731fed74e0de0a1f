// The CUDA driver, opened with dlopen on first use. libfmha never links
// libcuda: on a machine without it every entry point reports NO_DRIVER.
#pragma once
#include <cuda.h>

#include "fmha/fmha.h"

namespace fmha {

// Entry points, fetched through cuGetProcAddress with the ABI of CUDA 12.0.
// Field names avoid cuda.h's versioning macros (cuCtxPushCurrent -> _v2...).
struct Driver {
    int version = 0;
    CUresult (*init)(unsigned int);
    CUresult (*driver_get_version)(int *);
    CUresult (*get_error_name)(CUresult, const char **);
    CUresult (*get_error_string)(CUresult, const char **);
    CUresult (*device_get_count)(int *);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_get_attribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*primary_ctx_retain)(CUcontext *, CUdevice);
    CUresult (*primary_ctx_release)(CUdevice);
    CUresult (*ctx_get_current)(CUcontext *);
    CUresult (*ctx_push_current)(CUcontext);
    CUresult (*ctx_pop_current)(CUcontext *);
    CUresult (*ctx_get_device)(CUdevice *);
    CUresult (*ctx_get_id)(CUcontext, unsigned long long *);
    CUresult (*module_load_data_ex)(CUmodule *, const void *, unsigned int, CUjit_option *,
                                    void **);
    CUresult (*module_get_function)(CUfunction *, CUmodule, const char *);
    CUresult (*func_set_attribute)(CUfunction, CUfunction_attribute, int);
    CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);
    // Optional (null if absent): launches with attributes, for programmatic
    // dependent launch of a second kernel.
    CUresult (*launch_kernel_ex)(const CUlaunchConfig *, CUfunction, void **, void **) = nullptr;
    CUresult (*tensor_map_encode_tiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                        const cuuint64_t *, const cuuint64_t *,
                                        const cuuint32_t *, const cuuint32_t *,
                                        CUtensorMapInterleave, CUtensorMapSwizzle,
                                        CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
};

// Loads the driver once (thread-safe) and calls cuInit. On failure sets the
// last error and returns NO_DRIVER / DRIVER_ERROR; on success *out is valid
// for the life of the process.
fmha_status load_driver(const Driver **out);

// Turns a failed driver call into DRIVER_ERROR with "what: NAME (message)".
fmha_status driver_fail(const Driver &drv, CUresult result, const char *what);

// True for the results of a call made with the wrong context or one that no
// longer exists: CUDA_ERROR_INVALID_HANDLE (an object of another context),
// CUDA_ERROR_INVALID_CONTEXT and CUDA_ERROR_CONTEXT_IS_DESTROYED (what driver
// 580 returns for a launch in a destroyed context). fmha_run reports them as
// CONTEXT_MISMATCH.
bool is_context_error(CUresult result);

}  // namespace fmha

// Calls a driver entry point and returns DRIVER_ERROR from the enclosing
// function when it fails.
#define FMHA_CU(drv, call)                                               \
    do {                                                                 \
        CUresult fmha_cu_result_ = (drv).call;                           \
        if (fmha_cu_result_ != CUDA_SUCCESS)                             \
            return ::fmha::driver_fail((drv), fmha_cu_result_, #call);   \
    } while (0)
