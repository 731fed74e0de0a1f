// CUDA contexts and the per-context cache of loaded kernel modules.
#pragma once
#include <cuda.h>

#include "driver.h"
#include "images.h"

namespace fmha {

struct DeviceContext {
    CUcontext ctx = nullptr;
    CUdevice device = 0;
    int ordinal = 0;
    int sm = 0;            // major*10+minor
    int num_sms = 0;
    int max_smem_optin = 0;
    int smem_per_sm = 0;   // shared memory per multiprocessor, bytes (0: not reported)
    bool retained_primary = false;
};

// The calling thread's current context if there is one (not retained: its
// owner keeps it alive), else the primary context of `ordinal` (retained:
// release with release_context). `owner` names the struct whose device field
// gave `ordinal` in errors ("descriptor", "merge_descriptor").
fmha_status acquire_context(const Driver &drv, int ordinal, const char *owner,
                            DeviceContext *out);
void release_context(const Driver &drv, const DeviceContext &dc);

// What acquire_context would describe (the current context's device, else
// descriptor.device `ordinal`: sm, SM count, opt-in shared memory per block),
// leaving out the context: no side effect beyond cuInit.
fmha_status query_device(const Driver &drv, int ordinal, DeviceContext *out);

// Loads `image` into `ctx` once (cached per context id, thread-safe: loads of
// one pair wait for each other, loads of different pairs run concurrently)
// and returns `kernel_name` from it.
fmha_status load_function(const Driver &drv, CUcontext ctx, const EmbeddedImage &image,
                          const char *kernel_name, CUfunction *out);

// Makes `ctx` current for the scope when it is not already.
class ScopedContext {
  public:
    ScopedContext(const Driver &drv, CUcontext ctx);
    ~ScopedContext();
    fmha_status status() const { return status_; }

  private:
    const Driver &drv_;
    bool pushed_ = false;
    fmha_status status_ = FMHA_STATUS_SUCCESS;
};

}  // namespace fmha
