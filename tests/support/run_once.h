// One run of a plan for the dense and the serving runners (private to
// tests/support): the plan's owner, the plan calls before a run, and a run
// on the default stream that waits and copies the outputs back.
#pragma once
#include <cuda_runtime_api.h>

#include <string>

#include "fmha/fmha.h"
#include "fmha_test/runner.h"

namespace fmha_test {

struct PlanHolder {
    fmha_plan *plan = nullptr;
    ~PlanHolder() { fmha_destroy_plan(plan); }
};

// fmha_create_plan into ph: returns "" or what failed, *status its status.
inline std::string create_plan(PlanHolder &ph, const fmha_descriptor &desc, fmha_status *status) {
    *status = fmha_create_plan(&ph.plan, &desc);
    if (*status != FMHA_STATUS_SUCCESS)
        return std::string("fmha_create_plan: ") + fmha_last_error_message();
    return "";
}

// fmha_plan_workspace_size into *bytes: returns "" or what failed, *status its status.
inline std::string workspace_size(const fmha_plan *plan, size_t *bytes, fmha_status *status) {
    *status = fmha_plan_workspace_size(plan, bytes);
    if (*status != FMHA_STATUS_SUCCESS)
        return std::string("fmha_plan_workspace_size: ") + fmha_last_error_message();
    return "";
}

// Runs once on the default stream and waits; returns "" or what went wrong.
// Data: CaseData or ServingData (prefill_outputs, tensors, download).
template <typename Data>
std::string run_once(Data &data, const fmha_plan *plan, void *ws, size_t ws_bytes,
                     fmha_status *status, Outputs *out) {
    data.prefill_outputs();
    const fmha_tensors t = data.tensors();
    *status = fmha_run(plan, &t, ws, ws_bytes, nullptr);
    if (*status != FMHA_STATUS_SUCCESS) return std::string("fmha_run: ") + fmha_last_error_message();
    cudaError_t err = cudaDeviceSynchronize();
    if (err == cudaSuccess) err = cudaGetLastError();
    if (err != cudaSuccess)
        return std::string("after fmha_run: ") + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
    *out = data.download();
    return "";
}

}  // namespace fmha_test
