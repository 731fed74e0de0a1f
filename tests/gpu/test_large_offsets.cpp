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
// (The merge entry point's far parts are in test_merge.cpp, tagged too.)
//
// Then a cache whose batches are 2^40 bytes apart, past what a TMA map can
// step: plans must keep it off the Hopper kernel (an explicit HOPPER gets
// NOT_SUPPORTED naming the strides) and the other kernels compute it. And a
// single KV head whose batches lie just under 2^40 bytes apart (2 TiB in all),
// which the Hopper kernel must take: only stepped strides count against TMA.
//
// Environment: FMHA_TEST_SEED, FMHA_TEST_CASE (substring of the case names),
// FMHA_TEST_VERBOSE=1.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "fmha_test/far_placement.h"
#include "gpu_common.h"

using namespace fmha_test;

namespace {

bool selected(const std::string &name) {
    const char *filter = std::getenv("FMHA_TEST_CASE");
    return filter == nullptr || *filter == '\0' || name.find(filter) != std::string::npos;
}

}  // namespace

TEST_CASE("tensors hundreds of GiB apart, on every kernel family", "[gpu][large-offsets]") {
    FMHA_REQUIRE_GPU();
    const bool hopper_device = hopper_kernel_runs_here();
    const bool verbose = std::getenv("FMHA_TEST_VERBOSE") != nullptr;
    int runs = 0, passed = 0, unsupported = 0, cases = 0;
    std::map<std::string, int> kernels;
    for (const ServingCase &c : large_offset_suite()) {
        if (!selected(c.name())) continue;
        ++cases;
        FarData data(c);
        for (fmha_kernel_family k : every_family_or_forced()) {
            const ServingRun r = run_serving(data, k, c.num_splits);
            const std::string line = r.summary(c) + " | " + data.placement();
            if (r.unsupported) {
                ++unsupported;
                std::printf("large offsets: %s\n", line.c_str());
                // Where it runs (sm_90, a build with sm_90a), the Hopper kernel
                // must take every case: its TMA maps are the point of half of them.
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
    CHECK(runs > 0);  // every family declining would otherwise pass having run nothing
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
    for (fmha_kernel_family k : every_family_or_forced()) {
        const ServingRun r = run_serving(data, k, 0);
        INFO(r.summary(c));
        if (k == FMHA_KERNEL_HOPPER) {
            if (hopper_kernel_runs_here()) {
                CHECK(r.status == FMHA_STATUS_NOT_SUPPORTED);
                CHECK(r.error.find("2^40") != std::string::npos);
            } else {  // off sm_90, or no sm_90a image in this build
                CHECK((r.status == FMHA_STATUS_NOT_SUPPORTED ||
                       r.status == FMHA_STATUS_NO_KERNEL_IMAGE));
            }
            continue;
        }
        CHECK(r.passed());
        CHECK(r.kernel_family != FMHA_KERNEL_HOPPER);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    }
}

TEST_CASE("a single KV head with batches just under 2^40 bytes apart runs on the Hopper kernel",
          "[gpu][large-offsets]") {
    FMHA_REQUIRE_GPU();
    // Every stride below 2^40 bytes (O's, the largest, 2 MiB under it), the
    // tensors spanning 2 TiB: the KV head dimension has extent 1, its stride
    // never stepped, so the TMA maps take this cache (tensor_map.cpp caps
    // that dimension's stride under TMA's limit).
    const ServingCase c =
        serving_case(FMHA_DTYPE_BF16, 128, 4, 1).q({128, 128}).k({600, 600}).mask(
            FMHA_MASK_CAUSAL_BOTTOM_RIGHT);
    FarPlacement where;
    where.batch_bytes = (uint64_t(1) << 40) - (uint64_t(8) << 20);
    FarData data(c, where);
    INFO(data.placement());
    for (fmha_kernel_family k : every_family_or_forced()) {
        const ServingRun r = run_serving(data, k, 0);
        INFO(r.summary(c));
        if (k == FMHA_KERNEL_HOPPER && !hopper_kernel_runs_here()) {
            CHECK((r.status == FMHA_STATUS_NOT_SUPPORTED ||
                   r.status == FMHA_STATUS_NO_KERNEL_IMAGE));
            continue;
        }
        CHECK(r.passed());
        if (hopper_kernel_runs_here() && k == FMHA_KERNEL_AUTO)
            CHECK(r.kernel_family == FMHA_KERNEL_HOPPER);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    }
}
