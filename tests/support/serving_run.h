// run_serving's body for both data kinds (private to tests/support):
// ServingData (compact buffers) and FarData (tensors far apart). Data has
// descriptor(kernel, splits), tensors(), prefill_outputs(), download(),
// guards_intact() and ServingHost's compare().
#pragma once
#include <string>

#include "fmha/fmha.h"
#include "fmha_test/buffers.h"
#include "fmha_test/gpu.h"
#include "fmha_test/half.h"
#include "fmha_test/serving.h"
#include "run_once.h"

namespace fmha_test {

template <typename Data>
ServingRun run_serving_on(Data &data, fmha_kernel_family kernel, int32_t num_splits) {
    ServingRun r;
    r.kernel = kernel;
    r.requested_splits = num_splits;
    try {
        const fmha_descriptor desc = data.descriptor(kernel, num_splits);
        PlanHolder ph;
        r.error = create_plan(ph, desc, &r.status);
        if (!r.error.empty()) {
            // A forced HOPPER declines off sm_90 (NOT_SUPPORTED) and, on sm_90,
            // in a build without its image (NO_KERNEL_IMAGE).
            if (r.status == FMHA_STATUS_NOT_SUPPORTED ||
                (r.status == FMHA_STATUS_NO_KERNEL_IMAGE && kernel == FMHA_KERNEL_HOPPER &&
                 !hopper_kernel_runs_here()))
                r.unsupported = documented_unsupported(desc, r.error);
            return r;
        }
        fmha_plan_info info;
        fmha_plan_info_init(&info, FMHA_PLAN_INFO_VERSION);
        r.status = fmha_plan_get_info(ph.plan, &info);
        if (r.status != FMHA_STATUS_SUCCESS) {
            r.error = std::string("fmha_plan_get_info: ") + fmha_last_error_message();
            return r;
        }
        r.kernel_family = info.kernel_family;
        r.kernel_name = info.kernel_name ? info.kernel_name : "(null)";
        r.num_splits = info.num_splits;
        size_t ws_bytes = 0;
        r.error = workspace_size(ph.plan, &ws_bytes, &r.status);
        if (!r.error.empty()) return r;
        r.workspace_bytes = ws_bytes;
        // What fmha.h promises about the plan.
        std::string &pp = r.plan_problem;
        if (kernel != FMHA_KERNEL_AUTO && info.kernel_family != kernel)
            pp = std::string("family ") + family_name(info.kernel_family) + " for a forced " +
                 family_name(kernel);
        else if (kernel == FMHA_KERNEL_AUTO && num_splits >= 2 &&
                 info.kernel_family == FMHA_KERNEL_HOPPER)
            pp = "AUTO chose hopper, not decode (or portable where decode does not fit), for "
                 "num_splits >= 2";
        else if (kernel == FMHA_KERNEL_AUTO && desc.head_dim == 512 &&
                 info.kernel_family == FMHA_KERNEL_PORTABLE)
            pp = "AUTO chose portable for head_dim 512";
        else if (info.num_splits < 1)
            pp = "num_splits " + std::to_string(info.num_splits) + " < 1";
        else if (num_splits >= 1 && info.num_splits != num_splits)  // every kernel splits as asked
            pp = "num_splits " + std::to_string(info.num_splits) + " for a request of exactly " +
                 std::to_string(num_splits);
        else if (info.workspace_bytes != uint64_t(ws_bytes))
            pp = "workspace_bytes " + std::to_string(info.workspace_bytes) +
                 " != fmha_plan_workspace_size " + std::to_string(ws_bytes);

        // The workspace, guard-banded, its payload NaN garbage.
        DeviceBuffer ws;
        if (ws_bytes > 0) ws = DeviceBuffer((ws_bytes + 1) / 2, 2, kGuard16);
        void *wsp = ws_bytes > 0 ? ws.data() : nullptr;
        Outputs second;
        r.error = run_once(data, ph.plan, wsp, ws_bytes, &r.status, &r.out);
        if (r.error.empty()) r.error = run_once(data, ph.plan, wsp, ws_bytes, &r.status, &second);
        if (!r.error.empty()) return r;
        r.rerun_identical = r.out == second;
        std::string why, ws_why;
        r.guards_ok = data.guards_intact(&why);
        if (r.guards_ok && ws_bytes > 0 && !ws.guards_intact(&ws_why)) {
            r.guards_ok = false;
            why = "workspace: " + ws_why;
        }
        r.cmp = data.compare(r.out);
        if (!r.guards_ok) r.cmp.detail = why + (r.cmp.detail.empty() ? "" : "; " + r.cmp.detail);
    } catch (const std::exception &e) {
        if (r.error.empty()) r.error = std::string("test harness: ") + e.what();
    }
    return r;
}

}  // namespace fmha_test
