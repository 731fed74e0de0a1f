// CUDA graph capture and one plan shared by several threads and streams.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fmha_test/half.h"
#include "fmha_test/random.h"
#include "gpu_common.h"

using namespace fmha_test;

namespace {

Case concurrency_case(uint64_t index) {
    Case c;
    c.dtype = FMHA_DTYPE_FP16;
    c.batch = 2;
    c.num_q_heads = 8;
    c.num_kv_heads = 2;
    c.seqlen_q = 300;
    c.seqlen_k = 517;
    c.head_dim = 128;
    c.mask = FMHA_MASK_CAUSAL_TOP_LEFT;
    c.layout = Layout::BHSD;
    c.kernel = test_kernel_family();
    c.seed = case_seed(base_seed(), 20000 + index);
    return c;
}

std::string cuda_error_text(cudaError_t e) {
    return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

struct Workspace {
    size_t bytes = 0;
    DeviceBuffer buf;
    explicit Workspace(const fmha_plan *plan) {
        REQUIRE(fmha_plan_workspace_size(plan, &bytes) == FMHA_STATUS_SUCCESS);
        if (bytes > 0) buf = DeviceBuffer((bytes + 3) / 4, 4, kGuard32);
    }
    void *ptr() const { return bytes ? buf.data() : nullptr; }
};

}  // namespace

TEST_CASE("fmha_run inside CUDA graph capture matches a direct run", "[gpu][graph]") {
    FMHA_GPU_TEST_PROLOGUE();
    CaseData data(concurrency_case(0));
    PlanPtr plan = make_plan(data.descriptor());
    std::printf("graph: %s\n", describe_plan(plan.get()).c_str());
    Workspace ws(plan.get());
    const fmha_tensors t = data.tensors();

    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_run(plan.get(), &t, ws.ptr(), ws.bytes, nullptr));
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const Outputs direct = data.download();
    Comparison cmp = data.compare(direct);
    INFO(cmp.detail);
    REQUIRE(cmp.o_ok);
    REQUIRE(cmp.lse_ok);

    data.prefill_outputs();
    cudaStream_t s;
    REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
    fmha_status st = fmha_run(plan.get(), &t, ws.ptr(), ws.bytes, fmha_stream(s));
    const std::string msg = fmha_last_error_message();
    cudaGraph_t graph = nullptr;
    cudaError_t end = cudaStreamEndCapture(s, &graph);
    INFO("fmha_run during capture -> " << fmha_status_string(st) << ": " << msg);
    REQUIRE(st == FMHA_STATUS_SUCCESS);
    INFO("cudaStreamEndCapture: " << cuda_error_text(end));
    REQUIRE(end == cudaSuccess);
    REQUIRE(graph != nullptr);
    size_t nodes = 0;
    REQUIRE(cudaGraphGetNodes(graph, nullptr, &nodes) == cudaSuccess);
    CHECK(nodes >= 1);
    std::printf("graph: captured %zu node(s)\n", nodes);
    cudaGraphExec_t exec = nullptr;
    cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    INFO("cudaGraphInstantiate: " << cuda_error_text(inst));
    REQUIRE(inst == cudaSuccess);
    // Nothing ran at capture time.
    REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
    {
        Outputs before = data.download();
        bool untouched = true;
        for (uint16_t x : before.o) untouched = untouched && x == kOutputPrefill16;
        CHECK(untouched);
    }
    for (int replay = 0; replay < 3; ++replay) {
        INFO("replay " << replay);
        data.prefill_outputs();
        REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
        cudaError_t e = cudaStreamSynchronize(s);
        INFO(cuda_error_text(e));
        REQUIRE(e == cudaSuccess);
        CHECK(data.download() == direct);  // bitwise
    }
    std::string why;
    CHECK(data.guards_intact(&why));
    INFO(why);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
}

TEST_CASE("one plan, four threads, four streams", "[gpu][threads]") {
    FMHA_GPU_TEST_PROLOGUE();
    constexpr int kThreads = 4, kIters = 8;
    std::vector<std::unique_ptr<CaseData>> data;
    for (int i = 0; i < kThreads; ++i)
        data.emplace_back(new CaseData(concurrency_case(uint64_t(100 + i))));
    PlanPtr plan = make_plan(data[0]->descriptor());  // same shape for all: one plan
    std::printf("threads: %s\n", describe_plan(plan.get()).c_str());
    std::vector<std::unique_ptr<Workspace>> ws;
    for (int i = 0; i < kThreads; ++i) ws.emplace_back(new Workspace(plan.get()));

    // Golden outputs, one at a time on the default stream, checked against the reference.
    std::vector<Outputs> golden(kThreads);
    for (int i = 0; i < kThreads; ++i) {
        const fmha_tensors t = data[size_t(i)]->tensors();
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                            fmha_run(plan.get(), &t, ws[size_t(i)]->ptr(), ws[size_t(i)]->bytes,
                                     nullptr));
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        golden[size_t(i)] = data[size_t(i)]->download();
        Comparison cmp = data[size_t(i)]->compare(golden[size_t(i)]);
        INFO("input " << i << ": " << cmp.detail);
        REQUIRE(cmp.o_ok);
        REQUIRE(cmp.lse_ok);
    }

    // Then all at once: each thread its own stream and inputs, the plan shared.
    std::vector<std::string> errors(kThreads);
    std::atomic<int> ready{0};
    std::vector<std::thread> pool;
    for (int i = 0; i < kThreads; ++i)
        pool.emplace_back([&, i] {
            std::string &err = errors[size_t(i)];
            CaseData &d = *data[size_t(i)];
            cudaStream_t s = nullptr;
            cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
            if (e != cudaSuccess) {
                err = "cudaStreamCreate: " + cuda_error_text(e);
                return;
            }
            ++ready;
            while (ready.load() < kThreads) std::this_thread::yield();
            const fmha_tensors t = d.tensors();
            for (int it = 0; it < kIters && err.empty(); ++it) {
                try {
                    d.prefill_outputs();
                    fmha_status st =
                        fmha_run(plan.get(), &t, ws[size_t(i)]->ptr(), ws[size_t(i)]->bytes,
                                 fmha_stream(s));
                    if (st != FMHA_STATUS_SUCCESS) {
                        err = std::string("fmha_run: ") + fmha_status_string(st) + ": " +
                              fmha_last_error_message();
                        break;
                    }
                    e = cudaStreamSynchronize(s);
                    if (e != cudaSuccess) {
                        err = "cudaStreamSynchronize: " + cuda_error_text(e);
                        break;
                    }
                    if (!(d.download() == golden[size_t(i)]))
                        err = "iteration " + std::to_string(it) +
                              ": output differs from the single-threaded run";
                } catch (const std::exception &ex) {
                    err = ex.what();
                }
            }
            cudaStreamDestroy(s);
        });
    for (auto &th : pool) th.join();
    for (int i = 0; i < kThreads; ++i) {
        INFO("thread " << i);
        CHECK(errors[size_t(i)] == "");
        std::string why;
        CHECK(data[size_t(i)]->guards_intact(&why));
    }
}
