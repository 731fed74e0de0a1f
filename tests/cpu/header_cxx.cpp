// The public header must compile as C++11 with -Werror -pedantic, inside and
// outside a namespace-free translation unit, and its types must be usable
// from C++ without casts.
#include "fmha/fmha.h"
#include "fmha/fmha.h"  // include guard

#include <cstddef>
#include <type_traits>

static_assert(std::is_standard_layout<fmha_descriptor>::value, "C layout");
static_assert(std::is_trivially_copyable<fmha_descriptor>::value, "C layout");
static_assert(std::is_standard_layout<fmha_tensors>::value, "C layout");
static_assert(std::is_standard_layout<fmha_plan_info>::value, "C layout");
static_assert(std::is_standard_layout<fmha_merge_descriptor>::value, "C layout");
static_assert(sizeof(fmha_strides) == 32, "four int64 strides");
static_assert(FMHA_VERSION_NUMBER == FMHA_VERSION_MAJOR * 10000 + FMHA_VERSION_MINOR * 100 +
                                         FMHA_VERSION_PATCH,
              "version number");

// The ABI on LP64 (x86_64, aarch64): field offsets and sizes the Rust, Go
// and Python bindings mirror. Fields may only be appended; a change here is
// an ABI break and must come with a new struct version.
#if defined(__LP64__)
static_assert(offsetof(fmha_descriptor, version) == 0, "ABI");
static_assert(offsetof(fmha_descriptor, dtype) == 4, "ABI");
static_assert(offsetof(fmha_descriptor, batch) == 8, "ABI");
static_assert(offsetof(fmha_descriptor, head_dim_v) == 56, "ABI");
static_assert(offsetof(fmha_descriptor, q_strides) == 64, "ABI");
static_assert(offsetof(fmha_descriptor, o_strides) == 160, "ABI");
static_assert(offsetof(fmha_descriptor, softmax_scale) == 192, "ABI");
static_assert(offsetof(fmha_descriptor, mask) == 196, "ABI");
static_assert(offsetof(fmha_descriptor, flags) == 200, "ABI");
static_assert(offsetof(fmha_descriptor, kernel) == 204, "ABI");
static_assert(offsetof(fmha_descriptor, device) == 208, "ABI");
static_assert(offsetof(fmha_descriptor, reserved0) == 212, "ABI");
static_assert(offsetof(fmha_descriptor, window_left) == 216, "ABI: version 2 starts here");
static_assert(offsetof(fmha_descriptor, window_right) == 220, "ABI");
static_assert(offsetof(fmha_descriptor, softcap) == 224, "ABI");
static_assert(offsetof(fmha_descriptor, reserved1) == 228, "ABI");
static_assert(offsetof(fmha_descriptor, total_q) == 232, "ABI: version 3 starts here");
static_assert(offsetof(fmha_descriptor, total_k) == 240, "ABI");
static_assert(offsetof(fmha_descriptor, num_pages) == 248, "ABI");
static_assert(offsetof(fmha_descriptor, max_pages_per_seq) == 256, "ABI");
static_assert(offsetof(fmha_descriptor, page_size) == 264, "ABI");
static_assert(offsetof(fmha_descriptor, num_splits) == 268, "ABI");
static_assert(sizeof(fmha_descriptor) == 272, "ABI");
static_assert(offsetof(fmha_tensors, q) == 8, "ABI");
static_assert(offsetof(fmha_tensors, lse) == 40, "ABI");
static_assert(offsetof(fmha_tensors, sinks) == 48, "ABI: version 2 starts here");
static_assert(offsetof(fmha_tensors, cu_seqlens_q) == 56, "ABI: version 3 starts here");
static_assert(offsetof(fmha_tensors, cu_seqlens_k) == 64, "ABI");
static_assert(offsetof(fmha_tensors, seqused_k) == 72, "ABI");
static_assert(offsetof(fmha_tensors, block_table) == 80, "ABI");
static_assert(sizeof(fmha_tensors) == 88, "ABI");
static_assert(offsetof(fmha_plan_info, kernel_name) == 8, "ABI");
static_assert(offsetof(fmha_plan_info, device) == 16, "ABI");
static_assert(offsetof(fmha_plan_info, shared_memory_bytes) == 44, "ABI");
static_assert(offsetof(fmha_plan_info, workspace_bytes) == 48, "ABI");
static_assert(offsetof(fmha_plan_info, num_splits) == 56, "ABI: version 2 starts here");
static_assert(sizeof(fmha_plan_info) == 64, "ABI");
static_assert(offsetof(fmha_merge_descriptor, batch) == 8, "ABI");
static_assert(offsetof(fmha_merge_descriptor, head_dim) == 32, "ABI");
static_assert(offsetof(fmha_merge_descriptor, part_strides) == 40, "ABI");
static_assert(offsetof(fmha_merge_descriptor, o_strides) == 72, "ABI");
static_assert(offsetof(fmha_merge_descriptor, num_parts) == 104, "ABI");
static_assert(offsetof(fmha_merge_descriptor, flags) == 108, "ABI");
static_assert(offsetof(fmha_merge_descriptor, device) == 112, "ABI");
static_assert(sizeof(fmha_merge_descriptor) == 120, "ABI");
static_assert(sizeof(fmha_status) == 4, "ABI: enums are int-sized");
#endif

int header_cxx_check();
int header_cxx_check() {
    fmha_descriptor d;
    if (fmha_descriptor_init(&d, FMHA_DESCRIPTOR_VERSION) != FMHA_STATUS_SUCCESS) return 1;
    fmha_plan *plan = nullptr;
    fmha_status st = fmha_create_plan(&plan, &d);
    fmha_tensors t;
    fmha_tensors_init(&t, FMHA_TENSORS_VERSION);
    fmha_run(plan, &t, nullptr, 0, fmha_stream(nullptr));
    fmha_destroy_plan(plan);
    return st == FMHA_STATUS_SUCCESS ? 0 : 2;
}
