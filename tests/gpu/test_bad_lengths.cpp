// Broken length arrays stay inside the tensors. fmha.h promises that
// cu_seqlens_q / cu_seqlens_k entries outside [0, total] are clamped and a
// broken array "gives wrong rows, never an access outside Q or O", that
// seqused_k is clamped, and that a paged sequence never uses more block-table
// columns than seqlen_k needs. These cases pass decreasing, negative and
// huge entries (INT32_MIN, INT32_MAX) on every kernel family with the
// tensors placed far apart (FarData): only their pieces have memory, so a
// read or write outside Q, K, V or O faults instead of landing in a
// neighbour. Each run must succeed, leave every guard band and O's far
// backing untouched, and the right arrays must then give the right result.
//
// Environment: FMHA_TEST_KERNEL (only that family), FMHA_TEST_SEED.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fmha_test/far_placement.h"
#include "fmha_test/random.h"
#include "gpu_common.h"

using namespace fmha_test;

namespace {


// One set of broken arrays (an empty vector: the case's own).
struct Broken {
    const char *what;
    std::vector<int32_t> cu_q, cu_k, seqused;
};

struct BadCase {
    ServingCase c;
    std::vector<Broken> broken;
    FarPlacement where;
};

// Packed key rows stay packed: a broken cu_seqlens_k may make a kernel read
// any row up to total_k, and every such row must be memory.
FarPlacement packed_keys() {
    FarPlacement w;
    w.key_shift_bytes = 0;
    return w;
}

const int32_t kMin = INT32_MIN, kMax = INT32_MAX;

std::vector<BadCase> bad_cases() {
    const fmha_mask br = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
    std::vector<BadCase> v;
    // Chunked prefill: packed Q rows and packed K/V (Hopper varlen walk,
    // portable, decode); total_q 48, total_k 1643.
    v.push_back({serving_case(FMHA_DTYPE_BF16, 128, 8, 2)
                     .varlen_q({30, 0, 17}, 1).packed_k({900, 40, 700}).seqused({880, 40, 650})
                     .mask(br),
                 {{"decreasing cu_seqlens_q", {0, 40, 10, 47}, {}, {}},
                  {"cu_seqlens_q out of range", {-7, kMin, 1000, kMax}, {}, {}},
                  {"decreasing cu_seqlens_k", {}, {0, 1500, 20, 1640}, {}},
                  {"cu_seqlens_k out of range", {}, {kMin, -1, kMax, 5000}, {}},
                  {"seqused_k negative and huge", {}, {}, {-5, kMax, kMin}},
                  {"everything at once", {kMax, 0, kMin, 3}, {5000, kMin, 0, kMax},
                   {kMax, kMax, -1}}},
                 packed_keys()});
    // Packed Q over 16-row pages with cu_seqlens_k and no seqused_k (Hopper
    // `_paged16`): a sequence's key count is a cu_seqlens_k difference,
    // clamped to [0, seqlen_k], so its block-table columns stay in its row.
    v.push_back({serving_case(FMHA_DTYPE_FP16, 128, 8, 2)
                     .varlen_q({100, 64, 3}).paged(16, {1100, 70, 640}).with_cu_seqlens_k()
                     .mask(br),
                 {{"decreasing cu_seqlens_q", {0, 150, 20, 167}, {}, {}},
                  {"cu_seqlens_k differences negative and huge", {}, {kMax, 0, kMin, kMax}, {}},
                  {"cu_seqlens_k differences past seqlen_k", {}, {0, kMax / 2, kMax - 5, kMax},
                   {}}},
                 FarPlacement{}});
    // Decode over pages of one row (decode kernel, Hopper `_gather`).
    v.push_back({serving_case(FMHA_DTYPE_BF16, 128, 32, 8)
                     .q({2, 2, 2}).paged(1, {900, 300, 50}).seqused({900, 299, 50}).mask(br),
                 {{"seqused_k negative and huge", {}, {}, {kMin, kMax, -1}},
                  {"seqused_k past every page", {}, {}, {1 << 30, 1 << 30, 1 << 30}}},
                 FarPlacement{}});
    // MLA-style hd512 over 32-row pages, packed Q.
    v.push_back({serving_case(FMHA_DTYPE_BF16, 512, 16, 1)
                     .varlen_q({2, 1}).paged(32, {900, 500}).seqused({900, 480}).mask(br),
                 {{"cu_seqlens_q out of range", {kMin, kMax, 3}, {}, {}},
                  {"seqused_k huge", {}, {}, {kMax, kMax}}},
                 FarPlacement{}});
    for (size_t i = 0; i < v.size(); ++i) v[i].c.seed = case_seed(base_seed(), 31700 + i);
    return v;
}

}  // namespace

TEST_CASE("broken length arrays stay inside the tensors", "[gpu][bad-lengths]") {
    FMHA_REQUIRE_GPU();
    const bool hopper_device = hopper_kernel_runs_here();
    int runs = 0, recovered = 0;
    for (const BadCase &bc : bad_cases()) {
        const ServingCase &c = bc.c;
        FarData data(c, bc.where);
        for (fmha_kernel_family k : every_family_or_forced()) {
            if (k == FMHA_KERNEL_HOPPER && !hopper_device) continue;
            INFO(c.name() << " on " << family_name(k));
            PlannedRun pr;
            if (!plan_family(data.descriptor(k, c.num_splits), &pr)) continue;
            const size_t ws_bytes = pr.ws_bytes;
            for (const Broken &b : bc.broken) {
                INFO(b.what);
                data.prefill_outputs();
                data.upload_lengths(b.cu_q.empty() ? nullptr : &b.cu_q,
                                    b.cu_k.empty() ? nullptr : &b.cu_k,
                                    b.seqused.empty() ? nullptr : &b.seqused);
                const fmha_tensors t = data.tensors();
                const fmha_status st =
                    fmha_run(pr.plan.get(), &t, pr.workspace(), ws_bytes, nullptr);
                INFO("fmha_run: " << fmha_status_string(st) << " " << fmha_last_error_message());
                CHECK(st == FMHA_STATUS_SUCCESS);
                const cudaError_t err = cudaDeviceSynchronize();
                INFO(cudaGetErrorName(err));
                REQUIRE(err == cudaSuccess);  // a fault breaks the context: stop here
                std::string why;
                const bool guards =
                    data.guards_intact(&why) && (ws_bytes == 0 || pr.ws.guards_intact(&why));
                INFO(why);
                CHECK(guards);
                ++runs;
            }
            // The right arrays give the right result again.
            data.restore_lengths();
            const ServingRun r = run_serving(data, k, c.num_splits);
            INFO(r.summary(c));
            CHECK(r.passed());
            recovered += r.passed();
        }
    }
    std::printf("bad lengths: %d runs with broken arrays, %d recovered runs passed\n", runs,
                recovered);
    CHECK(runs > 0);
}
