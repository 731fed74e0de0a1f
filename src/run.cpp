// fmha_run: argument checks, then the family's launcher. Nothing here
// allocates, synchronizes or calls a slow driver entry point.
#include <cstdint>

#include "context.h"
#include "errors.h"
#include "plan.h"
#include "struct_versions.h"

namespace {

fmha_status check_pointer(const char *name, const void *ptr) {
    if (ptr == nullptr)
        return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT, "tensors.%s is NULL", name);
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
        return fmha::fail(FMHA_STATUS_MISALIGNED,
                          "tensors.%s is %p: must be 16-byte aligned", name, ptr);
    return FMHA_STATUS_SUCCESS;
}

// A version-3 index array: required iff its flag is set, int32-aligned.
fmha_status check_index_array(const char *name, const int32_t *ptr, bool required,
                              const char *flag, uint32_t tensors_version) {
    if (!required) return FMHA_STATUS_SUCCESS;
    if (ptr == nullptr)
        return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT,
                          "tensors.%s is NULL but the descriptor sets %s%s", name, flag,
                          tensors_version < 3 ? " (fmha_tensors before version 3 has no index "
                                                "arrays)"
                                              : "");
    if (reinterpret_cast<uintptr_t>(ptr) % 4 != 0)
        return fmha::fail(FMHA_STATUS_MISALIGNED, "tensors.%s is %p: must be 4-byte aligned",
                          name, (const void *)ptr);
    return FMHA_STATUS_SUCCESS;
}

}  // namespace

extern "C" FMHA_API fmha_status fmha_run(const fmha_plan *plan, const fmha_tensors *t_in,
                                         void *workspace, size_t workspace_bytes,
                                         fmha_stream stream) {
    fmha::clear_error();
    if (plan == nullptr) return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT, "plan is NULL");
    if (plan->is_merge)
        return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT,
                          "plan is a merge plan: run it with fmha_run_merge");
    if (t_in == nullptr) return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT, "tensors is NULL");
    if (fmha::tensors_size(t_in->version) == 0)
        return fmha::unknown_version("tensors.version", t_in->version, FMHA_TENSORS_VERSION,
                                     "fmha_tensors_init");
    const fmha_tensors wide = fmha::widen(t_in);
    const fmha_tensors *t = &wide;
    if (t->reserved0 != 0)
        return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT, "tensors.reserved0 is %u: must be 0",
                          t->reserved0);
    FMHA_TRY(check_pointer("q", t->q));
    FMHA_TRY(check_pointer("k", t->k));
    FMHA_TRY(check_pointer("v", t->v));
    FMHA_TRY(check_pointer("o", t->o));
    if (plan->problem.write_lse) {
        if (t->lse == nullptr)
            return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT,
                              "tensors.lse is NULL but the descriptor sets FMHA_FLAG_WRITE_LSE");
        if (reinterpret_cast<uintptr_t>(t->lse) % 4 != 0)
            return fmha::fail(FMHA_STATUS_MISALIGNED,
                              "tensors.lse is %p: must be 4-byte aligned", (void *)t->lse);
    }
    if (plan->problem.sinks) {
        if (t->sinks == nullptr)
            return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT,
                              "tensors.sinks is NULL but the descriptor sets FMHA_FLAG_SINKS%s",
                              t_in->version < 2 ? " (fmha_tensors version 1 has no sinks)" : "");
        if (reinterpret_cast<uintptr_t>(t->sinks) % 4 != 0)
            return fmha::fail(FMHA_STATUS_MISALIGNED,
                              "tensors.sinks is %p: must be 4-byte aligned", (const void *)t->sinks);
    }
    const fmha::Problem &p = plan->problem;
    FMHA_TRY(check_index_array("cu_seqlens_q", t->cu_seqlens_q, p.varlen_q, "FMHA_FLAG_VARLEN_Q",
                               t_in->version));
    FMHA_TRY(check_index_array("cu_seqlens_k", t->cu_seqlens_k, p.varlen_k, "FMHA_FLAG_VARLEN_K",
                               t_in->version));
    FMHA_TRY(check_index_array("seqused_k", t->seqused_k, p.seqused_k, "FMHA_FLAG_SEQUSED_K",
                               t_in->version));
    FMHA_TRY(check_index_array("block_table", t->block_table, p.paged_kv, "FMHA_FLAG_PAGED_KV",
                               t_in->version));
    const uint64_t needed = plan->choice.workspace_bytes;
    if (workspace_bytes < needed)
        return fmha::fail(FMHA_STATUS_WORKSPACE_TOO_SMALL,
                          "workspace_bytes is %zu: this plan needs %llu (fmha_plan_workspace_size)",
                          workspace_bytes, (unsigned long long)needed);
    if (needed > 0 && workspace == nullptr)
        return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT,
                          "workspace is NULL: this plan needs %llu bytes",
                          (unsigned long long)needed);
    if (needed > 0 && reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
        return fmha::fail(FMHA_STATUS_MISALIGNED, "workspace is %p: must be 16-byte aligned",
                          workspace);

    fmha::ScopedContext scope(*plan->drv, plan->ctx);
    FMHA_TRY(scope.status());
    return plan->choice.launch(*plan, *t, workspace, reinterpret_cast<CUstream>(stream));
}
