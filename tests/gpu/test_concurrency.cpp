// CUDA graph capture, one plan shared by several threads and streams, and
// runs chained through their outputs.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cmath>
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
    Case c = dense_case(FMHA_DTYPE_FP16, 128, 2, 8, 2, 300, 517);
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
    // The split-KV partials stay inside the workspace.
    bool guards_intact(std::string *why) const { return bytes == 0 || buf.guards_intact(why); }
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
    check_whole_run(data, cmp, &ws.buf);
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
    const bool guards = data.guards_intact(&why) && ws.guards_intact(&why);
    INFO(why);
    CHECK(guards);
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
        INFO("input " << i);
        check_whole_run(*data[size_t(i)], cmp, &ws[size_t(i)]->buf);
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
        const bool guards = data[size_t(i)]->guards_intact(&why) && ws[size_t(i)]->guards_intact(&why);
        INFO(why);
        CHECK(guards);
    }
}

// Runs queued back to back on one stream, each reading the previous run's O
// as its Q. The decode kernel and the split combine are launched as
// programmatic dependents (scheduled while their predecessor drains): a
// kernel that touched global memory before its predecessor finished would
// read the NaN prefill or a half-written O here.
TEST_CASE("chained runs read their predecessor's output", "[gpu][chain]") {
    FMHA_GPU_TEST_PROLOGUE();
    struct Shape {
        int64_t batch, seqlen_q, seqlen_k;
        int32_t num_splits;  // 0: automatic (split-KV at these sizes), 1: none
    };
    constexpr int kSteps = 4;
    const Shape shapes[] = {{2, 4, 3000, 0}, {2, 4, 3000, 1}, {24, 1, 1024, 1}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; ++si) {
        const Shape &shape = shapes[si];
        Case c;
        c.batch = shape.batch;
        c.num_q_heads = c.num_kv_heads = 8;  // Q and O of one shape
        c.seqlen_q = shape.seqlen_q;
        c.seqlen_k = shape.seqlen_k;
        c.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
        c.write_lse = false;
        c.kernel = test_kernel_family();
        c.seed = case_seed(base_seed(), 30000 + si);
        CaseData data(c);
        fmha_descriptor first = data.descriptor();
        first.num_splits = shape.num_splits;
        fmha_descriptor next = first;  // Q is the previous step's O
        next.q_strides = data.o_layout.strides;
        PlanPtr plan_first = make_plan(first), plan_next = make_plan(next);
        const std::string plan_text = describe_plan(plan_next.get());
        std::printf("chain: %s\n", plan_text.c_str());
        INFO(c.name() << " num_splits " << shape.num_splits << ": " << plan_text);
        Workspace ws(plan_next.get());
        Workspace ws_first(plan_first.get());

        std::vector<DeviceBuffer> outs;
        for (int i = 0; i < kSteps; ++i) {
            outs.emplace_back(data.o_layout.alloc_elems, 2, kGuard16);
            outs.back().fill(kOutputPrefill16);
        }
        const int64_t offset = data.o_layout.offset;
        auto at = [&](const DeviceBuffer &b) { return static_cast<uint16_t *>(b.data()) + offset; };
        auto enqueue_chain = [&](cudaStream_t stream) {
            for (int i = 0; i < kSteps; ++i) {  // no synchronization in between
                fmha_tensors t = data.tensors();
                if (i > 0) t.q = at(outs[size_t(i - 1)]);
                t.o = at(outs[size_t(i)]);
                const fmha_plan *plan = i == 0 ? plan_first.get() : plan_next.get();
                const Workspace &w = i == 0 ? ws_first : ws;
                FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                                    fmha_run(plan, &t, w.ptr(), w.bytes, fmha_stream(stream)));
            }
        };
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        enqueue_chain(nullptr);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        REQUIRE(cudaGetLastError() == cudaSuccess);

        // Step i against the references computed from the O step i-1 wrote.
        std::vector<std::vector<uint16_t>> host(kSteps);
        for (int i = 0; i < kSteps; ++i) {
            host[size_t(i)].resize(data.o_layout.alloc_elems);
            outs[size_t(i)].download(host[size_t(i)].data());
        }
        RefProblem rp = data.ref_problem();
        const uint16_t *k = data.host_k().data() + data.k_layout.offset;
        const uint16_t *v = data.host_v().data() + data.v_layout.offset;
        for (int i = 0; i < kSteps; ++i) {
            INFO("step " << i);
            const uint16_t *q = data.host_q().data() + data.q_layout.offset;
            if (i > 0) {
                rp.q = data.o_layout.strides;
                q = host[size_t(i - 1)].data() + offset;
            }
            const RefResult r64 = reference_fp64(rp, q, k, v);
            const RefResult rlow = reference_lowp(rp, q, k, v);
            double err = 0, lowp_err = 0;
            bool finite = true;
            for (int64_t b = 0; b < c.batch; ++b)
                for (int64_t h = 0; h < c.num_q_heads; ++h)
                    for (int64_t s = 0; s < c.seqlen_q; ++s)
                        for (int64_t d = 0; d < c.head_dim; ++d) {
                            const size_t ref = size_t(((b * c.num_q_heads + h) * c.seqlen_q + s) *
                                                          c.head_dim + d);
                            const double got = bf16_to_float(
                                host[size_t(i)][size_t(offset + element_offset(
                                                                    data.o_layout.strides, b, s, h, d))]);
                            finite = finite && std::isfinite(got);
                            err = std::max(err, std::fabs(got - r64.o[ref]));
                            lowp_err = std::max(lowp_err, std::fabs(rlow.o[ref] - r64.o[ref]));
                        }
            INFO("max error " << err << ", same-precision reference " << lowp_err);
            CHECK(finite);
            CHECK(err <= 2 * lowp_err + 1e-6);
            std::string why;
            const bool guards = outs[size_t(i)].guards_intact(&why);
            INFO(why);
            CHECK(guards);
        }
        {
            std::string why;
            const bool guards = ws.guards_intact(&why) && ws_first.guards_intact(&why);
            INFO("workspaces: " << why);
            CHECK(guards);
        }

        // The same chain captured in a graph (dependent launches become
        // programmatic edges) gives the same bits.
        for (DeviceBuffer &b : outs) b.fill(kOutputPrefill16);
        cudaStream_t s;
        REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
        REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
        enqueue_chain(s);
        cudaGraph_t graph = nullptr;
        REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
        cudaGraphExec_t exec = nullptr;
        REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
        REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
        const cudaError_t e = cudaStreamSynchronize(s);
        INFO(cuda_error_text(e));
        REQUIRE(e == cudaSuccess);
        for (int i = 0; i < kSteps; ++i) {
            std::vector<uint16_t> replay(data.o_layout.alloc_elems);
            outs[size_t(i)].download(replay.data());
            INFO("graph step " << i);
            CHECK(replay == host[size_t(i)]);
        }
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        cudaStreamDestroy(s);
    }
}
