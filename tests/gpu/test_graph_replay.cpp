// Serving's use of CUDA graphs: fmha_run captured once, then replayed step
// after step while the memory it reads changes, as a server's decode loop
// does: new query tokens, keys used growing across page boundaries, pages
// reassigned in the block table, a new mix of packed query lengths under
// one total_q capacity. Every replay is checked against the float64
// reference of that step's inputs (2x rule, outputs prefilled with NaN,
// guard bands), on every kernel family (only FMHA_TEST_KERNEL's when it
// names one), with the split-KV workspace the plan reports.
//
// Environment: FMHA_TEST_KERNEL, FMHA_TEST_SEED, FMHA_TEST_VERBOSE=1.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fmha_test/random.h"
#include "fmha_test/serving.h"
#include "gpu_common.h"

using namespace fmha_test;

namespace {


// The steps of one decode loop: one plan, one capture, a case per replay.
struct Loop {
    const char *what;
    std::vector<ServingCase> steps;
};

// `base` with the keys used (and, if given, the packed query lengths) of
// step s, a fresh seed (new inputs and a new page order) per step.
ServingCase step_of(ServingCase base, uint64_t index, std::vector<int32_t> seqused,
                    std::vector<int32_t> q_lens = {}) {
    base.seqused = std::move(seqused);
    if (!q_lens.empty()) {  // the same total_q: the spare rows take up the rest
        int64_t capacity = base.extra_q_rows, sum = 0;
        for (int32_t x : base.q_lens) capacity += x;
        for (int32_t x : q_lens) sum += x;
        base.extra_q_rows = capacity - sum;
        base.q_lens = std::move(q_lens);
    }
    base.seed = case_seed(base_seed(), index);
    return base;
}

std::vector<Loop> loops() {
    const fmha_mask br = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
    std::vector<Loop> v;
    {  // T=1 decode over 16-row pages: the decode kernel's split-KV and combine
        ServingCase b = serving_case(FMHA_DTYPE_BF16, 128, 32, 8)
                            .q({1, 1, 1}).paged(16, {3000, 700, 2048}).mask(br);
        v.push_back({"decode, pages of 16",
                     {step_of(b, 32000, {2990, 640, 1}), step_of(b, 32001, {2991, 656, 17}),
                      step_of(b, 32002, {2992, 657, 1024}), step_of(b, 32003, {3000, 700, 2048})}});
    }
    {  // 8 tokens x 4 query heads per KV head (Hopper packed heads), 64-row pages
        ServingCase b = serving_case(FMHA_DTYPE_FP16, 128, 16, 4)
                            .q({8, 8}).paged(64, {2500, 1200}).mask(br);
        v.push_back({"multi-token decode, pages of 64",
                     {step_of(b, 32010, {2400, 8}), step_of(b, 32011, {2408, 72}),
                      step_of(b, 32012, {2500, 1200})}});
    }
    {  // chunked prefill: packed Q lengths change under one total_q capacity
        ServingCase b = serving_case(FMHA_DTYPE_BF16, 128, 8, 2)
                            .varlen_q({100, 0, 37}, 3).paged(16, {1200, 600, 900}).mask(br);
        b.seqlen_q = 136;
        v.push_back({"chunked prefill, pages of 16",
                     {step_of(b, 32020, {300, 0, 37}, {100, 0, 37}),
                      step_of(b, 32021, {320, 64, 90}, {20, 64, 53}),
                      step_of(b, 32022, {320, 65, 226}, {0, 1, 136})}});
    }
    {  // MLA-style hd512 over pages of one row
        ServingCase b = serving_case(FMHA_DTYPE_BF16, 512, 64, 1)
                            .q({1, 1}).paged(1, {900, 400}).mask(br);
        v.push_back({"hd512 decode, pages of 1",
                     {step_of(b, 32030, {500, 1}), step_of(b, 32031, {501, 2}),
                      step_of(b, 32032, {900, 400})}});
    }
    return v;
}

bool same_descriptor(const fmha_descriptor &a, const fmha_descriptor &b) {
    return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace

TEST_CASE("a captured run replays over changing lengths, pages and inputs",
          "[gpu][graph][serving]") {
    FMHA_REQUIRE_GPU();
    const bool verbose = std::getenv("FMHA_TEST_VERBOSE") != nullptr;
    const bool hopper_device = hopper_kernel_runs_here();
    int replays = 0, passed = 0;
    for (const Loop &loop : loops()) {
        const ServingCase &first = loop.steps[0];
        for (fmha_kernel_family k : every_family_or_forced()) {
            if (k == FMHA_KERNEL_HOPPER && !hopper_device) continue;
            INFO(loop.what << " on " << family_name(k));
            ServingData data(first);
            const fmha_descriptor desc = data.descriptor(k, 0);
            for (const ServingCase &c : loop.steps)  // one plan serves every step
                REQUIRE(same_descriptor(desc, ServingHost(c, false).descriptor(k, 0)));
            PlannedRun pr;
            if (!plan_family(desc, &pr)) continue;
            const std::string plan_text = describe_plan(pr.plan.get());
            INFO(plan_text);
            const size_t ws_bytes = pr.ws_bytes;

            cudaStream_t s;
            REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
            const fmha_tensors t = data.tensors();
            REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
            const fmha_status rst =
                fmha_run(pr.plan.get(), &t, pr.workspace(), ws_bytes, fmha_stream(s));
            const std::string msg = fmha_last_error_message();
            cudaGraph_t graph = nullptr;
            const cudaError_t end = cudaStreamEndCapture(s, &graph);
            INFO("fmha_run in capture: " << fmha_status_string(rst) << " " << msg);
            REQUIRE(rst == FMHA_STATUS_SUCCESS);
            REQUIRE(end == cudaSuccess);
            cudaGraphExec_t exec = nullptr;
            REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);

            for (size_t i = 0; i < loop.steps.size(); ++i) {
                const ServingCase &c = loop.steps[i];
                INFO("step " << i << ": " << c.name());
                ServingHost step(c);
                data.upload_inputs(step);
                data.prefill_outputs();
                REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
                const cudaError_t e = cudaStreamSynchronize(s);
                INFO(cudaGetErrorName(e));
                REQUIRE(e == cudaSuccess);
                const Comparison cmp = step.compare(data.download());
                std::string why;
                const bool guards =
                    data.guards_intact(&why) && (ws_bytes == 0 || pr.ws.guards_intact(&why));
                const bool ok = cmp.o_ok && cmp.lse_ok && cmp.all_written && cmp.gaps_untouched &&
                                cmp.masked_rows_ok && guards;
                ++replays;
                passed += ok;
                if (verbose || !ok)
                    std::printf("graph replay: %s %s, step %zu: %s ratio %.2f err %.3g%s%s\n",
                                loop.what, family_name(k), i, ok ? "ok" : "FAIL", cmp.ratio,
                                cmp.max_err, cmp.detail.empty() ? "" : " | ",
                                (cmp.detail + why).c_str());
                INFO(cmp.detail << why);
                CHECK(ok);
            }
            cudaGraphExecDestroy(exec);
            cudaGraphDestroy(graph);
            cudaStreamDestroy(s);
        }
    }
    std::printf("graph replay: %d replays, %d passed\n", replays, passed);
    CHECK(replays > 0);
}
