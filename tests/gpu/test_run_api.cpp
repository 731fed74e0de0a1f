// fmha_run's argument checks, workspace handling, streams, plan info and
// device selection, on a real device.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fmha_test/half.h"
#include "fmha_test/random.h"
#include "gpu_common.h"

using namespace fmha_test;

namespace {

Case small_case(uint64_t index, bool lse = true) {
    Case c = dense_case(FMHA_DTYPE_BF16, 128, 2, 4, 2, 100, 130);
    c.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
    c.write_lse = lse;
    c.kernel = test_kernel_family();
    c.seed = case_seed(base_seed(), 9000 + index);
    return c;
}

}  // namespace

TEST_CASE("plan info names the kernel and the device", "[gpu][api]") {
    FMHA_GPU_TEST_PROLOGUE();
    const fmha_kernel_family family = test_kernel_family();
    for (int64_t hd : {64, 96, 128, 256})
        for (fmha_dtype dt : {FMHA_DTYPE_BF16, FMHA_DTYPE_FP16}) {
            Case c = small_case(uint64_t(hd) + dt);
            c.head_dim = hd;
            c.dtype = dt;
            CaseData data(c);
            fmha_descriptor d = data.descriptor();
            fmha_plan *raw = nullptr;
            fmha_status st = fmha_create_plan(&raw, &d);
            if (family == FMHA_KERNEL_HOPPER && st == FMHA_STATUS_NOT_SUPPORTED) {
                std::printf("plan info: hopper kernel does not support %s: %s\n",
                            c.name().c_str(), fmha_last_error_message());
                continue;
            }
            INFO(c.name() << ": " << fmha_status_string(st) << ": " << fmha_last_error_message());
            REQUIRE(st == FMHA_STATUS_SUCCESS);
            PlanPtr plan(raw);
            std::printf("plan info: %s -> %s\n", c.name().c_str(),
                        describe_plan(plan.get()).c_str());
            fmha_plan_info info = plan_info(plan.get());
            REQUIRE(info.kernel_name != nullptr);
            CHECK(std::string(info.kernel_name).size() > 0);
            CHECK(info.device_sm == current_device_sm());
            int dev = -1;
            cudaGetDevice(&dev);
            CHECK(info.device == dev);
            CHECK(info.image_sm <= info.device_sm);
            CHECK(info.image_sm >= 80);
            CHECK(info.tile_m > 0);
            CHECK(info.tile_n > 0);
            CHECK(info.threads_per_cta > 0);
            CHECK(info.shared_memory_bytes >= 0);
            if (family != FMHA_KERNEL_AUTO) CHECK(info.kernel_family == family);
            else CHECK((info.kernel_family == FMHA_KERNEL_PORTABLE ||
                        info.kernel_family == FMHA_KERNEL_HOPPER ||
                        info.kernel_family == FMHA_KERNEL_DECODE));
            if (info.kernel_family == FMHA_KERNEL_HOPPER) CHECK(info.device_sm == 90);
            size_t ws = 0;
            REQUIRE(fmha_plan_workspace_size(plan.get(), &ws) == FMHA_STATUS_SUCCESS);
            CHECK(uint64_t(ws) == info.workspace_bytes);
            // Wrong struct version and NULLs.
            fmha_plan_info bad;
            std::memset(&bad, 0, sizeof bad);
            bad.version = 99;
            CHECK(fmha_plan_get_info(plan.get(), &bad) == FMHA_STATUS_VERSION_MISMATCH);
            CHECK(fmha_plan_get_info(plan.get(), nullptr) == FMHA_STATUS_INVALID_ARGUMENT);
            CHECK(fmha_plan_workspace_size(plan.get(), nullptr) == FMHA_STATUS_INVALID_ARGUMENT);
        }
}

TEST_CASE("fmha_run argument errors enqueue nothing", "[gpu][api]") {
    FMHA_GPU_TEST_PROLOGUE();
    CaseData data(small_case(1));
    PlanPtr plan = make_plan(data.descriptor());
    std::printf("run errors: %s\n", describe_plan(plan.get()).c_str());
    size_t ws_bytes = 0;
    REQUIRE(fmha_plan_workspace_size(plan.get(), &ws_bytes) == FMHA_STATUS_SUCCESS);
    DeviceBuffer ws;
    if (ws_bytes > 0) ws = DeviceBuffer((ws_bytes + 3) / 4, 4, kGuard32);
    void *wsp = ws_bytes ? ws.data() : nullptr;
    const fmha_tensors good = data.tensors();
    data.prefill_outputs();

    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_run(plan.get(), &good, wsp, ws_bytes, nullptr));
    sync_or_fail();
    data.prefill_outputs();

    SECTION("NULL tensors") {
        FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT,
                          fmha_run(plan.get(), nullptr, wsp, ws_bytes, nullptr));
    }
    SECTION("NULL and misaligned pointers") {
        const char *names[] = {"tensors.q", "tensors.k", "tensors.v", "tensors.o"};
        for (int which = 0; which < 4; ++which) {
            INFO(names[which]);
            fmha_tensors t = good;
            const void **slot[] = {&t.q, &t.k, &t.v, nullptr};
            if (which < 3) *slot[which] = nullptr;
            else t.o = nullptr;
            expect_run_error(plan.get(), t, wsp, ws_bytes, FMHA_STATUS_INVALID_ARGUMENT,
                             names[which]);
            t = good;
            if (which < 3) *slot[which] = offset_bytes(*slot[which], 2);  // +2 bytes
            else t.o = offset_bytes(t.o, 2);
            expect_run_error(plan.get(), t, wsp, ws_bytes, FMHA_STATUS_MISALIGNED,
                             names[which]);
            t = good;
            if (which < 3) *slot[which] = offset_bytes(*slot[which], 8);  // +8: still not 16
            else t.o = offset_bytes(t.o, 8);
            expect_run_error(plan.get(), t, wsp, ws_bytes, FMHA_STATUS_MISALIGNED,
                             names[which]);
        }
    }
    SECTION("LSE pointer") {
        fmha_tensors t = good;
        t.lse = nullptr;
        expect_run_error(plan.get(), t, wsp, ws_bytes, FMHA_STATUS_INVALID_ARGUMENT,
                         "tensors.lse");
        t.lse = reinterpret_cast<float *>(offset_bytes(good.lse, 2));
        expect_run_error(plan.get(), t, wsp, ws_bytes, FMHA_STATUS_MISALIGNED, "tensors.lse");
    }
    SECTION("tensors version and reserved field") {
        fmha_tensors t = good;
        t.version = FMHA_TENSORS_VERSION + 1;  // a version this library does not know
        expect_run_error(plan.get(), t, wsp, ws_bytes, FMHA_STATUS_VERSION_MISMATCH,
                         "tensors.version");
        t = good;
        t.reserved0 = 1;
        expect_run_error(plan.get(), t, wsp, ws_bytes, FMHA_STATUS_INVALID_ARGUMENT,
                         "tensors.reserved0");
    }
    sync_or_fail();
    INFO("a rejected fmha_run must not enqueue anything");
    CHECK(all_prefill(data.download()));
    std::string why;
    CHECK(data.guards_intact(&why));
}

TEST_CASE("without FMHA_FLAG_WRITE_LSE the lse pointer is ignored", "[gpu][api]") {
    FMHA_GPU_TEST_PROLOGUE();
    CaseData data(small_case(2, /*lse=*/false));
    PlanPtr plan = make_plan(data.descriptor());
    size_t ws_bytes = 0;
    REQUIRE(fmha_plan_workspace_size(plan.get(), &ws_bytes) == FMHA_STATUS_SUCCESS);
    DeviceBuffer ws;
    if (ws_bytes > 0) ws = DeviceBuffer((ws_bytes + 3) / 4, 4, kGuard32);
    fmha_tensors t = data.tensors();
    t.lse = reinterpret_cast<float *>(uintptr_t(0x3));  // garbage, must not be touched
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                        fmha_run(plan.get(), &t, ws_bytes ? ws.data() : nullptr, ws_bytes, nullptr));
    sync_or_fail();
    check_whole_run(data, data.compare(data.download()), &ws);
}

TEST_CASE("workspace: too small, NULL, misaligned, or none needed", "[gpu][api][workspace]") {
    FMHA_GPU_TEST_PROLOGUE();
    // Shapes where a split over keys (and so a workspace) is plausible, and not.
    const struct {
        int64_t sq, sk, batch, hq, hkv;
    } shapes[] = {{1, 4097, 1, 8, 1}, {1, 4097, 4, 8, 8}, {17, 1000, 1, 8, 2},
                  {128, 128, 2, 8, 8}, {1000, 1000, 1, 8, 8}};
    uint64_t idx = 0;
    for (const auto &s : shapes) {
        Case c = small_case(100 + idx++);
        c.seqlen_q = s.sq;
        c.seqlen_k = s.sk;
        c.batch = s.batch;
        c.num_q_heads = s.hq;
        c.num_kv_heads = s.hkv;
        c.mask = FMHA_MASK_NONE;
        CaseData data(c);
        PlanPtr plan = make_plan(data.descriptor());
        size_t ws_bytes = 0;
        REQUIRE(fmha_plan_workspace_size(plan.get(), &ws_bytes) == FMHA_STATUS_SUCCESS);
        fmha_plan_info info = plan_info(plan.get());
        INFO(c.name() << " -> " << describe_plan(plan.get()));
        std::printf("workspace: %s -> %zu bytes\n", c.name().c_str(), ws_bytes);
        CHECK(info.workspace_bytes == uint64_t(ws_bytes));
        const fmha_tensors t = data.tensors();
        DeviceBuffer ws;
        if (ws_bytes > 0) {
            ws = DeviceBuffer((ws_bytes + 64 + 3) / 4, 4, kGuard32);
            expect_run_error(plan.get(), t, ws.data(), ws_bytes - 1,
                             FMHA_STATUS_WORKSPACE_TOO_SMALL, "workspace_bytes");
            expect_run_error(plan.get(), t, ws.data(), 0, FMHA_STATUS_WORKSPACE_TOO_SMALL,
                             std::to_string(ws_bytes).c_str());
            expect_run_error(plan.get(), t, nullptr, ws_bytes, FMHA_STATUS_INVALID_ARGUMENT,
                             "workspace");
            expect_run_error(plan.get(), t, offset_bytes(ws.data(), 2), ws_bytes,
                             FMHA_STATUS_MISALIGNED, "workspace");
            sync_or_fail();
            CHECK(all_prefill(data.download()));
            // More than needed is fine.
            FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                                fmha_run(plan.get(), &t, ws.data(), ws_bytes + 64, nullptr));
        } else {
            CHECK(info.workspace_bytes == 0u);
            FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_run(plan.get(), &t, nullptr, 0, nullptr));
        }
        sync_or_fail();
        check_whole_run(data, data.compare(data.download()), &ws);
    }
}

TEST_CASE("streams: legacy default, per-thread default, and ordering", "[gpu][api][stream]") {
    FMHA_GPU_TEST_PROLOGUE();
    CaseData data(small_case(3));
    PlanPtr plan = make_plan(data.descriptor());
    size_t ws_bytes = 0;
    REQUIRE(fmha_plan_workspace_size(plan.get(), &ws_bytes) == FMHA_STATUS_SUCCESS);
    DeviceBuffer ws;
    if (ws_bytes > 0) ws = DeviceBuffer((ws_bytes + 3) / 4, 4, kGuard32);
    void *wsp = ws_bytes ? ws.data() : nullptr;
    const fmha_tensors t = data.tensors();

    // NULL: the legacy default stream.
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_run(plan.get(), &t, wsp, ws_bytes, nullptr));
    sync_or_fail();
    const Outputs first = data.download();
    Comparison cmp = data.compare(first);
    check_whole_run(data, cmp, &ws);
    REQUIRE(cmp.o_ok);
    REQUIRE(cmp.lse_ok);

    const struct {
        const char *name;
        cudaStream_t stream;
    } handles[] = {{"cudaStreamLegacy", cudaStreamLegacy},
                   {"cudaStreamPerThread", cudaStreamPerThread}};
    for (const auto &h : handles) {
        INFO(h.name);
        data.prefill_outputs();
        FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS,
                          fmha_run(plan.get(), &t, wsp, ws_bytes, fmha_stream(h.stream)));
        sync_or_fail();
        CHECK(data.download() == first);
    }

    SECTION("work queued before fmha_run on the same stream runs first") {
        // Poison O asynchronously, then run without waiting: the result must
        // be the complete output, not the poison.
        cudaStream_t s;
        REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
        REQUIRE(cudaMemsetAsync(data.o.data(), 0x7F, data.o.bytes(), s) == cudaSuccess);
        FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS,
                          fmha_run(plan.get(), &t, wsp, ws_bytes, fmha_stream(s)));
        REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
        Outputs got = data.download();
        CHECK(got.lse == first.lse);
        // Compare only the view: the gaps now hold the memset bytes.
        Comparison c2 = data.compare([&] {
            Outputs o = got;
            for (size_t i = 0; i < o.o.size(); ++i)
                if (o.o[i] == 0x7F7F) o.o[i] = kOutputPrefill16;
            return o;
        }());
        CHECK(c2.all_written);
        CHECK(c2.max_err == cmp.max_err);
        cudaStreamDestroy(s);
    }
}

TEST_CASE("destroying a plan right after enqueueing is safe", "[gpu][api]") {
    FMHA_GPU_TEST_PROLOGUE();
    CaseData data(small_case(4));
    fmha_descriptor d = data.descriptor();
    fmha_plan *plan = nullptr;
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_create_plan(&plan, &d));
    size_t ws_bytes = 0;
    fmha_plan_workspace_size(plan, &ws_bytes);
    DeviceBuffer ws;
    if (ws_bytes > 0) ws = DeviceBuffer((ws_bytes + 3) / 4, 4, kGuard32);
    const fmha_tensors t = data.tensors();
    FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS,
                      fmha_run(plan, &t, ws_bytes ? ws.data() : nullptr, ws_bytes, nullptr));
    fmha_destroy_plan(plan);
    sync_or_fail();
    check_whole_run(data, data.compare(data.download()), &ws);
}

TEST_CASE("device selection and the driver", "[gpu][api][device]") {
    FMHA_GPU_TEST_PROLOGUE();
    int32_t drv = 0;
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_driver_version(&drv));
    int rt_drv = 0;
    REQUIRE(cudaDriverGetVersion(&rt_drv) == cudaSuccess);
    CHECK(drv == rt_drv);
    std::printf("device: sm_%d, driver %d, libfmha %s\n", current_device_sm(), drv,
                fmha_version_string());

    CaseData data(small_case(5));
    fmha_descriptor d = data.descriptor();
    FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_check_support(&d, FMHA_SM_CURRENT_DEVICE));
    FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_check_support(&d, current_device_sm()));

    int count = 0;
    REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
    d.device = count + 7;  // no such ordinal
    SECTION("a bad ordinal on a thread without a current context") {
        fmha_status st = FMHA_STATUS_SUCCESS;
        std::string msg;
        std::thread th([&] {
            fmha_plan *p = nullptr;
            st = fmha_create_plan(&p, &d);
            msg = fmha_last_error_message();
            fmha_destroy_plan(p);
        });
        th.join();
        INFO(fmha_status_string(st) << ": " << msg);
        CHECK(st == FMHA_STATUS_NO_DEVICE);
        CHECK(msg.find("device") != std::string::npos);
        CHECK(msg.find(std::to_string(count + 7)) != std::string::npos);
    }
    SECTION("with a current context its device is used and the field ignored") {
        REQUIRE(cudaFree(nullptr) == cudaSuccess);  // the runtime's context is current here
        fmha_plan *p = nullptr;
        FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_create_plan(&p, &d));
        fmha_destroy_plan(p);
    }
}
