// 64-bit offsets on the GPU: serving cases whose tensors lie tens to
// hundreds of GiB apart in a sparse device address range (FarData: dense
// batches 68 GiB apart, paged pools whose odd pages sit past 132 GiB, packed
// key sequences 72 GiB apart, packed query rows 5 GiB apart), so that every
// kernel's element offsets pass 2^31 elements, 2^32 bytes and 2^36 bytes.
// Only the tensors' pieces have memory: a kernel that forms an offset in 32
// bits faults or reads NaN. Each case runs on all four kernel families
// (only FMHA_TEST_KERNEL's when it names one) against the float64 reference
// with the 2x rule, outputs prefilled with NaN, twice, compared bitwise, and
// O's backing outside O checked untouched.
//
// The merge entry point likewise reads parts and writes its output with
// batches 68 GiB apart.
//
// Then a cache whose batches are 2^40 bytes apart, past what a TMA map can
// step: plans must keep it off the Hopper kernel (an explicit HOPPER gets
// NOT_SUPPORTED naming the strides) and the other kernels compute it.
//
// Environment: FMHA_TEST_SEED, FMHA_TEST_CASE (substring of the case names),
// FMHA_TEST_VERBOSE=1.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fmha_test/far_placement.h"
#include "fmha_test/random.h"
#include "gpu_common.h"

using namespace fmha_test;

namespace {

// All four families, or only FMHA_TEST_KERNEL's when it names one (the
// steps of .ci/test-gpu.sh that force a family then run that one alone).
std::vector<fmha_kernel_family> families() {
    const char *env = std::getenv("FMHA_TEST_KERNEL");
    if (env != nullptr && *env != '\0' && std::string(env) != "auto")
        return {test_kernel_family()};
    return {FMHA_KERNEL_AUTO, FMHA_KERNEL_PORTABLE, FMHA_KERNEL_DECODE, FMHA_KERNEL_HOPPER};
}

bool selected(const std::string &name) {
    const char *filter = std::getenv("FMHA_TEST_CASE");
    return filter == nullptr || *filter == '\0' || name.find(filter) != std::string::npos;
}

}  // namespace

TEST_CASE("tensors hundreds of GiB apart, on every kernel family", "[gpu][large-offsets]") {
    FMHA_REQUIRE_GPU();
    const bool hopper_device = current_device_sm() == 90;
    const bool verbose = std::getenv("FMHA_TEST_VERBOSE") != nullptr;
    int runs = 0, passed = 0, unsupported = 0, cases = 0;
    std::map<std::string, int> kernels;
    for (const ServingCase &c : large_offset_suite()) {
        if (!selected(c.name())) continue;
        ++cases;
        FarData data(c);
        for (fmha_kernel_family k : families()) {
            const ServingRun r = run_serving(data, k, c.num_splits);
            const std::string line = r.summary(c) + " | " + data.placement();
            if (r.unsupported) {
                ++unsupported;
                std::printf("large offsets: %s\n", line.c_str());
                // On sm_90 the Hopper kernel must take every case: its TMA
                // maps are the point of half of them.
                INFO(line);
                CHECK_FALSE((k == FMHA_KERNEL_HOPPER && hopper_device));
                continue;
            }
            ++runs;
            ++kernels[r.kernel_name];
            if (r.passed()) ++passed;
            if (verbose || !r.passed()) std::printf("large offsets: %s\n", line.c_str());
            INFO(line);
            CHECK(r.passed());
            // A fault breaks the context: stop instead of failing every later run.
            REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        }
    }
    std::printf("large offsets: %d cases, %d runs, %d passed, %d unsupported\n", cases, runs,
                passed, unsupported);
    for (const auto &k : kernels) std::printf("  %3d x %s\n", k.second, k.first.c_str());
    CHECK(cases > 0);
}

TEST_CASE("batches 2^40 bytes apart stay off the Hopper kernel", "[gpu][large-offsets]") {
    FMHA_REQUIRE_GPU();
    // A prefill shape AUTO would give the Hopper kernel at ordinary strides.
    const ServingCase c =
        serving_case(FMHA_DTYPE_BF16, 128, 4, 2).q({128, 128}).k({600, 600}).mask(
            FMHA_MASK_CAUSAL_BOTTOM_RIGHT);
    FarPlacement where;
    where.batch_bytes = uint64_t(1) << 40;
    FarData data(c, where);
    INFO(data.placement());
    for (fmha_kernel_family k : families()) {
        const ServingRun r = run_serving(data, k, 0);
        INFO(r.summary(c));
        if (k == FMHA_KERNEL_HOPPER) {
            CHECK(r.status == FMHA_STATUS_NOT_SUPPORTED);
            if (current_device_sm() == 90) CHECK(r.error.find("2^40") != std::string::npos);
            continue;
        }
        CHECK(r.passed());
        CHECK(r.kernel_family != FMHA_KERNEL_HOPPER);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    }
}

TEST_CASE("merge: parts and output with batches 68 GiB apart", "[gpu][large-offsets][merge]") {
    FMHA_REQUIRE_GPU();
    const fmha_dtype dt = FMHA_DTYPE_BF16;
    const int64_t B = 3, Sq = 5, H = 4, D = 128;
    const int32_t parts = 3;
    const size_t rows = size_t(B * H * Sq);
    const TensorLayout pl = make_layout(Layout::BSHD, B, Sq, H, D);
    const TensorLayout ol = make_layout(Layout::BHSD, B, Sq, H, D);
    std::mt19937_64 rng(case_seed(base_seed(), 31500));
    std::normal_distribution<float> normal(0.0f, 1.0f), lse_dist(0.0f, 4.0f);
    MergeInput in;
    in.dtype = dt;
    in.batch = B;
    in.seqlen_q = Sq;
    in.num_heads = H;
    in.head_dim = D;
    std::vector<FarTensor> po;
    std::vector<DeviceBuffer> plse;
    for (int32_t p = 0; p < parts; ++p) {
        std::vector<uint16_t> host_o(pl.alloc_elems, kGuard16);
        std::vector<float> host_lse(rows);
        std::vector<double> lo(rows * size_t(D)), ll(rows);
        for (int64_t b = 0; b < B; ++b)
            for (int64_t h = 0; h < H; ++h)
                for (int64_t i = 0; i < Sq; ++i) {
                    const size_t row = size_t((b * H + h) * Sq + i);
                    // Row 2 of each head: no part saw a key; else part p may miss it.
                    const bool empty = i == 2 || rng() % 5 == 0;
                    host_lse[row] = empty ? -std::numeric_limits<float>::infinity() : lse_dist(rng);
                    ll[row] = host_lse[row];
                    for (int64_t d = 0; d < D; ++d) {
                        const uint16_t x = float_to_lowp(normal(rng), dt);
                        host_o[size_t(element_offset(pl.strides, b, i, h, d))] = x;
                        lo[row * size_t(D) + size_t(d)] = lowp_to_float(x, dt);
                    }
                }
        po.push_back(FarTensor::batches("part", pl, B, uint64_t(68) << 30));
        po.back().back(&host_o, kGuard16);
        plse.emplace_back(rows, 4, kGuard32);
        plse.back().upload(host_lse.data());
        in.o.push_back(std::move(lo));
        in.lse.push_back(std::move(ll));
    }
    FarTensor out = FarTensor::batches("o", ol, B, (uint64_t(70) << 30));
    out.back(nullptr, kOutputPrefill16);
    DeviceBuffer out_lse(rows, 4, kGuard32);
    out_lse.fill(kOutputPrefill32);

    fmha_merge_descriptor md;
    REQUIRE(fmha_merge_descriptor_init(&md, FMHA_MERGE_DESCRIPTOR_VERSION) == FMHA_STATUS_SUCCESS);
    md.dtype = dt;
    md.batch = B;
    md.seqlen_q = Sq;
    md.num_heads = H;
    md.head_dim = D;
    md.part_strides = po[0].strides;
    md.o_strides = out.strides;
    md.num_parts = parts;
    md.flags = FMHA_FLAG_WRITE_LSE;
    fmha_plan *plan = nullptr;
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_create_merge_plan(&plan, &md));
    PlanPtr holder(plan);
    std::vector<const void *> o_parts;
    std::vector<const float *> lse_parts;
    for (int32_t p = 0; p < parts; ++p) {
        o_parts.push_back(po[size_t(p)].data());
        lse_parts.push_back(static_cast<const float *>(plse[size_t(p)].data()));
    }
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                        fmha_run_merge(plan, o_parts.data(), lse_parts.data(), out.data(),
                                       static_cast<float *>(out_lse.data()), nullptr));
    sync_or_fail();
    std::vector<uint16_t> got(ol.alloc_elems, kOutputPrefill16);
    out.download(got);
    std::vector<float> got_lse(rows);
    out_lse.download(got_lse.data());

    const RefResult r64 = merge_reference_fp64(in), rlp = merge_reference_lowp(in);
    double err = 0, lowp = 0, lse_err = 0;
    int nan = 0, empty_wrong = 0;
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < Sq; ++i) {
                const size_t row = size_t((b * H + h) * Sq + i);
                const bool empty = std::isinf(r64.lse[row]);
                for (int64_t d = 0; d < D; ++d) {
                    const uint16_t x = got[size_t(element_offset(ol.strides, b, i, h, d))];
                    const double ref = r64.o[row * size_t(D) + size_t(d)];
                    if (is_nan_lowp(x, dt)) {
                        ++nan;
                        continue;
                    }
                    if (empty && (x & 0x7FFFu) != 0) ++empty_wrong;
                    err = std::max(err, std::fabs(double(lowp_to_float(x, dt)) - ref));
                    lowp = std::max(lowp, std::fabs(rlp.o[row * size_t(D) + size_t(d)] - ref));
                }
                if (empty) {
                    if (!(std::isinf(got_lse[row]) && got_lse[row] < 0)) ++empty_wrong;
                } else {
                    lse_err = std::max(lse_err, std::fabs(double(got_lse[row]) - r64.lse[row]) /
                                                    (1 + std::fabs(r64.lse[row])));
                }
            }
    std::printf("large offsets: merge of %d parts, batches 68 GiB apart: O err %.3g "
                "(same precision %.3g), LSE rel err %.3g, %d NaN, %d empty rows wrong\n",
                parts, err, lowp, lse_err, nan, empty_wrong);
    CHECK(nan == 0);
    CHECK(empty_wrong == 0);
    CHECK(err <= 2 * lowp + 1e-6);
    CHECK(lse_err <= kLseRelTol);
    std::string why;
    const bool untouched = out.outside_untouched(kOutputPrefill16, &why);
    INFO(why);
    CHECK(untouched);
    check_guards(out_lse, "lse");
    for (size_t p = 0; p < plse.size(); ++p) check_guards(plse[p], "lse_parts");
}
