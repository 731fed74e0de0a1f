// Init functions for the public versioned structs (callers that cannot use
// macros, like ctypes, Go and Rust, fill structs through these).
#include <cstring>

#include "errors.h"
#include "fmha/fmha.h"
#include "struct_versions.h"

namespace {

uint32_t current_version(const fmha_descriptor *) { return FMHA_DESCRIPTOR_VERSION; }
uint32_t current_version(const fmha_tensors *) { return FMHA_TENSORS_VERSION; }
uint32_t current_version(const fmha_plan_info *) { return FMHA_PLAN_INFO_VERSION; }
uint32_t current_version(const fmha_merge_descriptor *) { return FMHA_MERGE_DESCRIPTOR_VERSION; }


template <typename T>
fmha_status init_struct(T *s, uint32_t version, size_t size, const char *name) {
    fmha::clear_error();
    if (s == nullptr) return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT, "%s is NULL", name);
    if (size == 0) {
        const uint32_t latest = current_version(s);
        return latest == 1 ? fmha::fail(FMHA_STATUS_VERSION_MISMATCH,
                                        "%s version %u is unknown: this library knows version 1",
                                        name, version)
                           : fmha::fail(FMHA_STATUS_VERSION_MISMATCH,
                                        "%s version %u is unknown: this library knows versions 1 "
                                        "to %u",
                                        name, version, latest);
    }
    std::memset(s, 0, size);  // only the caller's version: an older struct is shorter
    s->version = version;
    return FMHA_STATUS_SUCCESS;
}

fmha_status set_strides(fmha_strides *out, bool bhsd, int64_t seqlen, int64_t num_heads,
                        int64_t head_dim) {
    fmha::clear_error();
    if (out == nullptr) return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT, "strides is NULL");
    if (seqlen < 1 || num_heads < 1 || head_dim < 1)
        return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT,
                          "seqlen %lld, num_heads %lld, head_dim %lld: all must be >= 1",
                          (long long)seqlen, (long long)num_heads, (long long)head_dim);
    // The batch stride is the product of all three: checked, not wrapped.
    int64_t heads_x_dim, batch;
    if (__builtin_mul_overflow(num_heads, head_dim, &heads_x_dim) ||
        __builtin_mul_overflow(seqlen, heads_x_dim, &batch))
        return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT,
                          "seqlen %lld x num_heads %lld x head_dim %lld elements: the batch "
                          "stride does not fit 64 bits",
                          (long long)seqlen, (long long)num_heads, (long long)head_dim);
    out->batch = batch;
    out->seq = bhsd ? head_dim : heads_x_dim;
    out->head = bhsd ? seqlen * head_dim : head_dim;  // <= batch
    out->dim = 1;
    return FMHA_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

FMHA_API fmha_status fmha_descriptor_init(fmha_descriptor *desc, uint32_t version) {
    const size_t size = fmha::descriptor_size(version);
    FMHA_TRY(init_struct(desc, version, size, "fmha_descriptor"));
    fmha_descriptor defaults;
    fmha::descriptor_defaults(&defaults);
    defaults.version = version;
    std::memcpy(desc, &defaults, size);
    return FMHA_STATUS_SUCCESS;
}

FMHA_API fmha_status fmha_merge_descriptor_init(fmha_merge_descriptor *desc, uint32_t version) {
    FMHA_TRY(init_struct(desc, version, fmha::merge_descriptor_size(version),
                         "fmha_merge_descriptor"));
    desc->dtype = FMHA_DTYPE_BF16;
    desc->part_strides.dim = desc->o_strides.dim = 1;
    return FMHA_STATUS_SUCCESS;
}

FMHA_API fmha_status fmha_tensors_init(fmha_tensors *t, uint32_t version) {
    return init_struct(t, version, fmha::tensors_size(version), "fmha_tensors");
}

FMHA_API fmha_status fmha_plan_info_init(fmha_plan_info *info, uint32_t version) {
    return init_struct(info, version, fmha::plan_info_size(version), "fmha_plan_info");
}

FMHA_API fmha_status fmha_strides_bshd(fmha_strides *out, int64_t seqlen, int64_t num_heads,
                                       int64_t head_dim) {
    return set_strides(out, false, seqlen, num_heads, head_dim);
}

FMHA_API fmha_status fmha_strides_bhsd(fmha_strides *out, int64_t seqlen, int64_t num_heads,
                                       int64_t head_dim) {
    return set_strides(out, true, seqlen, num_heads, head_dim);
}

}  // extern "C"
