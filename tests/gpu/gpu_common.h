// Helpers shared by the GPU tests.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "fmha/fmha.h"
#include "fmha_catch.h"
#include "fmha_test/buffers.h"
#include "fmha_test/gpu.h"
#include "fmha_test/half.h"
#include "fmha_test/runner.h"
#include "fmha_test/serving.h"

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

// The whole verdict of a run that a test checks by hand: O and LSE within
// the 2x rule and wholly written, the view's gaps and the rows that see no
// key as they must be, and the guard bands of the case's buffers and of the
// workspace (`ws`, when the plan has one).
inline void check_whole_run(const CaseData &data, const Comparison &cmp,
                            const DeviceBuffer *ws = nullptr) {
    INFO(cmp.detail);
    CHECK(cmp.o_ok);
    CHECK(cmp.lse_ok);
    CHECK(cmp.all_written);
    CHECK(cmp.gaps_untouched);
    CHECK(cmp.masked_rows_ok);
    std::string why;
    const bool guards = data.guards_intact(&why) &&
                        (ws == nullptr || ws->elems() == 0 || ws->guards_intact(&why));
    INFO(why);
    CHECK(guards);
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

// A plan and its guard-banded workspace (payload NaN garbage).
struct PlannedRun {
    PlanPtr plan;
    size_t ws_bytes = 0;
    DeviceBuffer ws;
    void *workspace() const { return ws_bytes > 0 ? ws.data() : nullptr; }
};

// For suites that run every family: false (skip this family) where fmha.h
// documents that `d`'s forced family declines it (documented_unsupported;
// an explicit HOPPER must take it); any other failure fails the test.
inline bool plan_family(const fmha_descriptor &d, PlannedRun *out) {
    fmha_plan *raw = nullptr;
    const fmha_status st = fmha_create_plan(&raw, &d);
    out->plan.reset(raw);
    const std::string msg = fmha_last_error_message();
    if (st == FMHA_STATUS_NOT_SUPPORTED && d.kernel != FMHA_KERNEL_HOPPER &&
        documented_unsupported(d, msg))
        return false;
    INFO("fmha_create_plan (" << kernel_family_name(d.kernel) << "): " << msg);
    REQUIRE(st == FMHA_STATUS_SUCCESS);
    REQUIRE(fmha_plan_workspace_size(raw, &out->ws_bytes) == FMHA_STATUS_SUCCESS);
    if (out->ws_bytes > 0) out->ws = DeviceBuffer((out->ws_bytes + 1) / 2, 2, kGuard16);
    return true;
}

// Waits for the device; fails the test on an asynchronous error.
inline void sync_or_fail() {
    cudaError_t err = cudaDeviceSynchronize();
    if (err == cudaSuccess) err = cudaGetLastError();
    INFO(cudaGetErrorName(err) << ": " << cudaGetErrorString(err));
    REQUIRE(err == cudaSuccess);
}

// Runs with `t` and expects `expected`, with `needle` in the message.
inline void expect_run_error(const fmha_plan *plan, const fmha_tensors &t, void *ws,
                             size_t ws_bytes, fmha_status expected, const std::string &needle) {
    fmha_status st = fmha_run(plan, &t, ws, ws_bytes, nullptr);
    const std::string msg = fmha_last_error_message();
    INFO("fmha_run -> " << fmha_status_string(st) << ": \"" << msg << "\"; expected "
                        << fmha_status_string(expected) << " naming " << needle);
    CHECK(st == expected);
    CHECK(msg.find(needle) != std::string::npos);
}

// True when O and LSE still hold the prefill everywhere: a rejected run wrote nothing.
inline bool all_prefill(const Outputs &o) {
    for (uint16_t x : o.o)
        if (x != kOutputPrefill16) return false;
    for (float f : o.lse) {
        uint32_t u;
        std::memcpy(&u, &f, 4);
        if (u != kOutputPrefill32) return false;
    }
    return true;
}

// `p` moved by `n` bytes (misaligned pointers for the alignment checks).
inline const void *offset_bytes(const void *p, size_t n) { return static_cast<const char *>(p) + n; }
inline void *offset_bytes(void *p, size_t n) { return static_cast<char *>(p) + n; }

inline void check_guards(const DeviceBuffer &b, const std::string &name) {
    std::string why;
    const bool ok = b.guards_intact(&why);
    INFO(name << ": " << why);
    CHECK(ok);
}

}  // namespace fmha_test

// First statement of every GPU test: skip without a GPU, and skip when
// FMHA_TEST_KERNEL=hopper asks for a kernel this device cannot run.
#define FMHA_GPU_TEST_PROLOGUE()                                                         \
    FMHA_REQUIRE_GPU();                                                                  \
    do {                                                                                 \
        if (::fmha_test::test_kernel_family() == FMHA_KERNEL_HOPPER &&                   \
            !::fmha_test::hopper_kernel_runs_here())                                     \
            FMHA_SKIP("FMHA_TEST_KERNEL=hopper but the Hopper kernel does not run here (sm_" \
                      << ::fmha_test::current_device_sm() << ", images of this build)");    \
    } while (0)
