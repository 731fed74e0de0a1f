// Self-tests of the test support library: conversions, layouts, the CPU
// references and the comparison the GPU suite relies on. No GPU needed.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fmha/fmha.h"
#include "fmha_catch.h"
#include "fmha_test/half.h"
#include "fmha_test/layout.h"
#include "fmha_test/random.h"
#include "fmha_test/reference.h"
#include "fmha_test/runner.h"

using namespace fmha_test;

namespace {

uint16_t bits_of(__half h) {
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
}
uint16_t bits_of(__nv_bfloat16 h) {
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
}
float float_of(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

}  // namespace

TEST_CASE("bf16/fp16 round trips every finite pattern", "[cpu][support][half]") {
    int fp16_bad = 0, bf16_bad = 0;
    for (uint32_t h = 0; h < 0x10000u; ++h) {
        const uint16_t x = uint16_t(h);
        if (!is_nan_lowp(x, FMHA_DTYPE_FP16) && float_to_fp16(fp16_to_float(x)) != x) ++fp16_bad;
        if (!is_nan_lowp(x, FMHA_DTYPE_BF16) && float_to_bf16(bf16_to_float(x)) != x) ++bf16_bad;
    }
    CHECK(fp16_bad == 0);
    CHECK(bf16_bad == 0);
}

TEST_CASE("bf16/fp16 rounding is to nearest, ties to even", "[cpu][support][half]") {
    // bf16 keeps 7 mantissa bits: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
    CHECK(float_to_bf16(1.0f + 0x1p-8f) == 0x3F80);
    CHECK(float_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3F82);
    CHECK(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3F81);
    CHECK(float_to_bf16(-2.0f) == 0xC000);
    CHECK(float_to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
    CHECK(float_to_bf16(float_of(0x7F7FFFFFu)) == 0x7F80);  // FLT_MAX rounds up to inf
    // fp16 keeps 10 mantissa bits.
    CHECK(float_to_fp16(1.0f + 0x1p-11f) == 0x3C00);
    CHECK(float_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3C02);
    CHECK(float_to_fp16(65504.0f) == 0x7BFF);
    CHECK(float_to_fp16(65519.0f) == 0x7BFF);
    CHECK(float_to_fp16(65520.0f) == 0x7C00);  // tie between 65504 and 65536: inf
    CHECK(float_to_fp16(-1e9f) == 0xFC00);
    // fp16 subnormals, in units of 2^-24.
    CHECK(float_to_fp16(0x1p-24f) == 0x0001);
    CHECK(float_to_fp16(0x1p-25f) == 0x0000);               // tie: to even (0)
    CHECK(float_to_fp16(0x1p-25f * 1.0001f) == 0x0001);
    CHECK(float_to_fp16(3 * 0x1p-25f) == 0x0002);           // 1.5 units: to even (2)
    CHECK(float_to_fp16(-0x1p-14f) == 0x8400);              // smallest normal
    CHECK(float_to_fp16(0x1p-14f - 0x1p-25f) == 0x0400);    // rounds up into the normals
    CHECK(fp16_to_float(0x0001) == 0x1p-24f);
    CHECK(fp16_to_float(0x03FF) == 1023 * 0x1p-24f);
    CHECK(is_nan_lowp(kOutputPrefill16, FMHA_DTYPE_BF16));
    CHECK(is_nan_lowp(kOutputPrefill16, FMHA_DTYPE_FP16));
    CHECK(is_nan_lowp(kGuard16, FMHA_DTYPE_BF16));
    CHECK(is_nan_lowp(kGuard16, FMHA_DTYPE_FP16));
    CHECK(std::isnan(float_of(kOutputPrefill32)));
    CHECK(std::isnan(float_of(kGuard32)));
    CHECK(is_nan_lowp(float_to_fp16(std::nanf("")), FMHA_DTYPE_FP16));
    CHECK(is_nan_lowp(float_to_bf16(std::nanf("")), FMHA_DTYPE_BF16));
}

TEST_CASE("conversions agree with CUDA's host implementation", "[cpu][support][half]") {
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<uint32_t> any;
    int fp16_bad = 0, bf16_bad = 0;
    for (int i = 0; i < 2000000; ++i) {
        // Random bit patterns cover every exponent; bias half of them to the
        // fp16 range so its subnormals and overflow boundary get hit often.
        uint32_t u = any(rng);
        if (i & 1) u = (u & 0x80FFFFFFu) | (uint32_t(96 + (u >> 24) % 48) << 23);
        const float f = float_of(u);
        if (std::isnan(f)) continue;
        if (float_to_fp16(f) != bits_of(__float2half_rn(f))) ++fp16_bad;
        if (float_to_bf16(f) != bits_of(__float2bfloat16_rn(f))) ++bf16_bad;
    }
    CHECK(fp16_bad == 0);
    CHECK(bf16_bad == 0);
}

TEST_CASE("layouts give strides the library accepts", "[cpu][support][layout]") {
    for (Layout layout : {Layout::BSHD, Layout::BHSD, Layout::SLICED})
        for (int64_t hd : {64, 96, 128, 256}) {
            INFO(layout_name(layout) << " hd " << hd);
            const int64_t B = 2, Sq = 17, Sk = 33, Hq = 8, Hkv = 2;
            TensorLayout q = make_layout(layout, B, Sq, Hq, hd);
            TensorLayout k = make_layout(layout, B, Sk, Hkv, hd);
            // Every element lands inside the allocation, once.
            std::vector<int> seen(q.alloc_elems, 0);
            for (int64_t b = 0; b < B; ++b)
                for (int64_t s = 0; s < Sq; ++s)
                    for (int64_t h = 0; h < Hq; ++h)
                        for (int64_t d = 0; d < hd; ++d) {
                            int64_t at = q.offset + element_offset(q.strides, b, s, h, d);
                            REQUIRE(at >= 0);
                            REQUIRE(size_t(at) < q.alloc_elems);
                            ++seen[size_t(at)];
                        }
            int64_t used = 0;
            for (int c : seen) {
                REQUIRE(c <= 1);
                used += c;
            }
            CHECK(used == B * Sq * Hq * hd);
            if (layout != Layout::SLICED) CHECK(size_t(used) == q.alloc_elems);
            else CHECK(size_t(used) < q.alloc_elems);
            CHECK(q.offset % 8 == 0);
            fmha_descriptor d;
            REQUIRE(fmha_descriptor_init(&d, FMHA_DESCRIPTOR_VERSION) == FMHA_STATUS_SUCCESS);
            d.batch = B;
            d.num_q_heads = Hq;
            d.num_kv_heads = Hkv;
            d.seqlen_q = Sq;
            d.seqlen_k = Sk;
            d.head_dim = hd;
            d.q_strides = d.o_strides = q.strides;
            d.k_strides = d.v_strides = k.strides;
            INFO(fmha_last_error_message());
            CHECK(fmha_check_support(&d, FMHA_SM_ANY) == FMHA_STATUS_SUCCESS);
        }
}

namespace {

// A problem with packed BSHD inputs built from explicit float values.
struct Tiny {
    RefProblem p;
    std::vector<uint16_t> q, k, v;
    Tiny(int64_t B, int64_t Hq, int64_t Hkv, int64_t Sq, int64_t Sk, int64_t D, fmha_mask mask) {
        p.dtype = FMHA_DTYPE_BF16;
        p.batch = B;
        p.num_q_heads = Hq;
        p.num_kv_heads = Hkv;
        p.seqlen_q = Sq;
        p.seqlen_k = Sk;
        p.head_dim = D;
        p.mask = mask;
        p.q = make_layout(Layout::BSHD, B, Sq, Hq, D).strides;
        p.k = p.v = make_layout(Layout::BSHD, B, Sk, Hkv, D).strides;
        p.o = p.q;
        q.assign(size_t(B * Sq * Hq * D), 0);
        k.assign(size_t(B * Sk * Hkv * D), 0);
        v.assign(size_t(B * Sk * Hkv * D), 0);
    }
    size_t row(int64_t b, int64_t h, int64_t i) const {
        return size_t((b * p.num_q_heads + h) * p.seqlen_q + i);
    }
};

}  // namespace

TEST_CASE("reference: one key gives O = V and LSE = scaled score", "[cpu][support][reference]") {
    Tiny t(1, 1, 1, 1, 1, 64, FMHA_MASK_NONE);
    for (int d = 0; d < 64; ++d) {
        t.q[size_t(d)] = float_to_bf16(d % 2 ? 0.5f : -0.25f);
        t.k[size_t(d)] = float_to_bf16(1.0f);
        t.v[size_t(d)] = float_to_bf16(float(d) - 3.0f);
    }
    for (auto *fn : {&reference_fp64, &reference_lowp}) {
        RefResult r = fn(t.p, t.q.data(), t.k.data(), t.v.data(), 1);
        for (int d = 0; d < 64; ++d) CHECK(r.o[size_t(d)] == double(d) - 3.0);
        // q.k = 32*0.5 - 32*0.25 = 8; scale 1/8.
        CHECK(std::fabs(r.lse[0] - 1.0) < 1e-6);
    }
}

TEST_CASE("reference: mask conventions and fully masked rows", "[cpu][support][reference]") {
    // Q = 0 makes every visible key equally likely: O = mean of visible V rows
    // and LSE = log(number of visible keys), which pins down each mask.
    for (auto sizes : {std::make_pair(5, 9), std::make_pair(9, 5), std::make_pair(7, 7)})
        for (fmha_mask mask :
             {FMHA_MASK_NONE, FMHA_MASK_CAUSAL_TOP_LEFT, FMHA_MASK_CAUSAL_BOTTOM_RIGHT}) {
            const int64_t Sq = sizes.first, Sk = sizes.second, D = 64;
            INFO("sq " << Sq << " sk " << Sk << " mask " << mask);
            Tiny t(1, 1, 1, Sq, Sk, D, mask);
            for (int64_t j = 0; j < Sk; ++j)
                for (int64_t d = 0; d < D; ++d)
                    t.v[size_t(j * D + d)] = float_to_bf16(float(j));  // row j holds j
            RefResult r = reference_fp64(t.p, t.q.data(), t.k.data(), t.v.data(), 2);
            for (int64_t i = 0; i < Sq; ++i) {
                int64_t visible = Sk;  // keys 0..visible-1
                if (mask == FMHA_MASK_CAUSAL_TOP_LEFT) visible = std::min(Sk, i + 1);
                if (mask == FMHA_MASK_CAUSAL_BOTTOM_RIGHT)
                    visible = std::max<int64_t>(0, std::min(Sk, i + Sk - Sq + 1));
                INFO("row " << i << " sees " << visible << " keys");
                if (visible == 0) {
                    CHECK(std::isinf(r.lse[size_t(i)]));
                    CHECK(r.lse[size_t(i)] < 0);
                    for (int64_t d = 0; d < D; ++d) CHECK(r.o[size_t(i * D + d)] == 0.0);
                } else {
                    CHECK(std::fabs(r.lse[size_t(i)] - std::log(double(visible))) < 1e-12);
                    CHECK(std::fabs(r.o[size_t(i * D)] - (visible - 1) / 2.0) < 1e-12);
                }
            }
        }
}

TEST_CASE("reference: windows, softcap and sinks", "[cpu][support][reference]") {
    // Q = 0: every visible key is equally likely, so O is the mean of the
    // visible V rows (row j holds j) and LSE = log(count) pins the window.
    const int64_t Sq = 9, Sk = 12, D = 64;
    SECTION("window edges follow the bottom-right diagonal i + sk - sq") {
        Tiny t(1, 1, 1, Sq, Sk, D, FMHA_MASK_NONE);
        t.p.window_left = 2;
        t.p.window_right = 1;
        for (int64_t j = 0; j < Sk; ++j)
            for (int64_t d = 0; d < D; ++d) t.v[size_t(j * D + d)] = float_to_bf16(float(j));
        RefResult r = reference_fp64(t.p, t.q.data(), t.k.data(), t.v.data(), 1);
        for (int64_t i = 0; i < Sq; ++i) {
            const int64_t diag = i + Sk - Sq;
            const int64_t lo = std::max<int64_t>(0, diag - 2), hi = std::min(Sk - 1, diag + 1);
            INFO("row " << i << " sees " << lo << ".." << hi);
            CHECK(std::fabs(r.lse[size_t(i)] - std::log(double(hi - lo + 1))) < 1e-12);
            CHECK(std::fabs(r.o[size_t(i * D)] - (lo + hi) / 2.0) < 1e-12);
        }
    }
    SECTION("a sink joins the denominator only") {
        Tiny t(1, 2, 1, Sq, Sk, D, FMHA_MASK_CAUSAL_BOTTOM_RIGHT);
        std::mt19937_64 rng(7);
        std::normal_distribution<float> normal(0.f, 1.f);
        for (auto *x : {&t.q, &t.k, &t.v})
            for (uint16_t &e : *x) e = float_to_bf16(normal(rng));
        RefResult plain = reference_fp64(t.p, t.q.data(), t.k.data(), t.v.data(), 1);
        t.p.sinks = {0.7, -1.3};
        RefResult sunk = reference_fp64(t.p, t.q.data(), t.k.data(), t.v.data(), 1);
        for (int64_t h = 0; h < 2; ++h)
            for (int64_t i = 0; i < Sq; ++i) {
                const size_t row = t.row(0, h, i);
                const double want = std::log(std::exp(plain.lse[row]) + std::exp(t.p.sinks[size_t(h)]));
                CHECK(std::fabs(sunk.lse[row] - want) < 1e-9);
                const double shrink = std::exp(plain.lse[row] - sunk.lse[row]);
                for (int64_t d = 0; d < D; ++d)
                    CHECK(std::fabs(sunk.o[row * D + size_t(d)] - plain.o[row * D + size_t(d)] * shrink) < 1e-9);
            }
        // Rows that see no key: O = 0 and LSE = the sink, not -inf.
        Tiny wide(1, 2, 1, Sk + 3, Sk, D, FMHA_MASK_CAUSAL_BOTTOM_RIGHT);
        wide.p.sinks = {0.7, -1.3};
        RefResult r = reference_fp64(wide.p, wide.q.data(), wide.k.data(), wide.v.data(), 1);
        CHECK(r.lse[wide.row(0, 1, 0)] == -1.3);
        CHECK(r.o[wide.row(0, 1, 0) * D] == 0.0);
    }
    SECTION("softcap bounds every score, a huge cap changes nothing") {
        Tiny t(1, 1, 1, Sq, Sk, D, FMHA_MASK_NONE);
        std::mt19937_64 rng(9);
        std::normal_distribution<float> normal(0.f, 3.f);
        for (auto *x : {&t.q, &t.k, &t.v})
            for (uint16_t &e : *x) e = float_to_bf16(normal(rng));
        RefResult plain = reference_fp64(t.p, t.q.data(), t.k.data(), t.v.data(), 1);
        t.p.softcap = 1e7;
        RefResult loose = reference_fp64(t.p, t.q.data(), t.k.data(), t.v.data(), 1);
        t.p.softcap = 1.0;
        RefResult tight = reference_fp64(t.p, t.q.data(), t.k.data(), t.v.data(), 1);
        for (int64_t i = 0; i < Sq; ++i) {
            CHECK(std::fabs(loose.lse[size_t(i)] - plain.lse[size_t(i)]) < 1e-6);
            // |s| <= 1: LSE lies within log(Sk) +- 1.
            CHECK(std::fabs(tight.lse[size_t(i)] - std::log(double(Sk))) <= 1.0 + 1e-12);
        }
        RefResult lowp = reference_lowp(t.p, t.q.data(), t.k.data(), t.v.data(), 1);
        for (size_t e = 0; e < lowp.o.size(); ++e) CHECK(std::fabs(lowp.o[e] - tight.o[e]) < 2e-2);
    }
}

TEST_CASE("reference: q head h reads kv head h / (Hq / Hkv)", "[cpu][support][reference]") {
    const int64_t Hq = 8, Hkv = 2, S = 3, D = 64;
    Tiny t(1, Hq, Hkv, S, S, D, FMHA_MASK_NONE);
    for (int64_t s = 0; s < S; ++s)
        for (int64_t h = 0; h < Hkv; ++h)
            for (int64_t d = 0; d < D; ++d)
                t.v[size_t(t.p.v.seq * s + t.p.v.head * h + d)] = float_to_bf16(float(h + 1));
    RefResult r = reference_fp64(t.p, t.q.data(), t.k.data(), t.v.data(), 3);
    for (int64_t h = 0; h < Hq; ++h) {
        INFO("q head " << h);
        CHECK(r.o[t.row(0, h, 0) * D] == double(h / (Hq / Hkv) + 1));
    }
}

TEST_CASE("reference: results do not depend on layout or thread count", "[cpu][support][reference]") {
    Case base = dense_case(FMHA_DTYPE_FP16, 96, 2, 4, 2, 19, 37);
    base.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
    base.seed = 11;
    HostCase bshd(base);
    RefResult single = reference_fp64(bshd.ref_problem(),
                                      bshd.host_q().data() + bshd.q_layout.offset,
                                      bshd.host_k().data() + bshd.k_layout.offset,
                                      bshd.host_v().data() + bshd.v_layout.offset, 1);
    for (Layout l : {Layout::BHSD, Layout::SLICED}) {
        INFO(layout_name(l));
        Case c = base;
        c.layout = l;
        HostCase other(c);  // same seed, same logical values, other addresses
        CHECK(other.ref64().o == bshd.ref64().o);
        CHECK(other.ref64().lse == bshd.ref64().lse);
        CHECK(other.ref_lowp().o == bshd.ref_lowp().o);
    }
    CHECK(single.o == bshd.ref64().o);
}

TEST_CASE("same-precision reference is close to fp64, but not equal", "[cpu][support][reference]") {
    for (fmha_dtype dt : {FMHA_DTYPE_BF16, FMHA_DTYPE_FP16}) {
        Case c = dense_case(dt, 128, 1, 2, 1, 64, 200);
        c.seed = 5;
        HostCase hc(c);
        Comparison cmp = hc.compare(hc.expected_outputs());
        INFO(dtype_name(dt) << ": lowp err " << cmp.lowp_err << ", lse lowp err "
                            << cmp.lse_lowp_err);
        CHECK(cmp.lowp_err > 0);
        CHECK(cmp.lowp_err < (dt == FMHA_DTYPE_BF16 ? 2e-2 : 3e-3));
        CHECK(cmp.lse_lowp_err < 1e-4);
    }
}

TEST_CASE("comparison: a correct output passes, each kind of defect is caught",
          "[cpu][support][compare]") {
    // seqlen_q 9 > seqlen_k 5: bottom-right leaves rows 0..3 without keys
    Case c = dense_case(FMHA_DTYPE_BF16, 64, 2, 4, 2, 9, 5);
    c.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
    c.layout = Layout::SLICED;
    c.seed = 3;
    HostCase hc(c);
    const Outputs good = hc.expected_outputs();
    const TensorLayout &ol = hc.o_layout;
    auto at = [&](int64_t b, int64_t i, int64_t h, int64_t d) {
        return size_t(ol.offset + element_offset(ol.strides, b, i, h, d));
    };

    Comparison ok = hc.compare(good);
    INFO("detail: " << ok.detail);
    CHECK(ok.o_ok);
    CHECK(ok.lse_ok);
    CHECK(ok.all_written);
    CHECK(ok.gaps_untouched);
    CHECK(ok.masked_rows_ok);
    CHECK(ok.masked_rows == 2 * 4 * 4);
    CHECK(ok.ratio <= 1.0);

    SECTION("an element never written") {
        Outputs o = good;
        o.o[at(1, 6, 3, 17)] = kOutputPrefill16;
        Comparison r = hc.compare(o);
        CHECK_FALSE(r.all_written);
        CHECK(r.detail.find("never written") != std::string::npos);
    }
    SECTION("a large error") {
        Outputs o = good;
        o.o[at(0, 8, 1, 5)] = float_to_bf16(bf16_to_float(o.o[at(0, 8, 1, 5)]) + 0.5f);
        Comparison r = hc.compare(o);
        CHECK_FALSE(r.o_ok);
        CHECK(r.ratio > 2);
        CHECK(r.detail.find("b=0, h=1, row=8, d=5") != std::string::npos);
    }
    SECTION("a write into the gap of the view") {
        Outputs o = good;
        o.o[size_t(ol.offset) - 1] = 0;
        Comparison r = hc.compare(o);
        CHECK_FALSE(r.gaps_untouched);
    }
    SECTION("a fully masked row that is not zero") {
        Outputs o = good;
        o.o[at(1, 2, 0, 0)] = float_to_bf16(1e-3f);
        Comparison r = hc.compare(o);
        CHECK_FALSE(r.masked_rows_ok);
    }
    SECTION("a fully masked row whose LSE is finite") {
        Outputs o = good;
        o.lse[0] = -1e30f;
        Comparison r = hc.compare(o);
        CHECK_FALSE(r.masked_rows_ok);
    }
    SECTION("negative zero counts as zero") {
        Outputs o = good;
        o.o[at(1, 2, 0, 0)] = 0x8000;
        CHECK(hc.compare(o).masked_rows_ok);
    }
    SECTION("an LSE off by 1%") {
        Outputs o = good;
        const size_t row = size_t((1 * 4 + 2) * 9 + 7);
        o.lse[row] = o.lse[row] * 1.01f + 0.01f;
        Comparison r = hc.compare(o);
        CHECK_FALSE(r.lse_ok);
    }
    SECTION("an LSE never written") {
        Outputs o = good;
        std::memcpy(&o.lse[40], &kOutputPrefill32, 4);
        const Comparison r = hc.compare(o);
        CHECK_FALSE(r.all_written);
        CHECK_FALSE(r.lse_ok);  // on its own too: tests that read o_ok and lse_ok only
        CHECK(r.o_ok);
    }
}

TEST_CASE("comparison: with sinks, a row that sees no key must still give O = 0",
          "[cpu][support][compare]") {
    // The sink joins each row's softmax, so a row without keys has a finite
    // LSE (the sink's logit) and O = 0.
    Case c = dense_case(FMHA_DTYPE_BF16, 64, 1, 2, 2, 9, 5);
    c.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;  // rows 0..3 see no key
    c.sinks = true;
    c.seed = 5;
    HostCase hc(c);
    const Outputs good = hc.expected_outputs();
    const Comparison ok = hc.compare(good);
    INFO("detail: " << ok.detail);
    CHECK(ok.o_ok);
    CHECK(ok.lse_ok);
    CHECK(ok.masked_rows_ok);
    CHECK(ok.masked_rows == 2 * 4);
    Outputs o = good;
    const TensorLayout &ol = hc.o_layout;
    o.o[size_t(ol.offset + element_offset(ol.strides, 0, 1, 1, 3))] = float_to_bf16(4e-3f);
    const Comparison r = hc.compare(o);
    CHECK_FALSE(r.masked_rows_ok);
    CHECK(r.detail.find("is not 0") != std::string::npos);
}

TEST_CASE("comparison: a long row is held to the error of rows of its magnitude",
          "[cpu][support][compare]") {
    // Causal 1000 x 1000: row 1 averages two V rows (|O| ~ 1), row 999 a
    // thousand (|O| ~ 0.1), so the case's same-precision error comes from the
    // short rows and would let the long ones be many times off.
    Case c = dense_case(FMHA_DTYPE_BF16, 64, 1, 1, 1, 1000, 1000);
    c.mask = FMHA_MASK_CAUSAL_TOP_LEFT;
    c.seed = 7;
    HostCase hc(c);
    const Outputs good = hc.expected_outputs();
    const Comparison ok = hc.compare(good);
    INFO("detail: " << ok.detail);
    REQUIRE(ok.o_ok);
    CHECK(ok.ratio <= 1.0);

    const int64_t D = c.head_dim, last = c.seqlen_q - 1;
    double row_lowp = 0;
    for (int64_t d = 0; d < D; ++d) {
        const size_t ri = size_t(last * D + d);
        row_lowp = std::max(row_lowp, std::fabs(hc.ref_lowp().o[ri] - hc.ref64().o[ri]));
    }
    // Within the case's bound (its own error plus 0.9 of the case's
    // same-precision error), far beyond the row's own.
    const double delta = 0.9 * ok.lowp_err;
    INFO("case lowp " << ok.lowp_err << ", last row lowp " << row_lowp);
    REQUIRE(delta > 8 * row_lowp);
    Outputs o = good;
    const TensorLayout &ol = hc.o_layout;
    const size_t at = size_t(ol.offset + element_offset(ol.strides, 0, last, 0, 3));
    o.o[at] = float_to_bf16(bf16_to_float(o.o[at]) + float(delta));
    const Comparison r = hc.compare(o);
    INFO("detail: " << r.detail);
    CHECK(r.max_err <= 2 * r.lowp_err);  // the whole-case rule alone would pass it
    CHECK_FALSE(r.o_ok);
    CHECK(r.ratio > 2);
    CHECK(r.detail.find("among rows") != std::string::npos);
    CHECK(r.detail.find("row=999, d=3") != std::string::npos);
}

TEST_CASE("broadcast K/V: one batch read with stride 0", "[cpu][support][reference]") {
    Case c = dense_case(FMHA_DTYPE_BF16, 64, 3, 4, 1, 5, 7);
    c.broadcast_kv = true;
    c.seed = 9;
    HostCase hc(c);
    CHECK(hc.k_layout.strides.batch == 0);
    CHECK(hc.v_layout.strides.batch == 0);
    CHECK(hc.k_layout.alloc_elems == size_t(7 * 64));
    fmha_descriptor d = hc.descriptor();
    INFO(fmha_last_error_message());
    CHECK(fmha_check_support(&d, FMHA_SM_ANY) == FMHA_STATUS_SUCCESS);
    // Every batch reads the same K/V; a correct output passes the comparison.
    Comparison cmp = hc.compare(hc.expected_outputs());
    INFO(cmp.detail);
    CHECK(cmp.o_ok);
}

TEST_CASE("case names carry every parameter and no parentheses", "[cpu][support]") {
    Case c;
    c.dtype = FMHA_DTYPE_FP16;
    c.head_dim = 96;
    c.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
    c.layout = Layout::SLICED;
    c.softmax_scale = 0.3f;
    c.broadcast_kv = true;
    c.kernel = FMHA_KERNEL_HOPPER;
    c.seed = 0xABCDEFull;
    const std::string n = c.name();
    INFO(n);
    for (const char *part : {"fp16", "hd96", "mask=bottom-right", "SLICED", "lse", "scale=0.3",
                             "kv-batch-stride-0", "kernel=hopper", "seed=0x0000000000abcdef"})
        CHECK(n.find(part) != std::string::npos);
    // .ci/test-gpu.sh cuts the worst case's name out of "(case NAME)".
    CHECK(n.find('(') == std::string::npos);
    CHECK(n.find(')') == std::string::npos);
}

TEST_CASE("seeds: fixed default, well mixed per case", "[cpu][support]") {
    const uint64_t base = base_seed();
    CHECK(case_seed(base, 0) != case_seed(base, 1));
    CHECK(case_seed(base, 1) == case_seed(base, 1));
    std::mt19937_64 a(case_seed(base, 2)), b(case_seed(base, 2));
    TensorLayout l = make_layout(Layout::BSHD, 1, 4, 2, 64);
    auto x = random_tensor(l, 1, 4, 2, 64, FMHA_DTYPE_BF16, a);
    auto y = random_tensor(l, 1, 4, 2, 64, FMHA_DTYPE_BF16, b);
    CHECK(x == y);
    int zeros = 0;
    for (uint16_t v : x) zeros += (v & 0x7FFF) == 0;
    CHECK(zeros == 0);
}
