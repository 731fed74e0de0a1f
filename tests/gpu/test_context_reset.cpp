// A device reset (cudaDeviceReset, cuDevicePrimaryCtxReset) destroys every
// module loaded into the primary context. libfmha keeps the modules it loads
// per context (keyed by cuCtxGetId) for the life of the process, so a plan
// made after a reset must load its kernels again instead of finding the
// destroyed modules in that cache.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <vector>

#include "fmha_test/random.h"
#include "gpu_common.h"

using namespace fmha_test;

TEST_CASE("plans made after a device reset load their kernels again", "[gpu][context-reset]") {
    FMHA_GPU_TEST_PROLOGUE();
    // One plan per image the library loads: AUTO prefill (the Hopper kernel
    // on sm_90, the portable one elsewhere), the portable kernel, and a
    // split decode (the decode kernel and the combine kernel).
    std::vector<Case> cases;
    Case prefill = dense_case(FMHA_DTYPE_BF16, 128, 2, 4, 2, 100, 130);
    prefill.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
    cases.push_back(prefill);
    Case portable = prefill;
    portable.kernel = FMHA_KERNEL_PORTABLE;
    cases.push_back(portable);
    cases.push_back(dense_case(FMHA_DTYPE_BF16, 128, 1, 8, 2, 1, 8192));
    for (size_t i = 0; i < cases.size(); ++i) cases[i].seed = case_seed(base_seed(), 9500 + i);

    for (int round = 0; round < 3; ++round) {
        for (const Case &c : cases) {
            const CaseResult r = run_case(c);
            std::printf("context reset, round %d: %s\n", round, r.summary(c).c_str());
            INFO("round " << round << " (" << round << " device resets before it): " << r.summary(c));
            CHECK(r.passed());
        }
        if (round == 2) break;
        // Every buffer and plan of the round is gone; reset and let the
        // runtime create the primary context again.
        REQUIRE(cudaDeviceReset() == cudaSuccess);
        REQUIRE(cudaFree(nullptr) == cudaSuccess);
    }
}
