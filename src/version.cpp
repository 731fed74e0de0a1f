#include "fmha/fmha.h"

#define FMHA_STR2(x) #x
#define FMHA_STR(x) FMHA_STR2(x)

extern "C" {

FMHA_API uint32_t fmha_version(void) { return FMHA_VERSION_NUMBER; }

FMHA_API const char *fmha_version_string(void) {
    return FMHA_STR(FMHA_VERSION_MAJOR) "." FMHA_STR(FMHA_VERSION_MINOR) "." FMHA_STR(
        FMHA_VERSION_PATCH);
}

}  // extern "C"
