// Randomized descriptors (a poor man's fuzzer that needs no clang): start
// from a valid problem, corrupt a few fields with edge values, and check that
// validation never crashes, always answers a known status, and explains every
// rejection. Runs in CI in well under a second.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "fmha/fmha.h"
#include "fmha_catch.h"

namespace {

fmha_descriptor valid_desc() {
    fmha_descriptor d;
    fmha_descriptor_init(&d, FMHA_DESCRIPTOR_VERSION);
    d.batch = 2;
    d.num_q_heads = 8;
    d.num_kv_heads = 2;
    d.seqlen_q = 128;
    d.seqlen_k = 256;
    d.head_dim = 128;
    fmha_strides_bshd(&d.q_strides, 128, 8, 128);
    fmha_strides_bshd(&d.k_strides, 256, 2, 128);
    d.v_strides = d.k_strides;
    d.o_strides = d.q_strides;
    return d;
}

int64_t edge_int(std::mt19937_64 &rng) {
    static const int64_t values[] = {0, 1, -1, 2, 7, 8, 16, 64, 96, 100, 128, 256, 512, 4097,
                                     65535, 65536, INT32_MAX, int64_t(INT32_MAX) + 1,
                                     INT64_MAX, INT64_MIN, -8};
    return values[rng() % (sizeof values / sizeof values[0])];
}

float edge_float(std::mt19937_64 &rng) {
    static const float values[] = {0.f, 1.f, -1.f, 0.125f, 30.f, 1e-30f, 1e30f,
                                   std::numeric_limits<float>::infinity(),
                                   -std::numeric_limits<float>::infinity(), std::nanf("")};
    return values[rng() % (sizeof values / sizeof values[0])];
}

// Overwrites one field of `d` with an edge value.
void mutate(fmha_descriptor &d, std::mt19937_64 &rng) {
    fmha_strides *tensors[] = {&d.q_strides, &d.k_strides, &d.v_strides, &d.o_strides};
    switch (rng() % 22) {
    case 0: d.batch = edge_int(rng); break;
    case 1: d.num_q_heads = edge_int(rng); break;
    case 2: d.num_kv_heads = edge_int(rng); break;
    case 3: d.seqlen_q = edge_int(rng); break;
    case 4: d.seqlen_k = edge_int(rng); break;
    case 5: d.head_dim = edge_int(rng); break;
    case 6: d.head_dim_v = edge_int(rng); break;
    case 7: tensors[rng() % 4]->batch = edge_int(rng); break;
    case 8: tensors[rng() % 4]->seq = edge_int(rng); break;
    case 9: tensors[rng() % 4]->head = edge_int(rng); break;
    case 10: tensors[rng() % 4]->dim = edge_int(rng); break;
    case 11: d.softmax_scale = edge_float(rng); break;
    case 12: d.mask = int32_t(edge_int(rng)); break;
    case 13: d.flags = uint32_t(rng()); break;
    case 14: d.kernel = int32_t(edge_int(rng)); break;
    case 15: d.device = int32_t(edge_int(rng)); break;
    case 16: d.dtype = int32_t(edge_int(rng)); break;
    case 17: d.window_left = int32_t(edge_int(rng)); break;
    case 18: d.window_right = int32_t(edge_int(rng)); break;
    case 19: d.softcap = edge_float(rng); break;
    case 20: d.reserved0 = int32_t(rng() % 3); break;
    case 21: d.version = uint32_t(rng() % 4); break;
    }
}

bool known_status(fmha_status s) {
    return std::string(fmha_status_string(s)) != "FMHA_STATUS_UNKNOWN";
}

}  // namespace

TEST_CASE("random descriptors: never a crash, always a known status and a reason",
          "[cpu][validation][random]") {
    std::mt19937_64 rng(0xF4A5);
    int accepted = 0, rejected = 0;
    const int32_t sms[] = {FMHA_SM_ANY, 80, 86, 90, 100, 120, 75};
    for (int iter = 0; iter < 20000; ++iter) {
        fmha_descriptor d = valid_desc();
        const int mutations = 1 + int(rng() % 3);
        for (int m = 0; m < mutations; ++m) mutate(d, rng);
        const int32_t sm = sms[rng() % (sizeof sms / sizeof sms[0])];
        const fmha_status st = fmha_check_support(&d, sm);
        const std::string msg = fmha_last_error_message();
        INFO("iteration " << iter << ", sm " << sm << ": " << fmha_status_string(st) << " \""
                          << msg << "\"");
        REQUIRE(known_status(st));
        REQUIRE(fmha_last_error_status() == st);
        if (st == FMHA_STATUS_SUCCESS) {
            ++accepted;
            REQUIRE(msg.empty());
            // An accepted problem is self-consistent.
            REQUIRE(d.num_q_heads % d.num_kv_heads == 0);
            REQUIRE(d.batch >= 1);
            REQUIRE(d.seqlen_q >= 1);
        } else {
            ++rejected;
            REQUIRE(!msg.empty());
            REQUIRE(st != FMHA_STATUS_INTERNAL_ERROR);
        }
    }
    INFO("accepted " << accepted << ", rejected " << rejected);
    CHECK(accepted > 100);  // the mutations must not reject everything
    CHECK(rejected > 1000);
}
