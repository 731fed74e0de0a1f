// Status reporting: every failing path sets a thread-local message naming the
// field, the value and the rule, then returns the status.
#pragma once
#include "fmha/fmha.h"

namespace fmha {

// printf-style; returns `status` so callers can `return fail(...)`.
fmha_status fail(fmha_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

// Resets the thread's last error at the start of a public call.
void clear_error();

}  // namespace fmha

// Returns from the enclosing function when `expr` is not SUCCESS.
#define FMHA_TRY(expr)                                   \
    do {                                                 \
        fmha_status fmha_try_status_ = (expr);           \
        if (fmha_try_status_ != FMHA_STATUS_SUCCESS)     \
            return fmha_try_status_;                     \
    } while (0)
