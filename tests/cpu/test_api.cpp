// Version, status strings, the last-error machinery, init functions, stride
// helpers, build introspection and argument errors that need no GPU.
#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fmha/fmha.h"
#include "fmha_catch.h"

TEST_CASE("run-time version matches the header", "[cpu][api]") {
    CHECK(fmha_version() == uint32_t(FMHA_VERSION_NUMBER));
    CHECK(FMHA_VERSION_NUMBER ==
          FMHA_VERSION_MAJOR * 10000 + FMHA_VERSION_MINOR * 100 + FMHA_VERSION_PATCH);
    const std::string expected = std::to_string(FMHA_VERSION_MAJOR) + "." +
                                 std::to_string(FMHA_VERSION_MINOR) + "." +
                                 std::to_string(FMHA_VERSION_PATCH);
    REQUIRE(fmha_version_string() != nullptr);
    CHECK(std::string(fmha_version_string()) == expected);
}

TEST_CASE("status strings", "[cpu][api]") {
    const struct {
        fmha_status status;
        int value;
        const char *name;
    } all[] = {
        {FMHA_STATUS_SUCCESS, 0, "FMHA_STATUS_SUCCESS"},
        {FMHA_STATUS_INVALID_ARGUMENT, 1, "FMHA_STATUS_INVALID_ARGUMENT"},
        {FMHA_STATUS_NOT_SUPPORTED, 2, "FMHA_STATUS_NOT_SUPPORTED"},
        {FMHA_STATUS_VERSION_MISMATCH, 3, "FMHA_STATUS_VERSION_MISMATCH"},
        {FMHA_STATUS_NO_DRIVER, 4, "FMHA_STATUS_NO_DRIVER"},
        {FMHA_STATUS_NO_DEVICE, 5, "FMHA_STATUS_NO_DEVICE"},
        {FMHA_STATUS_DRIVER_ERROR, 6, "FMHA_STATUS_DRIVER_ERROR"},
        {FMHA_STATUS_MISALIGNED, 7, "FMHA_STATUS_MISALIGNED"},
        {FMHA_STATUS_WORKSPACE_TOO_SMALL, 8, "FMHA_STATUS_WORKSPACE_TOO_SMALL"},
        {FMHA_STATUS_OUT_OF_MEMORY, 9, "FMHA_STATUS_OUT_OF_MEMORY"},
        {FMHA_STATUS_NO_KERNEL_IMAGE, 10, "FMHA_STATUS_NO_KERNEL_IMAGE"},
        {FMHA_STATUS_CONTEXT_MISMATCH, 11, "FMHA_STATUS_CONTEXT_MISMATCH"},
        {FMHA_STATUS_INTERNAL_ERROR, 12, "FMHA_STATUS_INTERNAL_ERROR"},
    };
    for (const auto &s : all) {
        INFO(s.name);
        CHECK(int(s.status) == s.value);  // the ABI fixes the numbers
        REQUIRE(fmha_status_string(s.status) != nullptr);
        CHECK(std::string(fmha_status_string(s.status)) == s.name);
    }
    for (int unknown : {13, 14, 99, -1, 0x7FFFFFFF}) {
        INFO("value " << unknown);
        const char *name = fmha_status_string(static_cast<fmha_status>(unknown));
        REQUIRE(name != nullptr);
        CHECK(std::string(name) == "FMHA_STATUS_UNKNOWN");
    }
}

TEST_CASE("enum values are fixed", "[cpu][api]") {
    CHECK(FMHA_DTYPE_BF16 == 1);
    CHECK(FMHA_DTYPE_FP16 == 2);
    CHECK(FMHA_MASK_NONE == 0);
    CHECK(FMHA_MASK_CAUSAL_TOP_LEFT == 1);
    CHECK(FMHA_MASK_CAUSAL_BOTTOM_RIGHT == 2);
    CHECK(FMHA_KERNEL_AUTO == 0);
    CHECK(FMHA_KERNEL_PORTABLE == 1);
    CHECK(FMHA_KERNEL_HOPPER == 2);
    CHECK(FMHA_FLAG_WRITE_LSE == 1u);
    CHECK(FMHA_SM_ANY == 0);
    CHECK(FMHA_SM_CURRENT_DEVICE == -1);
}

TEST_CASE("last error: message, status, clearing, thread-local", "[cpu][api]") {
    fmha_clear_last_error();
    REQUIRE(fmha_last_error_message() != nullptr);
    CHECK(std::string(fmha_last_error_message()).empty());
    CHECK(fmha_last_error_status() == FMHA_STATUS_SUCCESS);

    fmha_descriptor d;
    REQUIRE(fmha_descriptor_init(&d, FMHA_DESCRIPTOR_VERSION) == FMHA_STATUS_SUCCESS);
    // batch 0 is the first problem the validator meets.
    CHECK(fmha_check_support(&d, FMHA_SM_ANY) == FMHA_STATUS_INVALID_ARGUMENT);
    const std::string msg = fmha_last_error_message();
    CHECK(msg.find("batch") != std::string::npos);
    CHECK(fmha_last_error_status() == FMHA_STATUS_INVALID_ARGUMENT);

    SECTION("another thread has its own (empty) last error") {
        std::string other_msg = "unset";
        fmha_status other_status = FMHA_STATUS_INTERNAL_ERROR;
        std::thread t([&] {
            other_msg = fmha_last_error_message();
            other_status = fmha_last_error_status();
        });
        t.join();
        CHECK(other_msg.empty());
        CHECK(other_status == FMHA_STATUS_SUCCESS);
        CHECK(std::string(fmha_last_error_message()) == msg);  // ours is untouched
    }
    SECTION("fmha_clear_last_error") {
        fmha_clear_last_error();
        CHECK(std::string(fmha_last_error_message()).empty());
        CHECK(fmha_last_error_status() == FMHA_STATUS_SUCCESS);
    }
    SECTION("a later successful call clears it") {
        fmha_strides s;
        CHECK(fmha_strides_bshd(&s, 1, 1, 64) == FMHA_STATUS_SUCCESS);
        CHECK(std::string(fmha_last_error_message()).empty());
        CHECK(fmha_last_error_status() == FMHA_STATUS_SUCCESS);
    }
}

TEST_CASE("init functions fill documented defaults", "[cpu][api]") {
    SECTION("descriptor") {
        fmha_descriptor d;
        std::memset(&d, 0xAB, sizeof d);
        REQUIRE(fmha_descriptor_init(&d, FMHA_DESCRIPTOR_VERSION) == FMHA_STATUS_SUCCESS);
        CHECK(d.version == uint32_t(FMHA_DESCRIPTOR_VERSION));
        CHECK(d.dtype == FMHA_DTYPE_BF16);
        CHECK(d.batch == 0);
        CHECK(d.num_q_heads == 0);
        CHECK(d.num_kv_heads == 0);
        CHECK(d.seqlen_q == 0);
        CHECK(d.seqlen_k == 0);
        CHECK(d.head_dim == 0);
        CHECK(d.head_dim_v == 0);
        for (const fmha_strides *s : {&d.q_strides, &d.k_strides, &d.v_strides, &d.o_strides}) {
            CHECK(s->batch == 0);
            CHECK(s->seq == 0);
            CHECK(s->head == 0);
            CHECK(s->dim == 1);
        }
        CHECK(d.softmax_scale == 0.0f);
        CHECK(d.mask == FMHA_MASK_NONE);
        CHECK(d.flags == 0u);
        CHECK(d.kernel == FMHA_KERNEL_AUTO);
        CHECK(d.device == 0);
        CHECK(d.reserved0 == 0);
    }
    SECTION("tensors") {
        fmha_tensors t;
        std::memset(&t, 0xAB, sizeof t);
        REQUIRE(fmha_tensors_init(&t, FMHA_TENSORS_VERSION) == FMHA_STATUS_SUCCESS);
        CHECK(t.version == uint32_t(FMHA_TENSORS_VERSION));
        CHECK(t.reserved0 == 0u);
        CHECK(t.q == nullptr);
        CHECK(t.k == nullptr);
        CHECK(t.v == nullptr);
        CHECK(t.o == nullptr);
        CHECK(t.lse == nullptr);
    }
    SECTION("plan info") {
        fmha_plan_info info;
        std::memset(&info, 0xAB, sizeof info);
        REQUIRE(fmha_plan_info_init(&info, FMHA_PLAN_INFO_VERSION) == FMHA_STATUS_SUCCESS);
        CHECK(info.version == uint32_t(FMHA_PLAN_INFO_VERSION));
        CHECK(info.kernel_name == nullptr);
        CHECK(info.kernel_family == 0);
        CHECK(info.workspace_bytes == 0u);
        CHECK(info.shared_memory_bytes == 0);
    }
}

TEST_CASE("stride helpers", "[cpu][api]") {
    fmha_strides s;
    REQUIRE(fmha_strides_bshd(&s, 17, 8, 128) == FMHA_STATUS_SUCCESS);
    CHECK(s.batch == 17 * 8 * 128);
    CHECK(s.seq == 8 * 128);
    CHECK(s.head == 128);
    CHECK(s.dim == 1);
    REQUIRE(fmha_strides_bhsd(&s, 17, 8, 128) == FMHA_STATUS_SUCCESS);
    CHECK(s.batch == 8 * 17 * 128);
    CHECK(s.seq == 128);
    CHECK(s.head == 17 * 128);
    CHECK(s.dim == 1);
    // 64-bit: a tensor with more than 2^31 elements per batch.
    REQUIRE(fmha_strides_bshd(&s, 65536, 256, 256) == FMHA_STATUS_SUCCESS);
    CHECK(s.batch == int64_t(65536) * 256 * 256);
    REQUIRE(fmha_strides_bhsd(&s, 65536, 256, 256) == FMHA_STATUS_SUCCESS);
    CHECK(s.head == int64_t(65536) * 256);

    FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_strides_bshd(nullptr, 1, 1, 64));
    FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_strides_bhsd(nullptr, 1, 1, 64));
    for (auto bad : {std::vector<int64_t>{0, 8, 64}, std::vector<int64_t>{16, 0, 64},
                     std::vector<int64_t>{16, 8, 0}, std::vector<int64_t>{-1, 8, 64}}) {
        INFO("seqlen " << bad[0] << " heads " << bad[1] << " head_dim " << bad[2]);
        FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT,
                          fmha_strides_bshd(&s, bad[0], bad[1], bad[2]));
        FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT,
                          fmha_strides_bhsd(&s, bad[0], bad[1], bad[2]));
    }
}

// The batch stride is seqlen x num_heads x head_dim: a product past 64 bits
// is refused, never wrapped into a small or negative stride.
TEST_CASE("stride helpers refuse a batch stride past 64 bits", "[cpu][api]") {
    const int64_t big = int64_t(1) << 40;
    for (auto dims : {std::vector<int64_t>{INT64_MAX / 2, 4, 128}, std::vector<int64_t>{big, big, 64},
                      std::vector<int64_t>{1 << 20, int64_t(1) << 40, 1 << 20},
                      std::vector<int64_t>{3, 5, INT64_MAX}}) {
        INFO("seqlen " << dims[0] << " heads " << dims[1] << " head_dim " << dims[2]);
        for (auto helper : {fmha_strides_bshd, fmha_strides_bhsd}) {
            fmha_strides s = {-7, -7, -7, -7};
            FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, helper(&s, dims[0], dims[1], dims[2]));
            CHECK(std::string(fmha_last_error_message()).find(std::to_string(dims[0])) !=
                  std::string::npos);
            CHECK(s.batch == -7);  // untouched on failure
            CHECK(s.seq == -7);
        }
    }
    // The largest product that fits is still exact.
    fmha_strides s;
    REQUIRE(fmha_strides_bhsd(&s, int64_t(1) << 31, 1 << 16, 1 << 15) == FMHA_STATUS_SUCCESS);
    CHECK(s.batch == int64_t(1) << 62);
    CHECK(s.head == int64_t(1) << 46);
}

namespace {

// FMHA_TEST_BUILD_ARCHS is FMHA_CUDA_ARCHS of the build, comma-separated ("80,90a,...").
std::set<int32_t> build_archs() {
    std::set<int32_t> out;
    std::stringstream ss(FMHA_TEST_BUILD_ARCHS);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.empty()) continue;
        out.insert(std::stoi(item));  // "90a" -> 90
    }
    return out;
}

}  // namespace

TEST_CASE("embedded architectures", "[cpu][api]") {
    const int32_t n = fmha_embedded_archs(nullptr, 0);
    REQUIRE(n >= 1);
    std::vector<int32_t> archs(size_t(n) + 2, -7);
    CHECK(fmha_embedded_archs(archs.data(), n) == n);
    CHECK(archs[size_t(n)] == -7);  // nothing past capacity
    archs.resize(size_t(n));
    for (size_t i = 1; i < archs.size(); ++i) {
        INFO("archs[" << i - 1 << "] = " << archs[i - 1] << ", archs[" << i << "] = " << archs[i]);
        CHECK(archs[i - 1] < archs[i]);  // strictly ascending
    }
    INFO("FMHA_CUDA_ARCHS of this build: " << FMHA_TEST_BUILD_ARCHS);
    const std::set<int32_t> expected = build_archs();
    CHECK(std::set<int32_t>(archs.begin(), archs.end()) == expected);
    if (expected.count(80)) CHECK(std::find(archs.begin(), archs.end(), 80) != archs.end());

    SECTION("a short buffer gets the first entries and the total count") {
        int32_t one[2] = {-7, -7};
        CHECK(fmha_embedded_archs(one, 1) == n);
        CHECK(one[0] == archs[0]);
        CHECK(one[1] == -7);
    }
    SECTION("embedded PTX arch matches FMHA_PTX_ARCH") {
        const std::string ptx = FMHA_TEST_BUILD_PTX_ARCH;
        CHECK(fmha_embedded_ptx_arch() == (ptx.empty() ? 0 : std::stoi(ptx)));
    }
}

TEST_CASE("plan functions reject NULL without a GPU", "[cpu][api]") {
    fmha_tensors t;
    REQUIRE(fmha_tensors_init(&t, FMHA_TENSORS_VERSION) == FMHA_STATUS_SUCCESS);
    FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_run(nullptr, &t, nullptr, 0, nullptr));
    CHECK(std::string(fmha_last_error_message()).find("plan") != std::string::npos);
    FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT,
                      fmha_run(nullptr, nullptr, nullptr, 0, nullptr));
    size_t bytes = 123;
    FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_plan_workspace_size(nullptr, &bytes));
    CHECK(std::string(fmha_last_error_message()).find("plan") != std::string::npos);
    fmha_plan_info info;
    REQUIRE(fmha_plan_info_init(&info, FMHA_PLAN_INFO_VERSION) == FMHA_STATUS_SUCCESS);
    FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_plan_get_info(nullptr, &info));
    FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_driver_version(nullptr));
    fmha_destroy_plan(nullptr);  // documented no-op
}
