// fmha_bench_host: what libfmha costs the CPU. A serving loop that does not
// replay CUDA graphs pays fmha_run's host time on every layer of every step,
// and a server whose batch shapes change pays fmha_create_plan. This program
// measures both per kernel family and problem shape, next to one CUDA runtime
// enqueue (cudaMemsetAsync of 16 bytes) for scale, and the GPU time of the
// same call so the two can be compared.
//
//   build/tests/fmha_bench_host            # the serving shapes of bench_serving
//   build/tests/fmha_bench_host --quick    # small shapes (the ctest smoke run)
//
// fmha_run is timed call by call (steady_clock) in batches of kBatch calls,
// the stream synchronized between batches (not timed), so the launch queue
// never fills and blocks a call. Every call's status is checked, and after
// the last batch every output element of every sequence must be finite (the
// outputs start as NaN): a run that did nothing is not timed as a fast one.
// Exits 0 on success, 77 without a usable GPU, 1 when a call fails.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "fmha/fmha.h"
#include "fmha_test/buffers.h"
#include "fmha_test/gpu.h"
#include "fmha_test/serving.h"

using namespace fmha_test;

namespace {

constexpr int kBatch = 50;  // calls between two synchronizations

struct Options {
    bool quick = false;
    int batches = 40;  // timed batches per case
};

struct Stats {
    double median = 0, p90 = 0, max = 0;
};

Stats stats_of(std::vector<double> v) {
    Stats s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    s.median = v[v.size() / 2];
    s.p90 = v[std::min(v.size() - 1, v.size() * 9 / 10)];
    s.max = v.back();
    return s;
}

double micros_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

void api_check(fmha_status st, const char *what) {
    if (st != FMHA_STATUS_SUCCESS)
        throw std::runtime_error(std::string(what) + ": " + fmha_status_string(st) + ": " +
                                 fmha_last_error_message());
}

struct BenchCase {
    const char *label;
    ServingCase c;
};

std::vector<int32_t> repeat(int n, int32_t value) { return std::vector<int32_t>(size_t(n), value); }

std::vector<BenchCase> cases(bool quick) {
    const fmha_dtype bf16 = FMHA_DTYPE_BF16;
    const int scale = quick ? 8 : 1;  // --quick: a short cache
    std::vector<BenchCase> out;
    out.push_back({"decode T=1 B8 H32/8 S8192 (auto split)",
                   serving_case(bf16, 128, 32, 8).q(repeat(8, 1)).k(repeat(8, 8192 / scale))});
    out.push_back({"decode T=1 B32 H32/8 S4096",
                   serving_case(bf16, 128, 32, 8).q(repeat(32, 1)).k(repeat(32, 4096 / scale))});
    out.push_back({"decode T=1 B8 H32/8 S8192 paged 16",
                   serving_case(bf16, 128, 32, 8).q(repeat(8, 1)).paged(16, repeat(8, 8192 / scale))});
    {
        ServingCase c = serving_case(bf16, 128, 32, 8).q(repeat(8, 32)).paged(16, repeat(8, 8192 / scale));
        c.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
        out.push_back({"decode T=32 B8 H32/8 S8192 paged 16", c});
    }
    {
        ServingCase c = serving_case(bf16, 128, 32, 8).q({4096 / scale}).k({4096 / scale});
        c.mask = FMHA_MASK_CAUSAL_TOP_LEFT;
        out.push_back({"prefill B1 H32/8 S4096 causal", c});
    }
    {
        const std::vector<int32_t> lens = {836 / scale, 3953 / scale, 1276 / scale, 532 / scale};
        ServingCase c = serving_case(bf16, 128, 32, 8).varlen_q(lens).packed_k(lens);
        c.mask = FMHA_MASK_CAUSAL_TOP_LEFT;
        out.push_back({"varlen prefill 4 seqs H32/8 causal", c});
    }
    {
        ServingCase c = serving_case(bf16, 128, 32, 8).q({1024 / scale}).k({1024 / scale});
        c.kernel = FMHA_KERNEL_PORTABLE;
        out.push_back({"prefill B1 H32/8 S1024 (portable)", c});
    }
    for (BenchCase &k : out) k.c.write_lse = false;
    return out;
}

bool is_finite_half(uint16_t bits, fmha_dtype dtype) {
    const uint16_t exp_mask = dtype == FMHA_DTYPE_BF16 ? 0x7F80u : 0x7C00u;
    return (bits & exp_mask) != exp_mask;
}

// Every O element of every sequence's rows is finite.
bool outputs_written(const ServingData &data, std::string *why) {
    const Outputs out = data.download();
    const ServingCase &c = data.config();
    for (int64_t b = 0; b < c.batch(); ++b)
        for (int64_t i = 0; i < c.eff_q(b); ++i)
            for (int64_t h = 0; h < c.num_q_heads; ++h)
                for (int64_t d = 0; d < c.head_dim; ++d) {
                    const uint16_t bits = out.o[size_t(data.o_element(b, i, h, d))];
                    if (!is_finite_half(bits, c.dtype)) {
                        *why = "O[" + std::to_string(b) + "][" + std::to_string(i) + "][" +
                               std::to_string(h) + "][" + std::to_string(d) + "] is not finite";
                        return false;
                    }
                }
    return true;
}

// Host time of one runtime enqueue, for scale.
Stats memset_enqueue(cudaStream_t stream, const Options &opt) {
    void *p = nullptr;
    FMHA_TEST_CUDA(cudaMalloc(&p, 16));
    std::vector<double> samples;
    for (int b = 0; b <= opt.batches; ++b) {
        for (int i = 0; i < kBatch; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            FMHA_TEST_CUDA(cudaMemsetAsync(p, 0, 16, stream));
            if (b > 0) samples.push_back(micros_since(t0));  // batch 0 warms up
        }
        FMHA_TEST_CUDA(cudaStreamSynchronize(stream));
    }
    FMHA_TEST_CUDA(cudaFree(p));
    return stats_of(samples);
}

struct Result {
    std::string kernel;
    int32_t splits = 0;
    double first_plan_us = 0;
    Stats plan, run;
    double gpu_us = 0;
};

Result measure(const BenchCase &k, cudaStream_t stream, const Options &opt) {
    ServingData data(k.c);
    data.prefill_outputs();
    const fmha_descriptor desc = data.descriptor();
    Result r;

    // Plan creation: the first for this shape, then repeated (create only timed).
    fmha_plan *plan = nullptr;
    auto t0 = std::chrono::steady_clock::now();
    api_check(fmha_create_plan(&plan, &desc), "fmha_create_plan");
    r.first_plan_us = micros_since(t0);
    std::vector<double> plan_samples;
    for (int i = 0; i < 50; ++i) {
        fmha_plan *again = nullptr;
        t0 = std::chrono::steady_clock::now();
        api_check(fmha_create_plan(&again, &desc), "fmha_create_plan");
        plan_samples.push_back(micros_since(t0));
        fmha_destroy_plan(again);
    }
    r.plan = stats_of(plan_samples);

    fmha_plan_info info;
    api_check(fmha_plan_info_init(&info, FMHA_PLAN_INFO_VERSION), "fmha_plan_info_init");
    api_check(fmha_plan_get_info(plan, &info), "fmha_plan_get_info");
    r.kernel = info.kernel_name;
    r.splits = info.num_splits;
    size_t ws_bytes = 0;
    api_check(fmha_plan_workspace_size(plan, &ws_bytes), "fmha_plan_workspace_size");
    void *ws = nullptr;
    if (ws_bytes > 0) FMHA_TEST_CUDA(cudaMalloc(&ws, ws_bytes));
    const fmha_tensors t = data.tensors();
    const fmha_stream s = reinterpret_cast<fmha_stream>(stream);

    cudaEvent_t start, stop;
    FMHA_TEST_CUDA(cudaEventCreate(&start));
    FMHA_TEST_CUDA(cudaEventCreate(&stop));
    std::vector<double> run_samples;
    std::vector<double> gpu_per_call;
    for (int b = 0; b <= opt.batches; ++b) {
        FMHA_TEST_CUDA(cudaEventRecord(start, stream));
        for (int i = 0; i < kBatch; ++i) {
            t0 = std::chrono::steady_clock::now();
            const fmha_status st = fmha_run(plan, &t, ws, ws_bytes, s);
            const double us = micros_since(t0);
            api_check(st, "fmha_run");
            if (b > 0) run_samples.push_back(us);  // batch 0 warms up
        }
        FMHA_TEST_CUDA(cudaEventRecord(stop, stream));
        FMHA_TEST_CUDA(cudaStreamSynchronize(stream));
        float ms = 0;
        FMHA_TEST_CUDA(cudaEventElapsedTime(&ms, start, stop));
        if (b > 0) gpu_per_call.push_back(1000.0 * ms / kBatch);
    }
    FMHA_TEST_CUDA(cudaGetLastError());
    r.run = stats_of(run_samples);
    r.gpu_us = stats_of(gpu_per_call).median;

    std::string why;
    if (!outputs_written(data, &why)) throw std::runtime_error(std::string(k.label) + ": " + why);
    FMHA_TEST_CUDA(cudaEventDestroy(start));
    FMHA_TEST_CUDA(cudaEventDestroy(stop));
    if (ws != nullptr) FMHA_TEST_CUDA(cudaFree(ws));
    fmha_destroy_plan(plan);
    return r;
}

}  // namespace

int main(int argc, char **argv) {
    Options opt;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--quick") == 0) {
            opt.quick = true;
            opt.batches = 4;
        } else {
            std::fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
            return 2;
        }
    }
    std::string why;
    if (!gpu_available(&why)) {
        std::printf("fmha_bench_host: SKIPPED: no CUDA device: %s\n", why.c_str());
        return 77;
    }
    try {
        cudaStream_t stream;
        FMHA_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        std::printf("libfmha %s, sm_%d; host microseconds per call (median / p90 / max of %d), "
                    "GPU microseconds per call from events over batches of %d\n",
                    fmha_version_string(), current_device_sm(), opt.batches * kBatch, kBatch);
        const Stats ms = memset_enqueue(stream, opt);
        std::printf("cudaMemsetAsync(16 bytes), for scale: %.2f / %.2f / %.1f us\n\n", ms.median,
                    ms.p90, ms.max);
        std::printf("%-38s %-42s %6s %10s %10s %20s %8s\n", "problem", "kernel", "splits",
                    "plan first", "plan", "fmha_run", "GPU");
        for (const BenchCase &k : cases(opt.quick)) {
            const Result r = measure(k, stream, opt);
            char run[64];
            std::snprintf(run, sizeof run, "%.2f / %.2f / %.1f", r.run.median, r.run.p90, r.run.max);
            std::printf("%-38s %-42s %6d %10.1f %10.1f %20s %8.1f\n", k.label, r.kernel.c_str(),
                        r.splits, r.first_plan_us, r.plan.median, run, r.gpu_us);
        }
        FMHA_TEST_CUDA(cudaStreamDestroy(stream));
    } catch (const std::exception &e) {
        std::printf("fmha_bench_host: FAILED: %s\n", e.what());
        return 1;
    }
    return 0;
}
