// The public header must compile as C++11 with -Werror -pedantic, inside and
// outside a namespace-free translation unit, and its types must be usable
// from C++ without casts.
#include "fmha/fmha.h"
#include "fmha/fmha.h"  // include guard

#include <type_traits>

static_assert(std::is_standard_layout<fmha_descriptor>::value, "C layout");
static_assert(std::is_trivially_copyable<fmha_descriptor>::value, "C layout");
static_assert(std::is_standard_layout<fmha_tensors>::value, "C layout");
static_assert(std::is_standard_layout<fmha_plan_info>::value, "C layout");
static_assert(sizeof(fmha_strides) == 32, "four int64 strides");
static_assert(FMHA_VERSION_NUMBER == FMHA_VERSION_MAJOR * 10000 + FMHA_VERSION_MINOR * 100 +
                                         FMHA_VERSION_PATCH,
              "version number");

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
