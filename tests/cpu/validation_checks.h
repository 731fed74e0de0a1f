// Checks shared by the descriptor validation suites: a rejected descriptor
// fails the same way in fmha_check_support and fmha_create_plan, with a
// message naming what is wrong; a valid one leaves no error behind.
#pragma once
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "fmha/fmha.h"
#include "fmha_catch.h"

namespace validation_checks {

inline std::string status_name(fmha_status s) { return fmha_status_string(s); }

// The suites' valid starting point: a bf16 GQA problem, 8 q heads over 2 kv
// heads, head_dim 128, packed BSHD strides (O as Q, V as K).
inline fmha_descriptor gqa_desc(int64_t batch, int64_t seqlen_q, int64_t seqlen_k) {
    fmha_descriptor d;
    REQUIRE(fmha_descriptor_init(&d, FMHA_DESCRIPTOR_VERSION) == FMHA_STATUS_SUCCESS);
    d.dtype = FMHA_DTYPE_BF16;
    d.batch = batch;
    d.num_q_heads = 8;
    d.num_kv_heads = 2;
    d.seqlen_q = seqlen_q;
    d.seqlen_k = seqlen_k;
    d.head_dim = 128;
    REQUIRE(fmha_strides_bshd(&d.q_strides, d.seqlen_q, d.num_q_heads, d.head_dim) ==
            FMHA_STATUS_SUCCESS);
    REQUIRE(fmha_strides_bshd(&d.k_strides, d.seqlen_k, d.num_kv_heads, d.head_dim) ==
            FMHA_STATUS_SUCCESS);
    d.v_strides = d.k_strides;
    d.o_strides = d.q_strides;
    return d;
}

// Checks the status of check_support and create_plan, the last-error status,
// and that the message contains every needle.
inline void expect_rejected(const fmha_descriptor &d, fmha_status expected,
                            std::initializer_list<const char *> needles) {
    fmha_status st = fmha_check_support(&d, FMHA_SM_ANY);
    std::string msg = fmha_last_error_message();
    INFO("fmha_check_support -> " << status_name(st) << ": \"" << msg << "\"");
    CHECK(status_name(st) == status_name(expected));
    CHECK(status_name(fmha_last_error_status()) == status_name(expected));
    for (const char *n : needles) {
        INFO("message should contain \"" << n << "\"");
        CHECK(msg.find(n) != std::string::npos);
    }
    // Plan creation validates first, so it fails the same way without a GPU.
    fmha_plan *plan = reinterpret_cast<fmha_plan *>(0x10);
    fmha_status st2 = fmha_create_plan(&plan, &d);
    INFO("fmha_create_plan -> " << status_name(st2) << ": \"" << fmha_last_error_message() << "\"");
    CHECK(status_name(st2) == status_name(expected));
    CHECK(plan == nullptr);
    CHECK(std::string(fmha_last_error_message()) == msg);
}

inline void expect_valid(const fmha_descriptor &d, int32_t sm = FMHA_SM_ANY) {
    fmha_status st = fmha_check_support(&d, sm);
    INFO("fmha_check_support(sm " << sm << ") -> " << status_name(st) << ": \""
                                  << fmha_last_error_message() << "\"");
    CHECK(st == FMHA_STATUS_SUCCESS);
    CHECK(std::string(fmha_last_error_message()).empty());
    CHECK(fmha_last_error_status() == FMHA_STATUS_SUCCESS);
}

// Keeps FMHA_FORCE_KERNEL from the environment out of a test's scope.
struct ForceKernelEnv {
    std::string saved;
    bool had = false;
    ForceKernelEnv() {
        if (const char *v = std::getenv("FMHA_FORCE_KERNEL")) {
            had = true;
            saved = v;
        }
        unsetenv("FMHA_FORCE_KERNEL");
    }
    ~ForceKernelEnv() {
        if (had) setenv("FMHA_FORCE_KERNEL", saved.c_str(), 1);
        else unsetenv("FMHA_FORCE_KERNEL");
    }
};

}  // namespace validation_checks
