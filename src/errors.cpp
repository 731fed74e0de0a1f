#include "errors.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace {
thread_local char t_message[1024] = "";
thread_local fmha_status t_status = FMHA_STATUS_SUCCESS;
}  // namespace

namespace fmha {

fmha_status fail(fmha_status status, const char *fmt, ...) {
    // Format aside first: callers may pass the current message as an argument.
    char message[sizeof t_message];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    std::memcpy(t_message, message, sizeof message);
    t_status = status;
    return status;
}

void clear_error() {
    t_message[0] = '\0';
    t_status = FMHA_STATUS_SUCCESS;
}

}  // namespace fmha

extern "C" {

FMHA_API const char *fmha_status_string(fmha_status status) {
    switch (status) {
    case FMHA_STATUS_SUCCESS: return "FMHA_STATUS_SUCCESS";
    case FMHA_STATUS_INVALID_ARGUMENT: return "FMHA_STATUS_INVALID_ARGUMENT";
    case FMHA_STATUS_NOT_SUPPORTED: return "FMHA_STATUS_NOT_SUPPORTED";
    case FMHA_STATUS_VERSION_MISMATCH: return "FMHA_STATUS_VERSION_MISMATCH";
    case FMHA_STATUS_NO_DRIVER: return "FMHA_STATUS_NO_DRIVER";
    case FMHA_STATUS_NO_DEVICE: return "FMHA_STATUS_NO_DEVICE";
    case FMHA_STATUS_DRIVER_ERROR: return "FMHA_STATUS_DRIVER_ERROR";
    case FMHA_STATUS_MISALIGNED: return "FMHA_STATUS_MISALIGNED";
    case FMHA_STATUS_WORKSPACE_TOO_SMALL: return "FMHA_STATUS_WORKSPACE_TOO_SMALL";
    case FMHA_STATUS_OUT_OF_MEMORY: return "FMHA_STATUS_OUT_OF_MEMORY";
    case FMHA_STATUS_NO_KERNEL_IMAGE: return "FMHA_STATUS_NO_KERNEL_IMAGE";
    case FMHA_STATUS_CONTEXT_MISMATCH: return "FMHA_STATUS_CONTEXT_MISMATCH";
    case FMHA_STATUS_INTERNAL_ERROR: return "FMHA_STATUS_INTERNAL_ERROR";
    }
    return "FMHA_STATUS_UNKNOWN";
}

FMHA_API const char *fmha_last_error_message(void) { return t_message; }

FMHA_API fmha_status fmha_last_error_status(void) { return t_status; }

FMHA_API void fmha_clear_last_error(void) { fmha::clear_error(); }

}  // extern "C"
