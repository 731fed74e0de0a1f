// Sizes of each version of the public versioned structs. A caller built
// against an older header passes a shorter struct: the library reads and
// writes only that version's prefix and takes defaults for the rest.
#pragma once
#include <cstddef>
#include <cstring>

#include "errors.h"
#include "fmha/fmha.h"

namespace fmha {

inline size_t descriptor_size(uint32_t version) {
    switch (version) {
    case 1: return offsetof(fmha_descriptor, window_left);
    case 2: return offsetof(fmha_descriptor, total_q);
    case 3: return sizeof(fmha_descriptor);
    }
    return 0;
}

inline size_t tensors_size(uint32_t version) {
    switch (version) {
    case 1: return offsetof(fmha_tensors, sinks);
    case 2: return offsetof(fmha_tensors, cu_seqlens_q);
    case 3: return sizeof(fmha_tensors);
    }
    return 0;
}

inline size_t plan_info_size(uint32_t version) {
    switch (version) {
    case 1: return offsetof(fmha_plan_info, num_splits);
    case 2: return sizeof(fmha_plan_info);
    }
    return 0;
}

inline size_t merge_descriptor_size(uint32_t version) {
    return version == 1 ? sizeof(fmha_merge_descriptor) : 0;
}

// What every entry point reports for a struct version this build does not
// know: `field` and its value, the versions known, and `init`, the call that
// fills a struct of the caller's header version.
inline fmha_status unknown_version(const char *field, uint32_t version, uint32_t latest,
                                   const char *init) {
    if (latest == 1)
        return fail(FMHA_STATUS_VERSION_MISMATCH,
                    "%s is %u: this library knows version 1 (call %s)", field, version, init);
    return fail(FMHA_STATUS_VERSION_MISMATCH,
                "%s is %u: this library knows versions 1 to %u (call %s)", field, version, latest,
                init);
}

// Defaults of the fields after version 1.
inline void descriptor_defaults(fmha_descriptor *d) {
    std::memset(d, 0, sizeof *d);
    d->dtype = FMHA_DTYPE_BF16;
    d->q_strides.dim = d->k_strides.dim = d->v_strides.dim = d->o_strides.dim = 1;
    d->window_left = -1;
    d->window_right = -1;
}

// The caller's struct as the current version: its prefix over the defaults.
inline fmha_descriptor widen(const fmha_descriptor *in) {
    fmha_descriptor d;
    descriptor_defaults(&d);
    std::memcpy(&d, in, descriptor_size(in->version));
    return d;
}

inline fmha_tensors widen(const fmha_tensors *in) {
    fmha_tensors t;
    std::memset(&t, 0, sizeof t);
    std::memcpy(&t, in, tensors_size(in->version));
    return t;
}

}  // namespace fmha
