// Helpers shared by the GPU tests.
#pragma once
#include <cstdio>
#include <memory>
#include <string>

#include "fmha/fmha.h"
#include "fmha_catch.h"
#include "fmha_test/gpu.h"
#include "fmha_test/runner.h"

namespace fmha_test {

struct PlanDeleter {
    void operator()(fmha_plan *p) const { fmha_destroy_plan(p); }
};
using PlanPtr = std::unique_ptr<fmha_plan, PlanDeleter>;

// Creates a plan or fails the test with the library's message.
inline PlanPtr make_plan(const fmha_descriptor &d) {
    fmha_plan *p = nullptr;
    fmha_status st = fmha_create_plan(&p, &d);
    INFO("fmha_create_plan -> " << fmha_status_string(st) << ": " << fmha_last_error_message());
    REQUIRE(st == FMHA_STATUS_SUCCESS);
    REQUIRE(p != nullptr);
    return PlanPtr(p);
}

inline fmha_plan_info plan_info(const fmha_plan *plan) {
    fmha_plan_info info;
    fmha_plan_info_init(&info, FMHA_PLAN_INFO_VERSION);
    fmha_status st = fmha_plan_get_info(plan, &info);
    INFO(fmha_last_error_message());
    REQUIRE(st == FMHA_STATUS_SUCCESS);
    return info;
}

// "fmha_fwd_portable_bf16_hd128 (portable, sm_80 cubin on sm_90)"
inline std::string describe_plan(const fmha_plan *plan) {
    fmha_plan_info i = plan_info(plan);
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s (%s, sm_%d %s on sm_%d, tile %dx%d, %d threads, "
                  "%d B smem, workspace %llu B)",
                  i.kernel_name ? i.kernel_name : "(null)", kernel_family_name(i.kernel_family),
                  i.image_sm, i.image_is_ptx ? "PTX" : "cubin", i.device_sm, i.tile_m, i.tile_n,
                  i.threads_per_cta, i.shared_memory_bytes,
                  (unsigned long long)i.workspace_bytes);
    return buf;
}

}  // namespace fmha_test

// First statement of every GPU test: skip without a GPU, and skip when
// FMHA_TEST_KERNEL=hopper asks for a kernel this device cannot run.
#define FMHA_GPU_TEST_PROLOGUE()                                                         \
    FMHA_REQUIRE_GPU();                                                                  \
    do {                                                                                 \
        if (::fmha_test::test_kernel_family() == FMHA_KERNEL_HOPPER &&                   \
            ::fmha_test::current_device_sm() != 90)                                      \
            FMHA_SKIP("FMHA_TEST_KERNEL=hopper but the device is sm_"                    \
                      << ::fmha_test::current_device_sm());                              \
    } while (0)
