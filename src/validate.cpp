#include "validate.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "errors.h"
#include "kernels/fast_divide.h"
#include "kernel_select.h"
#include "struct_versions.h"

namespace fmha {
namespace {

constexpr int64_t kAlignElements = 8;  // 16 bytes of a 16-bit type
// Farthest row of a tensor from its base, in elements (2 EiB of a 16-bit
// type): far past any address space, and small enough that a stride times
// its extent, in bytes, still fits 64 bits.
constexpr int64_t kMaxReachElements = int64_t(1) << 60;

fmha_status check_positive(const char *field, int64_t value) {
    if (value < 1)
        return fail(FMHA_STATUS_INVALID_ARGUMENT, "descriptor.%s is %lld: must be >= 1", field,
                    (long long)value);
    return FMHA_STATUS_SUCCESS;
}

// A size-1 dimension's stride is never followed: store 0 so no kernel or
// tensor map sees an odd value.
fmha_strides normalized(fmha_strides s, const int64_t (&extents)[3]) {
    if (extents[0] == 1) s.batch = 0;
    if (extents[1] == 1) s.seq = 0;
    if (extents[2] == 1) s.head = 0;
    return s;
}

// A version-3 field that only applies under a flag must stay 0 without it,
// so a forgotten flag is caught instead of silently ignored.
fmha_status unused_is_zero(const char *field, int64_t value, const char *flag) {
    if (value != 0)
        return fail(FMHA_STATUS_INVALID_ARGUMENT,
                    "descriptor.%s is %lld: it is only used with %s and must be 0 without it",
                    field, (long long)value, flag);
    return FMHA_STATUS_SUCCESS;
}

fmha_status check_range(const char *field, int64_t value, int64_t lo, int64_t hi) {
    if (value < lo || value > hi)
        return fail(FMHA_STATUS_INVALID_ARGUMENT, "descriptor.%s is %lld: must be in [%lld, %lld]",
                    field, (long long)value, (long long)lo, (long long)hi);
    return FMHA_STATUS_SUCCESS;
}

// Version-3 fields: variable lengths, paged KV and split-KV.
fmha_status read_layout_fields(const fmha_descriptor &d, Problem *p) {
    const int64_t kMaxRows = (int64_t(1) << 31) - 1;
    p->varlen_q = (d.flags & FMHA_FLAG_VARLEN_Q) != 0;
    p->varlen_k = (d.flags & FMHA_FLAG_VARLEN_K) != 0;
    p->seqused_k = (d.flags & FMHA_FLAG_SEQUSED_K) != 0;
    p->paged_kv = (d.flags & FMHA_FLAG_PAGED_KV) != 0;
    if (p->varlen_q) FMHA_TRY(check_range("total_q", d.total_q, 0, kMaxRows));
    else FMHA_TRY(unused_is_zero("total_q", d.total_q, "FMHA_FLAG_VARLEN_Q"));
    if (p->varlen_k && !p->paged_kv) FMHA_TRY(check_range("total_k", d.total_k, 0, kMaxRows));
    else FMHA_TRY(unused_is_zero("total_k", d.total_k,
                                 "FMHA_FLAG_VARLEN_K (without FMHA_FLAG_PAGED_KV)"));
    if (p->paged_kv) {
        FMHA_TRY(check_range("page_size", d.page_size, 1, kMaxRows));
        FMHA_TRY(check_range("num_pages", d.num_pages, 1, kMaxRows));
        FMHA_TRY(check_range("max_pages_per_seq", d.max_pages_per_seq, 1, kMaxRows));
        if (d.max_pages_per_seq * d.page_size < d.seqlen_k)
            return fail(FMHA_STATUS_INVALID_ARGUMENT,
                        "descriptor.max_pages_per_seq is %lld: with page_size %d it holds %lld "
                        "keys, fewer than seqlen_k (%lld)",
                        (long long)d.max_pages_per_seq, d.page_size,
                        (long long)(d.max_pages_per_seq * d.page_size), (long long)d.seqlen_k);
        if (d.batch * d.max_pages_per_seq > kMaxRows)
            return fail(FMHA_STATUS_NOT_SUPPORTED,
                        "descriptor.max_pages_per_seq is %lld: batch %lld x max_pages_per_seq = "
                        "%lld block-table entries, more than 2^31-1",
                        (long long)d.max_pages_per_seq, (long long)d.batch,
                        (long long)(d.batch * d.max_pages_per_seq));
    } else {
        FMHA_TRY(unused_is_zero("page_size", d.page_size, "FMHA_FLAG_PAGED_KV"));
        FMHA_TRY(unused_is_zero("num_pages", d.num_pages, "FMHA_FLAG_PAGED_KV"));
        FMHA_TRY(unused_is_zero("max_pages_per_seq", d.max_pages_per_seq, "FMHA_FLAG_PAGED_KV"));
    }
    FMHA_TRY(check_range("num_splits", d.num_splits, 0, kMaxSplits));
    p->total_q = p->varlen_q ? d.total_q : 0;
    p->total_k = p->varlen_k && !p->paged_kv ? d.total_k : 0;
    p->page_size = d.page_size;
    if (p->paged_kv) {
        p->page_div = make_fast_divide(d.page_size);
    }
    p->num_pages = d.num_pages;
    p->max_pages_per_seq = d.max_pages_per_seq;
    p->num_splits = d.num_splits;
    return FMHA_STATUS_SUCCESS;
}

}  // namespace

fmha_status apply_forced_kernel(Problem *p) {
    if (p->kernel != FMHA_KERNEL_AUTO) return FMHA_STATUS_SUCCESS;  // an explicit family wins
    const char *env = std::getenv("FMHA_FORCE_KERNEL");
    if (env == nullptr || env[0] == '\0') return FMHA_STATUS_SUCCESS;
    if (std::strcmp(env, "auto") == 0) return FMHA_STATUS_SUCCESS;
    if (std::strcmp(env, "portable") == 0) p->kernel = FMHA_KERNEL_PORTABLE;
    else if (std::strcmp(env, "hopper") == 0) p->kernel = FMHA_KERNEL_HOPPER;
    else if (std::strcmp(env, "decode") == 0) p->kernel = FMHA_KERNEL_DECODE;
    else
        return fail(FMHA_STATUS_INVALID_ARGUMENT,
                    "environment FMHA_FORCE_KERNEL is \"%s\": must be auto, portable, hopper "
                    "or decode",
                    env);
    return FMHA_STATUS_SUCCESS;
}

fmha_status check_strides(const char *owner, const char *tensor, const fmha_strides &s,
                          const int64_t (&extents)[3]) {
    if (s.dim != 1)
        return fail(FMHA_STATUS_NOT_SUPPORTED,
                    "%s.%s.dim is %lld: the last dimension must be contiguous (1)", owner, tensor,
                    (long long)s.dim);
    const struct {
        const char *name;
        int64_t value;
    } fields[] = {{"batch", s.batch}, {"seq", s.seq}, {"head", s.head}};
    for (int i = 0; i < 3; ++i) {
        const auto &f = fields[i];
        if (extents[i] == 1) continue;
        if (f.value < 0)
            return fail(FMHA_STATUS_NOT_SUPPORTED,
                        "%s.%s.%s is %lld: negative strides are not supported", owner, tensor,
                        f.name, (long long)f.value);
        if (f.value % kAlignElements != 0)
            return fail(FMHA_STATUS_MISALIGNED,
                        "%s.%s.%s is %lld: must be a multiple of 8 elements (16 bytes)", owner,
                        tensor, f.name, (long long)f.value);
    }
    // The farthest row's offset, summed without overflow: the kernels, the
    // tensor maps and check_no_overlap multiply strides by extents (and by
    // the element size) in 64 bits, which a larger reach would wrap.
    int64_t reach = 0;
    for (int i = 0; i < 3; ++i) {
        if (extents[i] <= 1) continue;
        if (fields[i].value > (kMaxReachElements - reach) / (extents[i] - 1))
            return fail(FMHA_STATUS_INVALID_ARGUMENT,
                        "%s.%s.%s is %lld: over %lld %s entries the tensor reaches more than "
                        "2^60 elements from its base",
                        owner, tensor, fields[i].name, (long long)fields[i].value,
                        (long long)extents[i], fields[i].name);
        reach += fields[i].value * (extents[i] - 1);
    }
    return FMHA_STATUS_SUCCESS;
}

fmha_status check_no_overlap(const char *owner, const fmha_strides &o,
                             const int64_t (&extents)[3], int64_t head_dim) {
    struct Dim {
        const char *name;
        int64_t stride, extent;
    } dims[] = {{"batch", o.batch, extents[0]},
                {"seq", o.seq, extents[1]},
                {"head", o.head, extents[2]},
                {"dim", 1, head_dim}};
    std::sort(std::begin(dims), std::end(dims),
              [](const Dim &a, const Dim &b) { return a.stride < b.stride; });
    int64_t span = 1;  // elements covered by the dims seen so far
    for (const Dim &d : dims) {
        if (d.extent == 1) continue;
        if (d.stride < span)
            return fail(FMHA_STATUS_INVALID_ARGUMENT,
                        "%s.o_strides.%s is %lld: O's dimensions, taken by increasing stride, "
                        "must each step past the span of the smaller ones (>= %lld here), so "
                        "that output elements cannot overlap",
                        owner, d.name, (long long)d.stride, (long long)span);
        span = d.stride * d.extent;
    }
    return FMHA_STATUS_SUCCESS;
}

fmha_status read_descriptor(const fmha_descriptor *desc_in, Problem *out) {
    if (desc_in == nullptr) return fail(FMHA_STATUS_INVALID_ARGUMENT, "descriptor is NULL");
    if (descriptor_size(desc_in->version) == 0)
        return unknown_version("descriptor.version", desc_in->version, FMHA_DESCRIPTOR_VERSION,
                               "fmha_descriptor_init");
    const fmha_descriptor wide = widen(desc_in);
    const fmha_descriptor *desc = &wide;
    Problem p{};
    if (desc->dtype != FMHA_DTYPE_BF16 && desc->dtype != FMHA_DTYPE_FP16)
        return fail(FMHA_STATUS_INVALID_ARGUMENT,
                    "descriptor.dtype is %d: must be FMHA_DTYPE_BF16 (1) or FMHA_DTYPE_FP16 (2)",
                    desc->dtype);
    p.dtype = static_cast<fmha_dtype>(desc->dtype);
    FMHA_TRY(check_positive("batch", desc->batch));
    FMHA_TRY(check_positive("num_q_heads", desc->num_q_heads));
    FMHA_TRY(check_positive("num_kv_heads", desc->num_kv_heads));
    FMHA_TRY(check_positive("seqlen_q", desc->seqlen_q));
    FMHA_TRY(check_positive("seqlen_k", desc->seqlen_k));
    FMHA_TRY(check_positive("head_dim", desc->head_dim));
    if (desc->num_q_heads % desc->num_kv_heads != 0)
        return fail(FMHA_STATUS_INVALID_ARGUMENT,
                    "descriptor.num_q_heads is %lld: must be a multiple of num_kv_heads (%lld)",
                    (long long)desc->num_q_heads, (long long)desc->num_kv_heads);
    if (desc->head_dim_v < 0)
        return fail(FMHA_STATUS_INVALID_ARGUMENT,
                    "descriptor.head_dim_v is %lld: must be >= 0 (0 means head_dim)",
                    (long long)desc->head_dim_v);
    p.batch = desc->batch;
    p.num_q_heads = desc->num_q_heads;
    p.num_kv_heads = desc->num_kv_heads;
    p.seqlen_q = desc->seqlen_q;
    p.seqlen_k = desc->seqlen_k;
    p.head_dim = desc->head_dim;
    p.head_dim_v = desc->head_dim_v == 0 ? desc->head_dim : desc->head_dim_v;

    if (!is_supported_head_dim(p.head_dim))
        return fail(FMHA_STATUS_NOT_SUPPORTED,
                    "descriptor.head_dim is %lld: supported head dims are 64, 96, 128, 256, 512",
                    (long long)p.head_dim);
    if (p.head_dim_v != p.head_dim)
        return fail(FMHA_STATUS_NOT_SUPPORTED,
                    "descriptor.head_dim_v is %lld: must equal head_dim (%lld) in this version",
                    (long long)p.head_dim_v, (long long)p.head_dim);
    const int64_t kMaxSeqlen = (int64_t(1) << 31) - 1;
    if (p.seqlen_q > kMaxSeqlen || p.seqlen_k > kMaxSeqlen)
        return fail(FMHA_STATUS_NOT_SUPPORTED,
                    "descriptor.seqlen_%s is %lld: at most 2^31-1 is supported",
                    p.seqlen_q > kMaxSeqlen ? "q" : "k",
                    (long long)(p.seqlen_q > kMaxSeqlen ? p.seqlen_q : p.seqlen_k));
    if (p.num_q_heads > 65535 || p.batch > kMaxSeqlen)
        return fail(FMHA_STATUS_NOT_SUPPORTED,
                    "descriptor.%s is %lld: at most %lld is supported",
                    p.num_q_heads > 65535 ? "num_q_heads" : "batch",
                    (long long)(p.num_q_heads > 65535 ? p.num_q_heads : p.batch),
                    (long long)(p.num_q_heads > 65535 ? 65535 : kMaxSeqlen));

    const uint32_t known_flags =
        FMHA_FLAG_WRITE_LSE | (desc->version >= 2 ? FMHA_FLAG_SINKS : 0u) |
        (desc->version >= 3 ? FMHA_FLAG_VARLEN_Q | FMHA_FLAG_VARLEN_K | FMHA_FLAG_SEQUSED_K |
                                  FMHA_FLAG_PAGED_KV
                            : 0u);
    if (desc->flags & ~known_flags)
        return fail(FMHA_STATUS_INVALID_ARGUMENT,
                    "descriptor.flags is 0x%x: unknown bits 0x%x (for descriptor version %u)",
                    desc->flags, desc->flags & ~known_flags, desc->version);
    p.write_lse = (desc->flags & FMHA_FLAG_WRITE_LSE) != 0;
    p.sinks = (desc->flags & FMHA_FLAG_SINKS) != 0;
    FMHA_TRY(read_layout_fields(*desc, &p));
    // Extents of the (batch, seq, head) dims as addressed: packed tensors have
    // no batch dim; paged K/V are (page, row in page, head).
    const int64_t q_extents[3] = {p.varlen_q ? 1 : p.batch, p.varlen_q ? p.total_q : p.seqlen_q,
                                  p.num_q_heads};
    const int64_t kv_extents[3] = {
        p.paged_kv ? p.num_pages : (p.varlen_k ? 1 : p.batch),
        p.paged_kv ? p.page_size : (p.varlen_k ? p.total_k : p.seqlen_k), p.num_kv_heads};
    FMHA_TRY(check_strides("descriptor", "q_strides", desc->q_strides, q_extents));
    FMHA_TRY(check_strides("descriptor", "k_strides", desc->k_strides, kv_extents));
    FMHA_TRY(check_strides("descriptor", "v_strides", desc->v_strides, kv_extents));
    FMHA_TRY(check_strides("descriptor", "o_strides", desc->o_strides, q_extents));
    p.q = normalized(desc->q_strides, q_extents);
    p.k = normalized(desc->k_strides, kv_extents);
    p.v = normalized(desc->v_strides, kv_extents);
    p.o = normalized(desc->o_strides, q_extents);
    FMHA_TRY(check_no_overlap("descriptor", p.o, q_extents, p.head_dim_v));

    float scale = desc->softmax_scale;
    if (!std::isfinite(scale) || scale < 0.0f)
        return fail(FMHA_STATUS_INVALID_ARGUMENT,
                    "descriptor.softmax_scale is %g: must be finite and > 0 (0 means "
                    "1/sqrt(head_dim))",
                    (double)scale);
    p.softmax_scale = scale == 0.0f ? 1.0f / std::sqrt((float)p.head_dim) : scale;

    if (desc->mask < FMHA_MASK_NONE || desc->mask > FMHA_MASK_CAUSAL_BOTTOM_RIGHT)
        return fail(FMHA_STATUS_INVALID_ARGUMENT,
                    "descriptor.mask is %d: must be NONE (0), CAUSAL_TOP_LEFT (1) or "
                    "CAUSAL_BOTTOM_RIGHT (2)",
                    desc->mask);
    p.mask = static_cast<fmha_mask>(desc->mask);
    if (desc->window_left < -1 || desc->window_right < -1)
        return fail(FMHA_STATUS_INVALID_ARGUMENT,
                    "descriptor.window_%s is %d: must be >= 0, or -1 for unbounded",
                    desc->window_left < -1 ? "left" : "right",
                    desc->window_left < -1 ? desc->window_left : desc->window_right);
    p.window_left = desc->window_left;
    p.window_right = desc->window_right;
    if (!std::isfinite(desc->softcap) || desc->softcap < 0.0f)
        return fail(FMHA_STATUS_INVALID_ARGUMENT,
                    "descriptor.softcap is %g: must be finite and >= 0 (0 turns it off)",
                    (double)desc->softcap);
    p.softcap = desc->softcap;
    if (desc->reserved1 != 0)
        return fail(FMHA_STATUS_INVALID_ARGUMENT, "descriptor.reserved1 is %d: must be 0",
                    desc->reserved1);
    if (desc->kernel < FMHA_KERNEL_AUTO || desc->kernel > FMHA_KERNEL_DECODE)
        return fail(FMHA_STATUS_INVALID_ARGUMENT,
                    "descriptor.kernel is %d: must be AUTO (0), PORTABLE (1), HOPPER (2) or "
                    "DECODE (3)",
                    desc->kernel);
    p.kernel = static_cast<fmha_kernel_family>(desc->kernel);
    if (desc->device < 0)
        return fail(FMHA_STATUS_INVALID_ARGUMENT, "descriptor.device is %d: must be >= 0",
                    desc->device);
    p.device = desc->device;
    if (desc->reserved0 != 0)
        return fail(FMHA_STATUS_INVALID_ARGUMENT, "descriptor.reserved0 is %d: must be 0",
                    desc->reserved0);
    *out = p;
    return FMHA_STATUS_SUCCESS;
}

fmha_status check_device(const Problem &p, const DeviceLimits &dev, KernelChoice *choice) {
    if (dev.sm < 80)
        return fail(FMHA_STATUS_NOT_SUPPORTED,
                    "device compute capability is sm_%d: libfmha needs sm_80 or newer", dev.sm);
    return select_kernel(p, dev, choice);
}

}  // namespace fmha
