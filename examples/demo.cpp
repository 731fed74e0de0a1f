// fmha_demo: bf16 attention (batch 4, 16 heads, 2048 x 2048, head dim 128),
// causal and not, checked against a float64 CPU reference on a few heads
// (2x rule against a same-precision reference) and timed with CUDA events.
//
// Without a usable GPU it says so and exits 0. Exits 1 when a check fails,
// 2 when the library or CUDA reports an error.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fmha/fmha.h"
#include "fmha_test/buffers.h"
#include "fmha_test/gpu.h"
#include "fmha_test/half.h"
#include "fmha_test/layout.h"
#include "fmha_test/random.h"
#include "fmha_test/reference.h"

using namespace fmha_test;

namespace {

constexpr int64_t kBatch = 4, kHeads = 16, kSeq = 2048, kDim = 128;
constexpr int kWarmup = 3, kTimed = 20;

struct ApiError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

void check(fmha_status st, const char *what) {
    if (st != FMHA_STATUS_SUCCESS)
        throw ApiError(std::string(what) + ": " + fmha_status_string(st) + ": " +
                       fmha_last_error_message());
}

struct Result {
    std::string kernel;
    double max_err = 0, lowp_err = 0, median_ms = 0, tflops = 0;
    bool ok = false;
};

// (batch, head) pairs checked against the CPU reference.
const int64_t kChecked[][2] = {{0, 0}, {1, 7}, {2, 11}, {3, 15}};

Result run(bool causal, const std::vector<uint16_t> &hq, const std::vector<uint16_t> &hk,
           const std::vector<uint16_t> &hv, const TensorLayout &layout, DeviceBuffer &q,
           DeviceBuffer &k, DeviceBuffer &v, DeviceBuffer &o) {
    fmha_descriptor d;
    check(fmha_descriptor_init(&d, FMHA_DESCRIPTOR_VERSION), "fmha_descriptor_init");
    d.dtype = FMHA_DTYPE_BF16;
    d.batch = kBatch;
    d.num_q_heads = d.num_kv_heads = kHeads;
    d.seqlen_q = d.seqlen_k = kSeq;
    d.head_dim = kDim;
    d.q_strides = d.k_strides = d.v_strides = d.o_strides = layout.strides;
    d.mask = causal ? FMHA_MASK_CAUSAL_BOTTOM_RIGHT : FMHA_MASK_NONE;

    fmha_plan *plan = nullptr;
    check(fmha_create_plan(&plan, &d), "fmha_create_plan");
    Result r;
    fmha_plan_info info;
    fmha_plan_info_init(&info, FMHA_PLAN_INFO_VERSION);
    check(fmha_plan_get_info(plan, &info), "fmha_plan_get_info");
    r.kernel = info.kernel_name ? info.kernel_name : "?";
    size_t ws_bytes = 0;
    check(fmha_plan_workspace_size(plan, &ws_bytes), "fmha_plan_workspace_size");
    DeviceBuffer ws;
    if (ws_bytes > 0) ws = DeviceBuffer((ws_bytes + 3) / 4, 4, kGuard32);

    fmha_tensors t;
    fmha_tensors_init(&t, FMHA_TENSORS_VERSION);
    t.q = q.data();
    t.k = k.data();
    t.v = v.data();
    t.o = o.data();
    o.fill(kOutputPrefill16);
    cudaStream_t stream;
    FMHA_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    auto launch = [&] {
        check(fmha_run(plan, &t, ws_bytes ? ws.data() : nullptr, ws_bytes, fmha_stream(stream)),
              "fmha_run");
    };
    for (int i = 0; i < kWarmup; ++i) launch();
    FMHA_TEST_CUDA(cudaStreamSynchronize(stream));

    std::vector<cudaEvent_t> ev(2 * kTimed);
    for (auto &e : ev) FMHA_TEST_CUDA(cudaEventCreate(&e));
    for (int i = 0; i < kTimed; ++i) {
        FMHA_TEST_CUDA(cudaEventRecord(ev[size_t(2 * i)], stream));
        launch();
        FMHA_TEST_CUDA(cudaEventRecord(ev[size_t(2 * i + 1)], stream));
    }
    FMHA_TEST_CUDA(cudaStreamSynchronize(stream));
    FMHA_TEST_CUDA(cudaGetLastError());
    std::vector<float> ms(kTimed);
    for (int i = 0; i < kTimed; ++i)
        FMHA_TEST_CUDA(cudaEventElapsedTime(&ms[size_t(i)], ev[size_t(2 * i)], ev[size_t(2 * i + 1)]));
    for (auto &e : ev) cudaEventDestroy(e);
    std::sort(ms.begin(), ms.end());
    r.median_ms = (ms[kTimed / 2 - 1] + ms[kTimed / 2]) / 2.0;
    double flops = 4.0 * kBatch * kHeads * double(kSeq) * double(kSeq) * kDim;
    if (causal) flops /= 2;
    r.tflops = flops / (r.median_ms * 1e-3) / 1e12;
    cudaStreamDestroy(stream);
    fmha_destroy_plan(plan);

    // Check a few heads against the CPU references, one thread per head and reference.
    std::vector<uint16_t> out(o.elems());
    o.download(out.data());
    const size_t n_checked = sizeof kChecked / sizeof kChecked[0];
    std::vector<RefResult> ref64(n_checked), reflp(n_checked);
    std::vector<std::thread> pool;
    RefProblem ref_problem;
    ref_problem.dtype = FMHA_DTYPE_BF16;
    ref_problem.seqlen_q = ref_problem.seqlen_k = kSeq;
    ref_problem.head_dim = kDim;
    ref_problem.mask = d.mask == FMHA_MASK_NONE ? FMHA_MASK_NONE : FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
    ref_problem.softmax_scale = double(1.0f / std::sqrt(float(kDim)));
    ref_problem.q = ref_problem.k = ref_problem.v = ref_problem.o = layout.strides;
    for (size_t c = 0; c < n_checked; ++c) {
        const int64_t off = kChecked[c][0] * layout.strides.batch + kChecked[c][1] * layout.strides.head;
        pool.emplace_back([&, c, off] {
            ref64[c] = reference_fp64(ref_problem, hq.data() + off, hk.data() + off, hv.data() + off, 1);
        });
        pool.emplace_back([&, c, off] {
            reflp[c] = reference_lowp(ref_problem, hq.data() + off, hk.data() + off, hv.data() + off, 1);
        });
    }
    for (auto &th : pool) th.join();
    bool all_written = true;
    for (size_t c = 0; c < n_checked; ++c) {
        const int64_t b = kChecked[c][0], h = kChecked[c][1];
        for (int64_t i = 0; i < kSeq; ++i)
            for (int64_t dd = 0; dd < kDim; ++dd) {
                const uint16_t bits = out[size_t(element_offset(layout.strides, b, i, h, dd))];
                const double ref = ref64[c].o[size_t(i * kDim + dd)];
                r.lowp_err = std::max(r.lowp_err, std::fabs(reflp[c].o[size_t(i * kDim + dd)] - ref));
                if (is_nan_lowp(bits, FMHA_DTYPE_BF16)) {
                    all_written = false;
                    continue;
                }
                r.max_err = std::max(r.max_err, std::fabs(double(bf16_to_float(bits)) - ref));
            }
    }
    r.ok = all_written && r.max_err <= 2 * r.lowp_err + 1e-6;
    if (!all_written) std::printf("  output has NaN / unwritten elements\n");
    return r;
}

}  // namespace

int main() {
    std::string why;
    if (!gpu_available(&why)) {
        std::printf("fmha_demo: no CUDA GPU/driver available (%s); nothing to run\n", why.c_str());
        return 0;
    }
    try {
        int dev = 0;
        FMHA_TEST_CUDA(cudaGetDevice(&dev));
        cudaDeviceProp prop;
        FMHA_TEST_CUDA(cudaGetDeviceProperties(&prop, dev));
        int32_t drv = 0;
        check(fmha_driver_version(&drv), "fmha_driver_version");
        std::printf("fmha_demo: libfmha %s, CUDA driver %d, %s (sm_%d)\n", fmha_version_string(),
                    drv, prop.name, current_device_sm());

        const TensorLayout layout = make_layout(Layout::BSHD, kBatch, kSeq, kHeads, kDim);
        std::mt19937_64 rng(base_seed());
        std::vector<uint16_t> hq = random_tensor(layout, kBatch, kSeq, kHeads, kDim, FMHA_DTYPE_BF16, rng);
        std::vector<uint16_t> hk = random_tensor(layout, kBatch, kSeq, kHeads, kDim, FMHA_DTYPE_BF16, rng);
        std::vector<uint16_t> hv = random_tensor(layout, kBatch, kSeq, kHeads, kDim, FMHA_DTYPE_BF16, rng);
        DeviceBuffer q(layout.alloc_elems, 2, kGuard16), k(layout.alloc_elems, 2, kGuard16),
            v(layout.alloc_elems, 2, kGuard16), o(layout.alloc_elems, 2, kGuard16);
        q.upload(hq.data());
        k.upload(hk.data());
        v.upload(hv.data());

        bool all_ok = true;
        for (bool causal : {false, true}) {
            Result r = run(causal, hq, hk, hv, layout, q, k, v, o);
            std::string guard_why;
            const bool guards = o.guards_intact(&guard_why);
            std::printf("bf16 B=%lld H=%lld S=%lld D=%lld %-10s kernel %s | max err %.3g "
                        "(same-precision ref %.3g, ratio %.2f, %zu heads checked) | median %.3f ms "
                        "of %d | %.1f TFLOP/s | %s\n",
                        (long long)kBatch, (long long)kHeads, (long long)kSeq, (long long)kDim,
                        causal ? "causal" : "non-causal", r.kernel.c_str(), r.max_err, r.lowp_err,
                        r.max_err / std::max(r.lowp_err, 5e-7), sizeof kChecked / sizeof kChecked[0],
                        r.median_ms, kTimed, r.tflops,
                        r.ok && guards ? "PASS" : "FAIL");
            if (!guards) std::printf("  output guard band overwritten: %s\n", guard_why.c_str());
            all_ok = all_ok && r.ok && guards;
        }
        return all_ok ? 0 : 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "fmha_demo: %s\n", e.what());
        return 2;
    }
}
