#include "fmha_test/gpu.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "fmha_test/buffers.h"

namespace fmha_test {

bool gpu_available(std::string *why) {
    static std::once_flag once;
    static bool available = false;
    static std::string reason;
    std::call_once(once, [] {
        int count = 0;
        cudaError_t err = cudaGetDeviceCount(&count);
        if (err != cudaSuccess) {
            reason = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
            // Without any driver the runtime says "insufficient driver"; say why.
            if (void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) dlclose(lib);
            else reason = "libcuda.so.1 cannot be loaded (no NVIDIA driver); " + reason;
            cudaGetLastError();  // clear the (non-sticky) error
            return;
        }
        if (count == 0) {
            reason = "cudaGetDeviceCount reports 0 devices";
            return;
        }
        err = cudaFree(nullptr);  // creates the primary context of device 0
        if (err != cudaSuccess) {
            reason = std::string("cudaFree(0) failed: ") + cudaGetErrorName(err) + ": " +
                     cudaGetErrorString(err);
            cudaGetLastError();
            return;
        }
        available = true;
    });
    if (why != nullptr) *why = reason;
    return available;
}

int current_device_sm() {
    int dev = 0, major = 0, minor = 0;
    FMHA_TEST_CUDA(cudaGetDevice(&dev));
    FMHA_TEST_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    FMHA_TEST_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    return major * 10 + minor;
}

bool hopper_kernel_runs_here() {
    if (current_device_sm() != 90) return false;
    int dev = 0;
    FMHA_TEST_CUDA(cudaGetDevice(&dev));
    // A problem the Hopper kernel takes whenever its image is there.
    fmha_descriptor d;
    if (fmha_descriptor_init(&d, FMHA_DESCRIPTOR_VERSION) != FMHA_STATUS_SUCCESS) return false;
    d.device = dev;
    d.dtype = FMHA_DTYPE_BF16;
    d.batch = 1;
    d.num_q_heads = d.num_kv_heads = 1;
    d.seqlen_q = d.seqlen_k = 128;
    d.head_dim = 128;
    fmha_strides_bshd(&d.q_strides, 128, 1, 128);
    d.k_strides = d.v_strides = d.o_strides = d.q_strides;
    d.kernel = FMHA_KERNEL_HOPPER;
    return fmha_check_support(&d, FMHA_SM_CURRENT_DEVICE) == FMHA_STATUS_SUCCESS;
}

fmha_kernel_family test_kernel_family() {
    const char *env = std::getenv("FMHA_TEST_KERNEL");
    if (env == nullptr || env[0] == '\0' || std::strcmp(env, "auto") == 0) return FMHA_KERNEL_AUTO;
    if (std::strcmp(env, "portable") == 0) return FMHA_KERNEL_PORTABLE;
    if (std::strcmp(env, "hopper") == 0) return FMHA_KERNEL_HOPPER;
    if (std::strcmp(env, "decode") == 0) return FMHA_KERNEL_DECODE;
    throw std::invalid_argument(std::string("FMHA_TEST_KERNEL is \"") + env +
                                "\": must be auto, portable, hopper or decode");
}

std::vector<fmha_kernel_family> every_family_or_forced() {
    if (test_kernel_family() != FMHA_KERNEL_AUTO) return {test_kernel_family()};
    return {FMHA_KERNEL_AUTO, FMHA_KERNEL_PORTABLE, FMHA_KERNEL_DECODE, FMHA_KERNEL_HOPPER};
}

const char *kernel_family_name(int family) {
    switch (family) {
    case FMHA_KERNEL_AUTO: return "auto";
    case FMHA_KERNEL_PORTABLE: return "portable";
    case FMHA_KERNEL_HOPPER: return "hopper";
    case FMHA_KERNEL_DECODE: return "decode";
    }
    return "family?";
}

}  // namespace fmha_test
