// The Hopper (sm_90a) TMA + wgmma kernel family: configuration and launch.
#include "errors.h"
#include "kernel_select.h"

namespace fmha {

fmha_status sm90_configure(const Problem &, KernelChoice *) {
    return fail(FMHA_STATUS_NOT_SUPPORTED, "the Hopper kernel is not part of this build yet");
}

}  // namespace fmha
