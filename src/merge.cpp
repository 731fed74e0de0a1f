// fmha_create_merge_plan / fmha_run_merge: exact combination of partial
// attention results (cascade and context-parallel attention). The kernel is
// the split-KV combine of fmha_combine.cu with 16-bit parts.
#include <climits>
#include <cstdint>
#include <cstring>

#include "context.h"
#include "errors.h"
#include "fwd_params.h"
#include "images.h"
#include "kernels/params.h"
#include "plan.h"
#include "split_kv.h"
#include "struct_versions.h"
#include "validate.h"

namespace fmha {
namespace {

static_assert(FMHA_MERGE_MAX_PARTS <= kMaxCombineParts, "combine kernel parameter arrays");

fmha_status read_merge_descriptor(const fmha_merge_descriptor *d, MergeProblem *out) {
    if (d == nullptr) return fail(FMHA_STATUS_INVALID_ARGUMENT, "merge descriptor is NULL");
    if (merge_descriptor_size(d->version) == 0)
        return unknown_version("merge_descriptor.version", d->version,
                               FMHA_MERGE_DESCRIPTOR_VERSION, "fmha_merge_descriptor_init");
    MergeProblem m;
    if (d->dtype != FMHA_DTYPE_BF16 && d->dtype != FMHA_DTYPE_FP16)
        return fail(FMHA_STATUS_INVALID_ARGUMENT,
                    "merge_descriptor.dtype is %d: must be FMHA_DTYPE_BF16 (1) or "
                    "FMHA_DTYPE_FP16 (2)",
                    d->dtype);
    m.dtype = static_cast<fmha_dtype>(d->dtype);
    const struct {
        const char *name;
        int64_t value;
    } sizes[] = {{"batch", d->batch}, {"seqlen_q", d->seqlen_q}, {"num_heads", d->num_heads}};
    for (const auto &s : sizes)
        if (s.value < 1 || s.value > INT32_MAX)
            return fail(FMHA_STATUS_INVALID_ARGUMENT,
                        "merge_descriptor.%s is %lld: must be in [1, 2^31-1]", s.name,
                        (long long)s.value);
    if (d->head_dim < 8 || d->head_dim > 512 || d->head_dim % 8 != 0)
        return fail(FMHA_STATUS_NOT_SUPPORTED,
                    "merge_descriptor.head_dim is %lld: must be a multiple of 8 from 8 to 512",
                    (long long)d->head_dim);
    m.batch = d->batch;
    m.seqlen_q = d->seqlen_q;
    m.num_heads = d->num_heads;
    m.head_dim = d->head_dim;
    // Divided: the product of three values up to 2^31-1 may not fit 64 bits.
    if (m.batch * m.seqlen_q > INT32_MAX / m.num_heads)
        return fail(FMHA_STATUS_NOT_SUPPORTED,
                    "merge_descriptor: batch %lld x seqlen_q %lld x num_heads %lld is more than "
                    "2^31-1",
                    (long long)m.batch, (long long)m.seqlen_q, (long long)m.num_heads);
    const int64_t extents[3] = {m.batch, m.seqlen_q, m.num_heads};
    FMHA_TRY(check_strides("merge_descriptor", "part_strides", d->part_strides, extents));
    FMHA_TRY(check_strides("merge_descriptor", "o_strides", d->o_strides, extents));
    m.part = d->part_strides;
    m.o = d->o_strides;
    FMHA_TRY(check_no_overlap("merge_descriptor", m.o, extents, m.head_dim));
    if (d->num_parts < 1 || d->num_parts > FMHA_MERGE_MAX_PARTS)
        return fail(FMHA_STATUS_INVALID_ARGUMENT,
                    "merge_descriptor.num_parts is %d: must be in [1, %d]", d->num_parts,
                    FMHA_MERGE_MAX_PARTS);
    m.num_parts = d->num_parts;
    if (d->flags & ~FMHA_FLAG_WRITE_LSE)
        return fail(FMHA_STATUS_INVALID_ARGUMENT,
                    "merge_descriptor.flags is 0x%x: only FMHA_FLAG_WRITE_LSE (0x1) applies",
                    d->flags);
    m.write_lse = (d->flags & FMHA_FLAG_WRITE_LSE) != 0;
    if (d->device < 0)
        return fail(FMHA_STATUS_INVALID_ARGUMENT, "merge_descriptor.device is %d: must be >= 0",
                    d->device);
    if (d->reserved0 != 0)
        return fail(FMHA_STATUS_INVALID_ARGUMENT, "merge_descriptor.reserved0 is %d: must be 0",
                    d->reserved0);
    *out = m;
    return FMHA_STATUS_SUCCESS;
}

fmha_status check_aligned(const char *what, int index, const void *ptr, unsigned alignment) {
    if (ptr == nullptr)
        return index >= 0 ? fail(FMHA_STATUS_INVALID_ARGUMENT, "%s[%d] is NULL", what, index)
                          : fail(FMHA_STATUS_INVALID_ARGUMENT, "%s is NULL", what);
    if (reinterpret_cast<uintptr_t>(ptr) % alignment != 0)
        return index >= 0 ? fail(FMHA_STATUS_MISALIGNED, "%s[%d] is %p: must be %u-byte aligned",
                                 what, index, ptr, alignment)
                          : fail(FMHA_STATUS_MISALIGNED, "%s is %p: must be %u-byte aligned", what,
                                 ptr, alignment);
    return FMHA_STATUS_SUCCESS;
}

}  // namespace
}  // namespace fmha

extern "C" {

FMHA_API fmha_status fmha_create_merge_plan(fmha_plan **plan_out,
                                            const fmha_merge_descriptor *desc) {
    fmha::clear_error();
    if (plan_out == nullptr)
        return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT, "plan (the output pointer) is NULL");
    *plan_out = nullptr;
    fmha::MergeProblem m;
    FMHA_TRY(fmha::read_merge_descriptor(desc, &m));
    fmha::DeviceContext dc;
    fmha_plan *plan;
    FMHA_TRY(fmha::new_device_plan(desc->device, "merge_descriptor", &plan, &dc));
    plan->is_merge = true;
    plan->merge = m;
    const fmha::Driver *drv = plan->drv;
    plan->choice.family = FMHA_KERNEL_AUTO;
    plan->choice.image_family = "combine";
    plan->choice.combine_team = fmha::combine_team(m.head_dim, m.num_parts);
    plan->choice.kernel_name = fmha::merge_kernel_name(m.dtype, plan->choice.combine_team);
    plan->choice.threads = 128;
    plan->choice.num_splits = m.num_parts;
    fmha_status st = FMHA_STATUS_SUCCESS;
    if (dc.sm < 80)
        st = fmha::fail(FMHA_STATUS_NOT_SUPPORTED,
                        "device compute capability is sm_%d: libfmha needs sm_80 or newer", dc.sm);
    if (st == FMHA_STATUS_SUCCESS) {
        plan->image = fmha::find_image("combine", dc.sm);
        if (plan->image == nullptr)
            st = fmha::fail(FMHA_STATUS_NO_KERNEL_IMAGE,
                            "no embedded combine kernel image runs on sm_%d", dc.sm);
    }
    if (st == FMHA_STATUS_SUCCESS) {
        plan->function_dependent = fmha::launches_as_dependent(*plan->image, dc.sm);
        st = fmha::load_function(*drv, dc.ctx, *plan->image, plan->choice.kernel_name,
                                 &plan->function);
    }
    if (st != FMHA_STATUS_SUCCESS) {
        fmha_destroy_plan(plan);
        return st;
    }
    *plan_out = plan;
    return FMHA_STATUS_SUCCESS;
}

FMHA_API fmha_status fmha_run_merge(const fmha_plan *plan, const void *const *o_parts,
                                    const float *const *lse_parts, void *o, float *lse,
                                    fmha_stream stream) {
    fmha::clear_error();
    if (plan == nullptr) return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT, "plan is NULL");
    if (!plan->is_merge)
        return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT,
                          "plan is an attention plan: fmha_run_merge needs one from "
                          "fmha_create_merge_plan");
    const fmha::MergeProblem &m = plan->merge;
    if (o_parts == nullptr) return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT, "o_parts is NULL");
    if (lse_parts == nullptr)
        return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT, "lse_parts is NULL");
    fmha::CombineParams cp{};
    for (int i = 0; i < m.num_parts; ++i) {
        FMHA_TRY(fmha::check_aligned("o_parts", i, o_parts[i], 16));
        FMHA_TRY(fmha::check_aligned("lse_parts", i, lse_parts[i], 4));
        cp.o_parts[i] = o_parts[i];
        cp.lse_parts[i] = lse_parts[i];
    }
    FMHA_TRY(fmha::check_aligned("o", -1, o, 16));
    if (m.write_lse) FMHA_TRY(fmha::check_aligned("lse", -1, lse, 4));
    const int64_t s = m.seqlen_q, h = m.num_heads;
    fmha::CombineShape &sh = cp.shape;
    sh.part_stride = {m.part.batch, m.part.seq, m.part.head};
    sh.lse_part_stride = {h * s, 1, s};  // [batch, heads, seqlen_q], as fmha_run writes it
    sh.o = o;
    sh.o_stride = {m.o.batch, m.o.seq, m.o.head};
    sh.lse = m.write_lse ? lse : nullptr;
    sh.lse_stride = {h * s, 1, s};
    sh.rows = m.batch * s;
    sh.seqlen = static_cast<int32_t>(s);
    sh.heads = static_cast<int32_t>(h);
    sh.head_dim = static_cast<int32_t>(m.head_dim);
    sh.num_parts = m.num_parts;
    fmha::ScopedContext scope(*plan->drv, plan->ctx);
    FMHA_TRY(scope.status());
    // A team of threads per (row, head), launched dependent: it is scheduled
    // while the runs that computed the parts drain, and waits for their memory.
    return fmha::launch_dependent(*plan->drv, plan->function_dependent, plan->function,
                                  fmha::combine_blocks(sh.rows * h, plan->choice.combine_team), 1, 1,
                                  fmha::kCombineThreads,
                                  0, reinterpret_cast<CUstream>(stream), &cp,
                                  plan->choice.kernel_name);
}

}  // extern "C"
