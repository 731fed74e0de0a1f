// Whether a CUDA device can be used by the tests, and the kernel family the
// GPU tests ask for.
#pragma once
#include <string>
#include <vector>

#include "fmha/fmha.h"

namespace fmha_test {

// cudaGetDeviceCount through the static runtime, which reports a missing
// driver as an error instead of failing to start. Cached after the first call.
// On false, *why (if given) says why, e.g. "cudaErrorInsufficientDriver: ...".
bool gpu_available(std::string *why);

// Compute capability (major*10+minor) of the current runtime device.
int current_device_sm();

// Whether the Hopper kernel runs on the current device: an sm_90 device and a
// library built with its image (FMHA_CUDA_ARCHS with 90a). A build without it
// runs the decode and portable kernels there, JIT-compiled from PTX if no
// sm_90 cubin is embedded.
bool hopper_kernel_runs_here();

// Kernel family from env FMHA_TEST_KERNEL: "auto" (or unset), "portable" or
// "hopper". Anything else throws std::invalid_argument.
fmha_kernel_family test_kernel_family();
const char *kernel_family_name(int family);

// For suites that run each case on every family themselves: AUTO, PORTABLE,
// DECODE and HOPPER, or only the family FMHA_TEST_KERNEL names when it names
// one (so test-gpu.sh's forced-family steps run just that one).
std::vector<fmha_kernel_family> every_family_or_forced();

}  // namespace fmha_test
