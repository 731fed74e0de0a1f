// Every invalid descriptor field, checked through fmha_check_support(desc,
// FMHA_SM_ANY) (and fmha_create_plan, which validates before touching the
// driver), so all of it runs without a GPU. Each rejection must name the
// field and the value in fmha_last_error_message().
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "fmha/fmha.h"
#include "fmha_catch.h"
#include "validation_checks.h"
#include "fmha_test/archs.h"

using namespace validation_checks;

namespace {

// A valid GQA problem: bf16, batch 2, 8 q heads over 2 kv heads, 128 x 256, hd 128.
fmha_descriptor valid_desc() { return gqa_desc(2, 128, 256); }

// Re-derives packed BSHD strides after a shape change, so only the field
// under test is wrong.
void restride(fmha_descriptor &d) {
    if (d.seqlen_q > 0 && d.num_q_heads > 0 && d.head_dim > 0) {
        fmha_strides_bshd(&d.q_strides, d.seqlen_q, d.num_q_heads, d.head_dim);
        d.o_strides = d.q_strides;
    }
    if (d.seqlen_k > 0 && d.num_kv_heads > 0 && d.head_dim > 0) {
        fmha_strides_bshd(&d.k_strides, d.seqlen_k, d.num_kv_heads, d.head_dim);
        d.v_strides = d.k_strides;
    }
}

}  // namespace

TEST_CASE("valid descriptors are accepted", "[cpu][validation]") {
    ForceKernelEnv env;
    fmha_descriptor d = valid_desc();
    expect_valid(d);
    SECTION("MHA, MQA and every supported head dim, both dtypes, every mask") {
        for (int64_t hd : {64, 96, 128, 256})
            for (int dt : {FMHA_DTYPE_BF16, FMHA_DTYPE_FP16})
                for (int mask : {FMHA_MASK_NONE, FMHA_MASK_CAUSAL_TOP_LEFT,
                                 FMHA_MASK_CAUSAL_BOTTOM_RIGHT})
                    for (int64_t hkv : {8, 1}) {
                        INFO("hd " << hd << " dtype " << dt << " mask " << mask << " hkv " << hkv);
                        fmha_descriptor e = valid_desc();
                        e.head_dim = hd;
                        e.dtype = dt;
                        e.mask = mask;
                        e.num_kv_heads = hkv;
                        restride(e);
                        expect_valid(e);
                    }
    }
    SECTION("head_dim_v equal to head_dim") {
        d.head_dim_v = d.head_dim;
        expect_valid(d);
    }
    SECTION("explicit softmax scale, LSE flag, every kernel family") {
        d.softmax_scale = 0.125f;
        d.flags = FMHA_FLAG_WRITE_LSE;
        for (int k : {FMHA_KERNEL_AUTO, FMHA_KERNEL_PORTABLE, FMHA_KERNEL_HOPPER}) {
            d.kernel = k;
            expect_valid(d);  // the family only matters once a device is known
        }
    }
    SECTION("BHSD strides and a sliced view") {
        fmha_strides_bhsd(&d.q_strides, d.seqlen_q, d.num_q_heads, d.head_dim);
        fmha_strides_bhsd(&d.k_strides, d.seqlen_k, d.num_kv_heads, d.head_dim);
        d.v_strides = d.k_strides;
        d.o_strides = d.q_strides;
        expect_valid(d);
        fmha_descriptor s = valid_desc();
        s.q_strides = {(128 + 3) * 10 * 136, 10 * 136, 136, 1};
        s.o_strides = s.q_strides;
        expect_valid(s);
    }
    SECTION("broadcast inputs (stride 0)") {
        d.k_strides.batch = 0;
        d.v_strides.batch = 0;
        d.q_strides.batch = 0;
        expect_valid(d);
    }
    SECTION("batch 1 output may have batch stride 0") {
        d.batch = 1;
        d.o_strides.batch = 0;
        expect_valid(d);
    }
    SECTION("seqlen 1 everywhere") {
        d.seqlen_q = d.seqlen_k = 1;
        restride(d);
        expect_valid(d);
    }
}

TEST_CASE("null descriptor and null plan out-pointer", "[cpu][validation]") {
    FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_check_support(nullptr, FMHA_SM_ANY));
    CHECK(std::string(fmha_last_error_message()).find("descriptor") != std::string::npos);
    fmha_plan *plan = reinterpret_cast<fmha_plan *>(0x10);
    FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_create_plan(&plan, nullptr));
    CHECK(plan == nullptr);
    CHECK(std::string(fmha_last_error_message()).find("descriptor") != std::string::npos);
    fmha_descriptor d = valid_desc();
    FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_create_plan(nullptr, &d));
    CHECK(std::string(fmha_last_error_message()).find("plan") != std::string::npos);
}

TEST_CASE("struct versions", "[cpu][validation]") {
    SECTION("descriptor with an unknown version") {
        for (uint32_t version : {0u, 4u, 99u, 0xFFFFFFFFu}) {
            fmha_descriptor d = valid_desc();
            d.version = version;
            INFO("version " << version);
            expect_rejected(d, FMHA_STATUS_VERSION_MISMATCH,
                            {"version", std::to_string(version).c_str()});
        }
    }
    SECTION("init functions reject unknown versions") {
        fmha_descriptor d;
        fmha_tensors t;
        fmha_plan_info info;
        for (uint32_t version : {0u, 4u, 99u}) {
            INFO("version " << version);
            FMHA_CHECK_STATUS(FMHA_STATUS_VERSION_MISMATCH, fmha_descriptor_init(&d, version));
            CHECK(std::string(fmha_last_error_message()).find(std::to_string(version)) !=
                  std::string::npos);
            FMHA_CHECK_STATUS(FMHA_STATUS_VERSION_MISMATCH, fmha_tensors_init(&t, version));
            CHECK(std::string(fmha_last_error_message()).find("tensors") != std::string::npos);
            FMHA_CHECK_STATUS(FMHA_STATUS_VERSION_MISMATCH, fmha_plan_info_init(&info, version));
            CHECK(std::string(fmha_last_error_message()).find("plan_info") != std::string::npos);
        }
    }
    SECTION("init functions reject NULL") {
        FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT,
                          fmha_descriptor_init(nullptr, FMHA_DESCRIPTOR_VERSION));
        FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT,
                          fmha_tensors_init(nullptr, FMHA_TENSORS_VERSION));
        FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT,
                          fmha_plan_info_init(nullptr, FMHA_PLAN_INFO_VERSION));
    }
}

TEST_CASE("sizes must be positive", "[cpu][validation]") {
    struct Field {
        const char *name;
        int64_t fmha_descriptor::*member;
    } fields[] = {{"batch", &fmha_descriptor::batch},
                  {"num_q_heads", &fmha_descriptor::num_q_heads},
                  {"num_kv_heads", &fmha_descriptor::num_kv_heads},
                  {"seqlen_q", &fmha_descriptor::seqlen_q},
                  {"seqlen_k", &fmha_descriptor::seqlen_k},
                  {"head_dim", &fmha_descriptor::head_dim}};
    for (const Field &f : fields)
        for (int64_t value : {int64_t(0), int64_t(-1), int64_t(-128),
                              std::numeric_limits<int64_t>::min()}) {
            fmha_descriptor d = valid_desc();
            d.*f.member = value;
            const std::string field = std::string("descriptor.") + f.name;
            const std::string shown = std::to_string(value);
            INFO(field << " = " << value);
            expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {field.c_str(), shown.c_str()});
        }
}

TEST_CASE("q heads must be a multiple of kv heads", "[cpu][validation]") {
    for (auto hq_hkv : {std::make_pair(8, 3), std::make_pair(8, 16), std::make_pair(7, 2)}) {
        fmha_descriptor d = valid_desc();
        d.num_q_heads = hq_hkv.first;
        d.num_kv_heads = hq_hkv.second;
        restride(d);
        INFO("Hq " << hq_hkv.first << " Hkv " << hq_hkv.second);
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT,
                        {"num_q_heads", std::to_string(hq_hkv.first).c_str(), "num_kv_heads"});
    }
}

TEST_CASE("unsupported head dims", "[cpu][validation]") {
    for (int64_t hd : {8, 16, 32, 48, 72, 80, 100, 160, 192, 200, 576, 1024}) {
        fmha_descriptor d = valid_desc();
        d.head_dim = hd;
        restride(d);
        INFO("head_dim " << hd);
        expect_rejected(d, FMHA_STATUS_NOT_SUPPORTED, {"head_dim", std::to_string(hd).c_str()});
    }
}

TEST_CASE("head_dim_v must equal head_dim", "[cpu][validation]") {
    fmha_descriptor d = valid_desc();
    d.head_dim_v = 64;
    expect_rejected(d, FMHA_STATUS_NOT_SUPPORTED, {"head_dim_v", "64"});
    d.head_dim_v = 256;
    expect_rejected(d, FMHA_STATUS_NOT_SUPPORTED, {"head_dim_v", "256"});
    d.head_dim_v = -1;
    expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"head_dim_v", "-1"});
}

TEST_CASE("too large sizes", "[cpu][validation]") {
    fmha_descriptor d = valid_desc();
    d.seqlen_q = int64_t(1) << 31;
    expect_rejected(d, FMHA_STATUS_NOT_SUPPORTED, {"seqlen_q", "2147483648"});
    d = valid_desc();
    d.seqlen_k = int64_t(1) << 40;
    expect_rejected(d, FMHA_STATUS_NOT_SUPPORTED, {"seqlen_k", std::to_string(int64_t(1) << 40).c_str()});
    d = valid_desc();
    d.num_q_heads = 65536;
    d.num_kv_heads = 1;
    expect_rejected(d, FMHA_STATUS_NOT_SUPPORTED, {"num_q_heads", "65536"});
}

namespace {

struct TensorStrides {
    const char *name;
    fmha_strides fmha_descriptor::*member;
};
const TensorStrides kTensors[] = {{"q_strides", &fmha_descriptor::q_strides},
                                  {"k_strides", &fmha_descriptor::k_strides},
                                  {"v_strides", &fmha_descriptor::v_strides},
                                  {"o_strides", &fmha_descriptor::o_strides}};
struct StrideField {
    const char *name;
    int64_t fmha_strides::*member;
};
const StrideField kFields[] = {{"batch", &fmha_strides::batch},
                               {"seq", &fmha_strides::seq},
                               {"head", &fmha_strides::head}};

}  // namespace

TEST_CASE("the last dimension must be contiguous", "[cpu][validation]") {
    for (const TensorStrides &t : kTensors)
        for (int64_t dim : {2, 0, -1, 8}) {
            fmha_descriptor d = valid_desc();
            (d.*t.member).dim = dim;
            const std::string field = std::string(t.name) + ".dim";
            INFO(field << " = " << dim);
            expect_rejected(d, FMHA_STATUS_NOT_SUPPORTED,
                            {field.c_str(), std::to_string(dim).c_str()});
        }
}

TEST_CASE("strides must be multiples of 8 elements", "[cpu][validation]") {
    for (const TensorStrides &t : kTensors)
        for (const StrideField &f : kFields)
            for (int64_t delta : {1, 4, 7}) {
                fmha_descriptor d = valid_desc();
                int64_t &s = (d.*t.member).*f.member;
                s += delta;
                const std::string field = std::string(t.name) + "." + f.name;
                const std::string shown = std::to_string(s);
                INFO(field << " = " << s);
                expect_rejected(d, FMHA_STATUS_MISALIGNED, {field.c_str(), shown.c_str()});
            }
}

TEST_CASE("the stride of a size-1 dimension is not checked", "[cpu][validation]") {
    fmha_descriptor d = valid_desc();
    d.batch = 1;
    d.seqlen_q = 1;
    d.q_strides.batch = 3;  // never followed: any value is accepted
    d.q_strides.seq = -5;
    d.o_strides.batch = 7;
    d.o_strides.seq = 1;
    d.k_strides.batch = -1;
    CHECK(fmha_check_support(&d, FMHA_SM_ANY) == FMHA_STATUS_SUCCESS);
    INFO(fmha_last_error_message());
    d.seqlen_q = 2;  // now q_strides.seq is followed and must be valid
    CHECK(fmha_check_support(&d, FMHA_SM_ANY) == FMHA_STATUS_NOT_SUPPORTED);
    CHECK(std::string(fmha_last_error_message()).find("q_strides.seq") != std::string::npos);
}

TEST_CASE("negative strides are rejected", "[cpu][validation]") {
    for (const TensorStrides &t : kTensors)
        for (const StrideField &f : kFields) {
            fmha_descriptor d = valid_desc();
            int64_t &s = (d.*t.member).*f.member;
            s = -s;
            const std::string field = std::string(t.name) + "." + f.name;
            const std::string shown = std::to_string(s);
            INFO(field << " = " << s);
            expect_rejected(d, FMHA_STATUS_NOT_SUPPORTED,
                            {field.c_str(), shown.c_str(), "negative"});
        }
}

TEST_CASE("output strides must not overlap", "[cpu][validation]") {
    SECTION("heads closer than head_dim") {
        fmha_descriptor d = valid_desc();
        d.o_strides.head = 64;
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"o_strides.head", "64", "overlap"});
    }
    SECTION("rows on top of each other") {
        fmha_descriptor d = valid_desc();
        d.o_strides.seq = 8;
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"o_strides.seq", "8", "overlap"});
    }
    SECTION("broadcast output (stride 0) with batch 2") {
        fmha_descriptor d = valid_desc();
        d.o_strides.batch = 0;
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"o_strides.batch", "0", "overlap"});
    }
    SECTION("batch stride smaller than one batch") {
        fmha_descriptor d = valid_desc();
        d.o_strides.batch = d.o_strides.seq * (d.seqlen_q - 1);
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"o_strides.batch", "overlap"});
    }
    SECTION("every stride equal") {
        fmha_descriptor d = valid_desc();
        d.o_strides = {128, 128, 128, 1};
        fmha_status st = fmha_check_support(&d, FMHA_SM_ANY);
        INFO(fmha_last_error_message());
        CHECK(st == FMHA_STATUS_INVALID_ARGUMENT);
        CHECK(std::string(fmha_last_error_message()).find("o_strides") != std::string::npos);
    }
}

// Kernels, tensor maps and the overlap check multiply strides by extents in
// 64 bits: a tensor reaching past 2^60 elements from its base is refused,
// where its products would once wrap (and an overlapping output pass).
TEST_CASE("strides reaching past 2^60 elements are rejected", "[cpu][validation]") {
    for (const TensorStrides &t : kTensors)
        for (const StrideField &f : kFields) {
            fmha_descriptor d = valid_desc();
            int64_t &s = (d.*t.member).*f.member;
            s = int64_t(1) << 61;  // x (extent - 1) >= 1: past 2^60
            const std::string field = std::string(t.name) + "." + f.name;
            const std::string shown = std::to_string(s);
            INFO(field << " = " << s);
            expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {field.c_str(), shown.c_str(), "2^60"});
        }
    SECTION("output rows that overlap once their span wraps 64 bits") {
        fmha_descriptor d = valid_desc();       // batch 2
        d.o_strides.seq = int64_t(1) << 58;     // x 128 rows = 2^65: wraps to 0
        d.o_strides.batch = d.o_strides.seq + 8;  // row 1 of batch 0 overlaps batch 1
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"o_strides.seq", "2^60"});
    }
    SECTION("far but within 2^60 elements is valid") {
        fmha_descriptor d = valid_desc();
        d.q_strides.batch = int64_t(1) << 59;  // one batch step (batch 2)
        d.o_strides.batch = int64_t(1) << 59;
        d.k_strides.seq = int64_t(1) << 51;    // 255 key steps, below 2^59
        expect_valid(d);
    }
}

TEST_CASE("bad dtype", "[cpu][validation]") {
    for (int32_t dt : {0, 3, -1, 100}) {
        fmha_descriptor d = valid_desc();
        d.dtype = dt;
        INFO("dtype " << dt);
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"dtype", std::to_string(dt).c_str()});
    }
}

TEST_CASE("bad mask", "[cpu][validation]") {
    for (int32_t m : {3, -1, 42}) {
        fmha_descriptor d = valid_desc();
        d.mask = m;
        INFO("mask " << m);
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"mask", std::to_string(m).c_str()});
    }
}

TEST_CASE("unknown flag bits", "[cpu][validation]") {
    const uint32_t known = FMHA_FLAG_WRITE_LSE | FMHA_FLAG_SINKS | FMHA_FLAG_VARLEN_Q |
                           FMHA_FLAG_VARLEN_K | FMHA_FLAG_SEQUSED_K | FMHA_FLAG_PAGED_KV;
    for (uint32_t f : {0x40u, 0x41u, 0x80000000u}) {
        fmha_descriptor d = valid_desc();
        d.flags = f;
        char hex[16];
        std::snprintf(hex, sizeof hex, "0x%x", f & ~known);
        INFO("flags " << f);
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"flags", hex});
    }
}

TEST_CASE("a version-1 descriptor (the shorter struct) still works", "[cpu][validation]") {
    // A caller built against the version-1 header passes 216 bytes: the
    // library must neither write nor read past them.
    const size_t v1_size = offsetof(fmha_descriptor, window_left);
    alignas(fmha_descriptor) unsigned char buf[sizeof(fmha_descriptor)];
    std::memset(buf, 0xAB, sizeof buf);
    auto *d = reinterpret_cast<fmha_descriptor *>(buf);
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_descriptor_init(d, 1));
    for (size_t i = v1_size; i < sizeof buf; ++i) CHECK(buf[i] == 0xAB);
    const fmha_descriptor full = valid_desc();
    std::memcpy(buf + sizeof(uint32_t), reinterpret_cast<const unsigned char *>(&full) + sizeof(uint32_t),
                v1_size - sizeof(uint32_t));
    // The bytes past version 1 are garbage (0xAB) and must be ignored.
    FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_check_support(d, FMHA_SM_ANY));
    d->flags = FMHA_FLAG_SINKS;  // a version-2 flag in a version-1 descriptor
    expect_rejected(*d, FMHA_STATUS_INVALID_ARGUMENT, {"flags", "version 1"});
}

static bool build_has_sm90_image() {
    int32_t archs[16];
    const int32_t n = fmha_embedded_archs(archs, 16);
    for (int32_t i = 0; i < n && i < 16; ++i)
        if (archs[i] == 90) return true;
    return false;
}

TEST_CASE("windows, softcap and sinks", "[cpu][validation]") {
    SECTION("defaults are off") {
        fmha_descriptor d = valid_desc();
        CHECK(d.window_left == -1);
        CHECK(d.window_right == -1);
        CHECK(d.softcap == 0.0f);
    }
    SECTION("window sizes below -1 are rejected") {
        for (int32_t w : {-2, -100}) {
            fmha_descriptor d = valid_desc();
            d.window_left = w;
            expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"window_left", std::to_string(w).c_str()});
            d = valid_desc();
            d.window_right = w;
            expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"window_right", std::to_string(w).c_str()});
        }
    }
    SECTION("softcap must be finite and >= 0") {
        for (float c : {-1.0f, std::numeric_limits<float>::infinity(), std::nanf("")}) {
            fmha_descriptor d = valid_desc();
            d.softcap = c;
            expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"softcap"});
        }
    }
    SECTION("valid combinations pass, on the Hopper kernel too") {
        fmha_descriptor d = valid_desc();
        d.window_left = 100;
        d.window_right = 0;
        d.softcap = 30.0f;
        d.flags = FMHA_FLAG_SINKS | FMHA_FLAG_WRITE_LSE;
        FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_check_support(&d, FMHA_SM_ANY));
        FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_check_support(&d, 90));
        d.kernel = FMHA_KERNEL_HOPPER;
        if (build_has_sm90_image()) {
            FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_check_support(&d, 90));
        } else {  // a build without sm_90a cubins says so first
            FMHA_CHECK_STATUS(FMHA_STATUS_NO_KERNEL_IMAGE, fmha_check_support(&d, 90));
        }
    }
    SECTION("reserved1 must be 0") {
        fmha_descriptor d = valid_desc();
        d.reserved1 = 3;
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"reserved1", "3"});
    }
}

TEST_CASE("bad kernel family", "[cpu][validation]") {
    for (int32_t k : {4, -1, 7}) {
        fmha_descriptor d = valid_desc();
        d.kernel = k;
        INFO("kernel " << k);
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"kernel", std::to_string(k).c_str()});
    }
}

TEST_CASE("negative device", "[cpu][validation]") {
    for (int32_t dev : {-1, -100}) {
        fmha_descriptor d = valid_desc();
        d.device = dev;
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"device", std::to_string(dev).c_str()});
    }
}

TEST_CASE("reserved0 must be 0", "[cpu][validation]") {
    for (int32_t r : {1, -1}) {
        fmha_descriptor d = valid_desc();
        d.reserved0 = r;
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"reserved0", std::to_string(r).c_str()});
    }
}

TEST_CASE("softmax_scale must be finite and non-negative", "[cpu][validation]") {
    struct {
        float value;
        const char *shown;
    } bad[] = {{-1.0f, "-1"},
               {-0.125f, "-0.125"},
               {std::numeric_limits<float>::quiet_NaN(), "nan"},
               {std::numeric_limits<float>::infinity(), "inf"},
               {-std::numeric_limits<float>::infinity(), "-inf"}};
    for (const auto &b : bad) {
        fmha_descriptor d = valid_desc();
        d.softmax_scale = b.value;
        INFO("softmax_scale " << b.shown);
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"softmax_scale", b.shown});
    }
}

TEST_CASE("FMHA_FORCE_KERNEL environment variable", "[cpu][validation]") {
    ForceKernelEnv env;
    fmha_descriptor d = valid_desc();
    setenv("FMHA_FORCE_KERNEL", "bogus", 1);
    expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"FMHA_FORCE_KERNEL", "bogus"});
    setenv("FMHA_FORCE_KERNEL", "hopper", 1);
    expect_valid(d);
    FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, fmha_check_support(&d, 80));
    d.kernel = FMHA_KERNEL_PORTABLE;  // an explicit family wins over the variable
    setenv("FMHA_FORCE_KERNEL", "bogus", 1);
    expect_valid(d);
}

namespace {

using fmha_test::embedded_archs;
using fmha_test::embeds;

// What find_image does, seen from outside: a cubin of the same major arch
// and not newer, or PTX not newer. (Arch-specific cubins such as sm_90a run
// only on their own arch; this is only used where that makes no difference.)
bool some_image_covers(int sm) {
    for (int32_t a : embedded_archs())
        if (a / 10 == sm / 10 && a <= sm) return true;
    const int32_t ptx = fmha_embedded_ptx_arch();
    return ptx != 0 && ptx <= sm;
}

}  // namespace

TEST_CASE("device-dependent support answers", "[cpu][validation][device]") {
    ForceKernelEnv env;
    fmha_descriptor d = valid_desc();
    SECTION("pre-Ampere devices are not supported") {
        for (int sm : {75, 70, 61}) {
            INFO("sm " << sm);
            FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, fmha_check_support(&d, sm));
            CHECK(std::string(fmha_last_error_message()).find(std::to_string(sm)) !=
                  std::string::npos);
        }
    }
    SECTION("the Hopper kernel needs sm_90") {
        d.kernel = FMHA_KERNEL_HOPPER;
        for (int sm : {80, 86, 89, 100, 120}) {
            INFO("sm " << sm);
            FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, fmha_check_support(&d, sm));
            std::string msg = fmha_last_error_message();
            CHECK(msg.find("HOPPER") != std::string::npos);
            CHECK(msg.find(std::to_string(sm)) != std::string::npos);
        }
        if (embeds(90)) {
            for (int64_t hd : {64, 128}) {
                fmha_descriptor h = valid_desc();
                h.kernel = FMHA_KERNEL_HOPPER;
                h.head_dim = hd;
                restride(h);
                INFO("hd " << hd);
                FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_check_support(&h, 90));
            }
        } else {
            FMHA_CHECK_STATUS(FMHA_STATUS_NO_KERNEL_IMAGE, fmha_check_support(&d, 90));
        }
    }
    SECTION("supported archs, as far as this build embeds images for them") {
        for (int sm : {80, 86, 89, 90, 100, 120}) {
            INFO("sm " << sm << ", embedded PTX arch " << fmha_embedded_ptx_arch());
            for (int k : {FMHA_KERNEL_AUTO, FMHA_KERNEL_PORTABLE}) {
                d.kernel = k;
                INFO("kernel family " << k);
                const bool certain = embeds(sm) || (sm == 86 && embeds(80)) ||
                                     (sm == 89 && embeds(80)) ||
                                     (fmha_embedded_ptx_arch() != 0 &&
                                      fmha_embedded_ptx_arch() <= sm);
                if (certain)
                    FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_check_support(&d, sm));
                else if (!some_image_covers(sm))
                    FMHA_CHECK_STATUS(FMHA_STATUS_NO_KERNEL_IMAGE, fmha_check_support(&d, sm));
            }
        }
    }
    SECTION("an sm80 build covers sm_86 with its sm_80 cubin") {
        if (!embeds(80)) FMHA_SKIP("this build embeds no sm_80 image");
        for (int64_t hd : {64, 96, 128, 256}) {
            d.head_dim = hd;
            restride(d);
            INFO("hd " << hd);
            FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_check_support(&d, 86));
            FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_check_support(&d, 80));
        }
    }
    SECTION("a negative sm other than FMHA_SM_CURRENT_DEVICE") {
        FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_check_support(&d, -5));
        CHECK(std::string(fmha_last_error_message()).find("-5") != std::string::npos);
    }
    SECTION("validation comes before the device check") {
        d.head_dim = 80;
        FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, fmha_check_support(&d, 90));
        CHECK(std::string(fmha_last_error_message()).find("head_dim") != std::string::npos);
    }
}
