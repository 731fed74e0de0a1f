// Descriptor version 3 (varlen Q/K, seqused_k, paged KV, split-KV, head_dim
// 512), tensors version 3, plan_info version 2, fmha_check_block_table and
// the merge descriptor, all without a GPU: through fmha_check_support(desc,
// FMHA_SM_ANY or a given sm) and the validation that plan creation does
// before it needs a driver. Each rejection must give the exact status and
// name the field (and value) in fmha_last_error_message().
//
// At the end: self-tests of the serving case generator and references
// (tests/support/serving.cpp) that the GPU [serving] and [merge] suites rely on.
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "fmha/fmha.h"
#include "fmha_catch.h"
#include "validation_checks.h"
#include "fmha_test/archs.h"
#include "fmha_test/half.h"
#include "fmha_test/reference.h"
#include "fmha_test/far_placement.h"
#include "fmha_test/serving.h"

using namespace fmha_test;

using namespace validation_checks;

namespace {

// A valid GQA problem: bf16, batch 3, 8 q heads over 2 kv heads, 64 x 300, hd 128.
fmha_descriptor dense_desc() { return gqa_desc(3, 64, 300); }

// Packed Q/O [total_q = 200, 8, 128] with cu_seqlens_q.
fmha_descriptor varlen_q_desc() {
    fmha_descriptor d = dense_desc();
    d.flags |= FMHA_FLAG_VARLEN_Q;
    d.total_q = 200;
    d.q_strides = d.o_strides = {0, 8 * 128, 128, 1};
    return d;
}

// Packed K/V [total_k = 700, 2, 128] with cu_seqlens_k.
fmha_descriptor varlen_k_desc() {
    fmha_descriptor d = dense_desc();
    d.flags |= FMHA_FLAG_VARLEN_K;
    d.total_k = 700;
    d.k_strides = d.v_strides = {0, 2 * 128, 128, 1};
    return d;
}

// Paged K/V [num_pages = 40, page_size = 16, 2, 128], 19 pages per sequence
// (304 >= seqlen_k = 300 keys), lengths from seqused_k.
fmha_descriptor paged_desc() {
    fmha_descriptor d = dense_desc();
    d.flags |= FMHA_FLAG_PAGED_KV | FMHA_FLAG_SEQUSED_K;
    d.page_size = 16;
    d.num_pages = 40;
    d.max_pages_per_seq = 19;
    d.k_strides = d.v_strides = {16 * 2 * 128, 2 * 128, 128, 1};
    return d;
}

}  // namespace

TEST_CASE("v3: defaults of the new fields", "[cpu][validation][v3]") {
    fmha_descriptor d;
    std::memset(&d, 0x5A, sizeof d);
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_descriptor_init(&d, 3));
    CHECK(d.version == 3u);
    CHECK(d.total_q == 0);
    CHECK(d.total_k == 0);
    CHECK(d.num_pages == 0);
    CHECK(d.max_pages_per_seq == 0);
    CHECK(d.page_size == 0);
    CHECK(d.num_splits == 0);  // automatic
    CHECK(d.window_left == -1);
    CHECK(d.window_right == -1);
    CHECK(d.flags == 0u);
    CHECK(d.kernel == FMHA_KERNEL_AUTO);
    CHECK(FMHA_KERNEL_DECODE == 3);
    CHECK(FMHA_DESCRIPTOR_VERSION == 3);
    CHECK(FMHA_TENSORS_VERSION == 3);
    CHECK(FMHA_PLAN_INFO_VERSION == 2);
    CHECK(FMHA_MERGE_DESCRIPTOR_VERSION == 1);
    CHECK(FMHA_MERGE_MAX_PARTS == 64);
    // The flag bits are distinct.
    const uint32_t flags[] = {FMHA_FLAG_WRITE_LSE, FMHA_FLAG_SINKS, FMHA_FLAG_VARLEN_Q,
                              FMHA_FLAG_VARLEN_K, FMHA_FLAG_SEQUSED_K, FMHA_FLAG_PAGED_KV};
    uint32_t all = 0;
    for (uint32_t f : flags) {
        CHECK((all & f) == 0u);
        all |= f;
    }
}

TEST_CASE("v3: a version-2 descriptor still works and cannot use version-3 flags",
          "[cpu][validation][v3]") {
    ForceKernelEnv env;
    const size_t v2_size = offsetof(fmha_descriptor, total_q);
    alignas(fmha_descriptor) unsigned char buf[sizeof(fmha_descriptor)];
    std::memset(buf, 0xAB, sizeof buf);
    auto *d = reinterpret_cast<fmha_descriptor *>(buf);
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_descriptor_init(d, 2));
    for (size_t i = v2_size; i < sizeof buf; ++i) {
        INFO("byte " << i << " past the version-2 struct");
        REQUIRE(buf[i] == 0xAB);
    }
    CHECK(d->window_left == -1);
    const fmha_descriptor full = dense_desc();
    std::memcpy(buf + sizeof(uint32_t),
                reinterpret_cast<const unsigned char *>(&full) + sizeof(uint32_t),
                v2_size - sizeof(uint32_t));
    // The bytes past version 2 are garbage (0xAB...) and must be ignored.
    FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_check_support(d, FMHA_SM_ANY));
    d->flags = FMHA_FLAG_SINKS | FMHA_FLAG_WRITE_LSE;  // version-2 flags are fine
    FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_check_support(d, FMHA_SM_ANY));
    for (uint32_t f : {FMHA_FLAG_VARLEN_Q, FMHA_FLAG_VARLEN_K, FMHA_FLAG_SEQUSED_K,
                       FMHA_FLAG_PAGED_KV}) {
        d->flags = FMHA_FLAG_WRITE_LSE | f;
        char hex[16];
        std::snprintf(hex, sizeof hex, "0x%x", f);
        INFO("version-3 flag " << hex << " in a version-2 descriptor");
        expect_rejected(*d, FMHA_STATUS_INVALID_ARGUMENT, {"descriptor.flags", hex, "version 2"});
    }
    SECTION("and in a version-1 descriptor") {
        alignas(fmha_descriptor) unsigned char b1[sizeof(fmha_descriptor)];
        std::memset(b1, 0xCD, sizeof b1);
        auto *d1 = reinterpret_cast<fmha_descriptor *>(b1);
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_descriptor_init(d1, 1));
        const size_t v1_size = offsetof(fmha_descriptor, window_left);
        std::memcpy(b1 + sizeof(uint32_t),
                    reinterpret_cast<const unsigned char *>(&full) + sizeof(uint32_t),
                    v1_size - sizeof(uint32_t));
        FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_check_support(d1, FMHA_SM_ANY));
        d1->flags = FMHA_FLAG_PAGED_KV;
        expect_rejected(*d1, FMHA_STATUS_INVALID_ARGUMENT, {"descriptor.flags", "version 1"});
    }
}

TEST_CASE("v3: fields of an unset flag must be 0", "[cpu][validation][v3]") {
    struct Field {
        const char *name;
        const char *flag;  // the flag named in the message
        uint32_t flags;    // flags set in the descriptor (not the field's own)
    } fields[] = {
        {"total_q", "FMHA_FLAG_VARLEN_Q", 0},
        {"total_k", "FMHA_FLAG_VARLEN_K", 0},
        // With paged KV, total_k is not used either (K/V are pages).
        {"total_k", "FMHA_FLAG_VARLEN_K", FMHA_FLAG_VARLEN_K | FMHA_FLAG_PAGED_KV},
        {"total_k", "FMHA_FLAG_VARLEN_K", FMHA_FLAG_PAGED_KV},
        {"page_size", "FMHA_FLAG_PAGED_KV", 0},
        {"num_pages", "FMHA_FLAG_PAGED_KV", 0},
        {"max_pages_per_seq", "FMHA_FLAG_PAGED_KV", 0},
        {"page_size", "FMHA_FLAG_PAGED_KV", FMHA_FLAG_VARLEN_K},
        {"total_q", "FMHA_FLAG_VARLEN_Q", FMHA_FLAG_VARLEN_K | FMHA_FLAG_SEQUSED_K},
    };
    for (const Field &f : fields)
        for (int64_t value : {int64_t(1), int64_t(-1), int64_t(4096)}) {
            fmha_descriptor d = (f.flags & FMHA_FLAG_PAGED_KV) ? paged_desc()
                                : (f.flags & FMHA_FLAG_VARLEN_K) ? varlen_k_desc()
                                                                 : dense_desc();
            d.flags |= f.flags;
            const std::string field = std::string("descriptor.") + f.name;
            if (std::strcmp(f.name, "total_q") == 0) d.total_q = value;
            else if (std::strcmp(f.name, "total_k") == 0) d.total_k = value;
            else if (std::strcmp(f.name, "num_pages") == 0) d.num_pages = value;
            else if (std::strcmp(f.name, "max_pages_per_seq") == 0) d.max_pages_per_seq = value;
            else d.page_size = int32_t(value);
            INFO(field << " = " << value << " with flags 0x" << std::hex << d.flags);
            expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT,
                            {field.c_str(), std::to_string(value).c_str(), f.flag});
        }
}

TEST_CASE("v3: valid varlen, seqused and paged descriptors", "[cpu][validation][v3]") {
    ForceKernelEnv env;
    expect_valid(varlen_q_desc());
    expect_valid(varlen_k_desc());
    expect_valid(paged_desc());
    SECTION("every combination of the four flags that has its fields") {
        for (unsigned mask = 0; mask < 16; ++mask) {
            fmha_descriptor d = dense_desc();
            if (mask & 8) d = paged_desc();
            d.flags &= ~FMHA_FLAG_SEQUSED_K;
            if (mask & 1) {
                d.flags |= FMHA_FLAG_VARLEN_Q;
                d.total_q = 200;
                d.q_strides = d.o_strides = {0, 8 * 128, 128, 1};
            }
            if (mask & 2) {
                d.flags |= FMHA_FLAG_VARLEN_K;
                if (!(mask & 8)) {
                    d.total_k = 700;
                    d.k_strides = d.v_strides = {0, 2 * 128, 128, 1};
                }
            }
            if (mask & 4) d.flags |= FMHA_FLAG_SEQUSED_K;
            d.flags |= FMHA_FLAG_WRITE_LSE;
            INFO("flags 0x" << std::hex << d.flags);
            expect_valid(d);
        }
    }
    SECTION("total_q and total_k may be 0 (every sequence empty) or as large as 2^31-1") {
        fmha_descriptor d = varlen_q_desc();
        d.total_q = 0;
        expect_valid(d);
        d.total_q = INT32_MAX;
        expect_valid(d);
        fmha_descriptor k = varlen_k_desc();
        k.total_k = 0;
        expect_valid(k);
        k.total_k = INT32_MAX;
        expect_valid(k);
    }
    SECTION("page size 1 and a block table exactly as wide as seqlen_k needs") {
        fmha_descriptor d = paged_desc();
        d.page_size = 1;
        d.max_pages_per_seq = 300;
        d.num_pages = 1000;
        d.k_strides = d.v_strides = {2 * 128, 0, 128, 1};  // the row stride is never followed
        expect_valid(d);
        fmha_descriptor e = paged_desc();
        e.page_size = 100;
        e.max_pages_per_seq = 3;  // 300 keys exactly
        e.k_strides = e.v_strides = {100 * 2 * 128, 2 * 128, 128, 1};
        expect_valid(e);
    }
    SECTION("paged caches in head-major page order ([page, head, row, dim])") {
        fmha_descriptor d = paged_desc();
        d.k_strides = d.v_strides = {2 * 16 * 128, 128, 16 * 128, 1};
        expect_valid(d);
    }
    SECTION("num_splits 0 (automatic) to 128") {
        for (int32_t s : {0, 1, 2, 3, 7, 16, 64, 127, 128}) {
            fmha_descriptor d = dense_desc();
            d.seqlen_q = 1;
            fmha_strides_bshd(&d.q_strides, 1, 8, 128);
            d.o_strides = d.q_strides;
            d.num_splits = s;
            INFO("num_splits " << s);
            expect_valid(d);
            fmha_descriptor p = paged_desc();
            p.num_splits = s;
            expect_valid(p);
        }
    }
}

TEST_CASE("v3: ranges of the new fields", "[cpu][validation][v3]") {
    SECTION("total_q") {
        for (int64_t v : {int64_t(-1), int64_t(-200), int64_t(1) << 31, int64_t(1) << 40}) {
            fmha_descriptor d = varlen_q_desc();
            d.total_q = v;
            INFO("total_q " << v);
            expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT,
                            {"descriptor.total_q", std::to_string(v).c_str()});
        }
    }
    SECTION("total_k") {
        for (int64_t v : {int64_t(-1), int64_t(1) << 31}) {
            fmha_descriptor d = varlen_k_desc();
            d.total_k = v;
            INFO("total_k " << v);
            expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT,
                            {"descriptor.total_k", std::to_string(v).c_str()});
        }
    }
    SECTION("page_size, num_pages and max_pages_per_seq must be >= 1") {
        for (int64_t v : {int64_t(0), int64_t(-1), int64_t(-16)}) {
            fmha_descriptor d = paged_desc();
            d.page_size = int32_t(v);
            INFO("page_size " << v);
            expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT,
                            {"descriptor.page_size", std::to_string(v).c_str()});
            d = paged_desc();
            d.num_pages = v;
            INFO("num_pages " << v);
            expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT,
                            {"descriptor.num_pages", std::to_string(v).c_str()});
            d = paged_desc();
            d.max_pages_per_seq = v;
            INFO("max_pages_per_seq " << v);
            expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT,
                            {"descriptor.max_pages_per_seq", std::to_string(v).c_str()});
        }
        fmha_descriptor d = paged_desc();
        d.num_pages = int64_t(1) << 31;
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"descriptor.num_pages"});
    }
    SECTION("max_pages_per_seq * page_size must cover seqlen_k") {
        fmha_descriptor d = paged_desc();
        d.max_pages_per_seq = 18;  // 288 < 300
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT,
                        {"descriptor.max_pages_per_seq", "18", "300"});
        d = paged_desc();
        d.seqlen_k = 305;  // 19 x 16 = 304
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT,
                        {"descriptor.max_pages_per_seq", "19", "305"});
        d.seqlen_k = 304;
        expect_valid(d);
    }
    SECTION("batch x max_pages_per_seq must stay below 2^31") {
        fmha_descriptor d = paged_desc();
        d.max_pages_per_seq = int64_t(1) << 30;  // x batch 3
        expect_rejected(d, FMHA_STATUS_NOT_SUPPORTED,
                        {"descriptor.max_pages_per_seq", "1073741824", "batch 3", "3221225472"});
    }
    SECTION("num_splits in [0, 128]") {
        for (int32_t v : {-1, -128, 129, 1000, INT32_MIN, INT32_MAX}) {
            fmha_descriptor d = dense_desc();
            d.num_splits = v;
            INFO("num_splits " << v);
            expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT,
                            {"descriptor.num_splits", std::to_string(v).c_str()});
        }
    }
}

TEST_CASE("v3: strides of packed and paged tensors", "[cpu][validation][v3]") {
    SECTION("packed Q/O: the batch stride is not used (any value passes)") {
        for (int64_t bs : {int64_t(3), int64_t(-5), int64_t(7)}) {
            fmha_descriptor d = varlen_q_desc();
            d.q_strides.batch = bs;
            d.o_strides.batch = bs;
            INFO("batch stride " << bs);
            expect_valid(d);
        }
    }
    SECTION("packed Q/O: row and head strides are checked over total_q rows") {
        fmha_descriptor d = varlen_q_desc();
        d.q_strides.seq += 4;
        expect_rejected(d, FMHA_STATUS_MISALIGNED,
                        {"q_strides.seq", std::to_string(d.q_strides.seq).c_str()});
        d = varlen_q_desc();
        d.o_strides.head = 12;
        expect_rejected(d, FMHA_STATUS_MISALIGNED, {"o_strides.head", "12"});
        d = varlen_q_desc();
        d.o_strides.seq = 8;  // rows on top of each other
        expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"o_strides.seq", "overlap"});
        d = varlen_q_desc();
        d.q_strides.seq = -d.q_strides.seq;
        expect_rejected(d, FMHA_STATUS_NOT_SUPPORTED, {"q_strides.seq", "negative"});
        // One packed row: its row stride is never followed.
        d = varlen_q_desc();
        d.total_q = 1;
        d.q_strides.seq = 3;
        d.o_strides.seq = 5;
        expect_valid(d);
        // Head-major packed rows ([heads, total_q, dim]).
        d = varlen_q_desc();
        d.q_strides = d.o_strides = {0, 128, 200 * 128, 1};
        expect_valid(d);
    }
    SECTION("dense Q keeps its batch stride checked when only the keys are varlen") {
        fmha_descriptor d = varlen_k_desc();
        d.q_strides.batch += 4;
        expect_rejected(d, FMHA_STATUS_MISALIGNED, {"q_strides.batch"});
    }
    SECTION("packed K/V: the batch stride is not used, the row stride is checked") {
        fmha_descriptor d = varlen_k_desc();
        d.k_strides.batch = 3;
        d.v_strides.batch = -9;
        expect_valid(d);
        d = varlen_k_desc();
        d.v_strides.seq += 2;
        expect_rejected(d, FMHA_STATUS_MISALIGNED,
                        {"v_strides.seq", std::to_string(d.v_strides.seq).c_str()});
    }
    SECTION("paged K/V: the batch stride is the page stride") {
        fmha_descriptor d = paged_desc();
        d.k_strides.batch += 4;
        expect_rejected(d, FMHA_STATUS_MISALIGNED,
                        {"k_strides.batch", std::to_string(d.k_strides.batch).c_str()});
        d = paged_desc();
        d.v_strides.batch = -d.v_strides.batch;
        expect_rejected(d, FMHA_STATUS_NOT_SUPPORTED, {"v_strides.batch", "negative"});
        d = paged_desc();
        d.k_strides.seq = 100;  // rows of a page
        expect_rejected(d, FMHA_STATUS_MISALIGNED, {"k_strides.seq", "100"});
        d = paged_desc();
        d.k_strides.dim = 2;
        expect_rejected(d, FMHA_STATUS_NOT_SUPPORTED, {"k_strides.dim"});
        // One page: the page stride is never followed.
        d = paged_desc();
        d.num_pages = 1;
        d.k_strides.batch = 5;
        expect_valid(d);
    }
}

TEST_CASE("v3: head_dim 512", "[cpu][validation][v3]") {
    ForceKernelEnv env;
    for (int dt : {FMHA_DTYPE_BF16, FMHA_DTYPE_FP16})
        for (int64_t sq : {1, 4, 128, 4097})
            for (int64_t hq : {1, 8, 16}) {
                fmha_descriptor d = dense_desc();
                d.dtype = dt;
                d.head_dim = 512;
                d.seqlen_q = sq;
                d.num_q_heads = hq;
                d.num_kv_heads = 1;
                d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
                fmha_strides_bshd(&d.q_strides, sq, hq, 512);
                fmha_strides_bshd(&d.k_strides, d.seqlen_k, 1, 512);
                d.v_strides = d.k_strides;
                d.o_strides = d.q_strides;
                INFO("dtype " << dt << " sq " << sq << " Hq " << hq);
                expect_valid(d);
                d.kernel = FMHA_KERNEL_DECODE;
                expect_valid(d);
            }
    SECTION("other head dims stay unsupported") {
        for (int64_t hd : {384, 520, 576, 1024}) {
            fmha_descriptor d = dense_desc();
            d.head_dim = hd;
            fmha_strides_bshd(&d.q_strides, d.seqlen_q, 8, hd);
            fmha_strides_bshd(&d.k_strides, d.seqlen_k, 2, hd);
            d.v_strides = d.k_strides;
            d.o_strides = d.q_strides;
            INFO("head_dim " << hd);
            expect_rejected(d, FMHA_STATUS_NOT_SUPPORTED,
                            {"head_dim", std::to_string(hd).c_str()});
        }
    }
}

TEST_CASE("v3: which kernel family can run what (device-dependent answers)",
          "[cpu][validation][v3][device]") {
    ForceKernelEnv env;
    if (!embeds(80)) FMHA_SKIP("this build embeds no sm_80 image");
    fmha_descriptor hd512 = dense_desc();
    hd512.head_dim = 512;
    hd512.num_kv_heads = 1;
    fmha_strides_bshd(&hd512.q_strides, hd512.seqlen_q, 8, 512);
    fmha_strides_bshd(&hd512.k_strides, hd512.seqlen_k, 1, 512);
    hd512.v_strides = hd512.k_strides;
    hd512.o_strides = hd512.q_strides;
    SECTION("head_dim 512: PORTABLE does not run it; the decode kernel does where its compact "
            "tile fits (147,712 bytes of shared memory per block: sm_80, not sm_86)") {
        for (int k : {FMHA_KERNEL_AUTO, FMHA_KERNEL_DECODE}) {
            hd512.kernel = k;
            INFO("kernel " << k);
            expect_valid(hd512, 80);  // 163 KB: the compact tile
            FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, fmha_check_support(&hd512, 86));
            const std::string msg = fmha_last_error_message();
            CHECK(msg.find("512") != std::string::npos);
            CHECK(msg.find("147712") != std::string::npos);  // what the smallest tile needs
            CHECK(msg.find("shared memory") != std::string::npos);
        }
        for (int32_t sm : {80, 86}) {
            hd512.kernel = FMHA_KERNEL_PORTABLE;
            INFO("sm " << sm);
            FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, fmha_check_support(&hd512, sm));
            CHECK(std::string(fmha_last_error_message()).find("512") != std::string::npos);
        }
        // PORTABLE is refused without a device too.
        hd512.kernel = FMHA_KERNEL_PORTABLE;
        FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, fmha_check_support(&hd512, FMHA_SM_ANY));
        CHECK(std::string(fmha_last_error_message()).find("descriptor.head_dim is 512") !=
              std::string::npos);
        CHECK(std::string(fmha_last_error_message()).find("kernel PORTABLE") !=
              std::string::npos);
        // So is FMHA_FORCE_KERNEL=portable on an AUTO descriptor.
        hd512.kernel = FMHA_KERNEL_AUTO;
        setenv("FMHA_FORCE_KERNEL", "portable", 1);
        FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, fmha_check_support(&hd512, FMHA_SM_ANY));
        unsetenv("FMHA_FORCE_KERNEL");
        // sm_100-class shared memory (227 KB) runs it on the decode kernel,
        // through the embedded PTX.
        const int32_t ptx = fmha_embedded_ptx_arch();
        if (ptx != 0 && ptx <= 100)
            for (int k : {FMHA_KERNEL_AUTO, FMHA_KERNEL_DECODE}) {
                hd512.kernel = k;
                INFO("sm 100 kernel " << k);
                expect_valid(hd512, 100);
            }
    }
    SECTION("head_dim 256 on the decode kernel: 205,056 bytes of shared memory on the usual "
            "tile, 73,984 on the compact one, which every device takes, split or not") {
        fmha_descriptor d = dense_desc();
        d.head_dim = 256;
        d.seqlen_q = 1;  // a decode shape: AUTO prefers the decode kernel
        fmha_strides_bshd(&d.q_strides, 1, 8, 256);
        fmha_strides_bshd(&d.k_strides, d.seqlen_k, 2, 256);
        d.v_strides = d.k_strides;
        d.o_strides = d.q_strides;
        for (int32_t sm : {80, 86}) {
            for (int k : {FMHA_KERNEL_AUTO, FMHA_KERNEL_DECODE})
                for (int32_t splits : {0, 4}) {
                    INFO("sm " << sm << " kernel " << k << " splits " << splits);
                    d.kernel = k;
                    d.num_splits = splits;
                    expect_valid(d, sm);
                }
        }
    }
    SECTION("an unknown architecture gets the smallest shared memory (99 KB)") {
        fmha_descriptor d = hd512;  // the decode kernel's compact tile needs 147,712 bytes
        d.kernel = FMHA_KERNEL_DECODE;
        const int32_t ptx = fmha_embedded_ptx_arch();
        if (ptx != 0 && ptx <= 130) {
            expect_valid(d, 100);  // 227 KB
            FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, fmha_check_support(&d, 130));
            CHECK(std::string(fmha_last_error_message()).find("101376") != std::string::npos);
        }
        expect_valid(d, 80);  // 163 KB
        // hd128 over a contiguous cache fits everywhere: where the usual tile
        // (102,656 bytes) does not, the narrow one (53,504) runs it.
        fmha_descriptor hd128 = dense_desc();
        hd128.seqlen_q = 1;
        fmha_strides_bshd(&hd128.q_strides, 1, 8, 128);
        hd128.o_strides = hd128.q_strides;
        hd128.kernel = FMHA_KERNEL_DECODE;
        expect_valid(hd128, 80);
        expect_valid(hd128, 86);
        if (ptx != 0 && ptx <= 130) expect_valid(hd128, 130);
    }
    SECTION("num_splits >= 2: AUTO, DECODE and PORTABLE split") {
        for (int32_t s : {2, 3, 16, 128}) {
            fmha_descriptor d = dense_desc();
            d.num_splits = s;
            INFO("num_splits " << s);
            expect_valid(d, 80);
            d.kernel = FMHA_KERNEL_DECODE;
            expect_valid(d, 80);
            d.kernel = FMHA_KERNEL_PORTABLE;
            expect_valid(d, 80);
            d.num_splits = 1;
            expect_valid(d, 80);
            d.num_splits = 0;  // automatic
            expect_valid(d, 80);
        }
    }
    SECTION("varlen, seqused and paged descriptors run on AUTO, PORTABLE and DECODE") {
        for (const fmha_descriptor &base : {varlen_q_desc(), varlen_k_desc(), paged_desc()})
            for (int k : {FMHA_KERNEL_AUTO, FMHA_KERNEL_PORTABLE, FMHA_KERNEL_DECODE}) {
                fmha_descriptor d = base;
                d.kernel = k;
                d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
                d.window_left = 100;
                d.softcap = 30.0f;
                d.flags |= FMHA_FLAG_SINKS | FMHA_FLAG_WRITE_LSE;
                INFO("kernel " << k << " flags 0x" << std::hex << d.flags);
                expect_valid(d, 80);
            }
    }
    SECTION("the decode kernel needs sm_80 too") {
        fmha_descriptor d = dense_desc();
        d.kernel = FMHA_KERNEL_DECODE;
        FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, fmha_check_support(&d, 75));
    }
    SECTION("the Hopper kernel runs head_dim 512 (up to 128 query heads per KV head packed) "
            "and splits the keys when asked") {
        if (!embeds(90)) FMHA_SKIP("this build embeds no sm_90 image");
        hd512.kernel = FMHA_KERNEL_HOPPER;
        expect_valid(hd512, 90);
        for (int64_t hq : {96, 128, 256}) {
            fmha_descriptor mla = hd512;
            mla.num_q_heads = hq;
            mla.seqlen_q = 1;
            fmha_strides_bshd(&mla.q_strides, 1, hq, 512);
            mla.o_strides = mla.q_strides;
            INFO("Hq " << hq);
            expect_valid(mla, 90);
            mla.kernel = FMHA_KERNEL_AUTO;
            expect_valid(mla, 90);
        }
        fmha_descriptor d = dense_desc();
        d.kernel = FMHA_KERNEL_HOPPER;
        d.num_splits = 4;
        expect_valid(d, 90);
        d.kernel = FMHA_KERNEL_AUTO;  // AUTO goes to the decode kernel
        expect_valid(d, 90);
        // A split count sends AUTO to the decode kernel first; where its grid
        // cannot take the problem (batch > 65535), the Hopper kernel runs it.
        fmha_descriptor many = hd512;
        many.batch = 70000;
        many.num_splits = 2;
        many.kernel = FMHA_KERNEL_DECODE;
        FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, fmha_check_support(&many, 90));
        CHECK(std::string(fmha_last_error_message()).find("batch is 70000") != std::string::npos);
        many.kernel = FMHA_KERNEL_AUTO;
        expect_valid(many, 90);
        // Where the Hopper kernel cannot run it either, the decode kernel's
        // reason is AUTO's answer (no portable kernel runs head_dim 512).
        many.k_strides.seq = int64_t(1) << 40;  // past what a TMA map steps
        many.v_strides = many.k_strides;
        FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, fmha_check_support(&many, 90));
        CHECK(std::string(fmha_last_error_message()).find("batch is 70000") != std::string::npos);
    }
}

TEST_CASE("v3: grid limits of the decode kernel and the split-KV combine name the numbers",
          "[cpu][validation][v3][device]") {
    ForceKernelEnv env;
    if (!embeds(80)) FMHA_SKIP("this build embeds no sm_80 image");
    SECTION("decode: m_tiles x num_kv_heads <= 65535") {
        fmha_descriptor d = dense_desc();  // 8 query heads over 2 KV heads
        d.kernel = FMHA_KERNEL_DECODE;
        d.batch = 1;
        d.seqlen_q = 131070;  // x 4 heads / 16 = 32768 tiles, x 2 KV heads = 65536
        fmha_strides_bshd(&d.q_strides, d.seqlen_q, 8, 128);
        d.o_strides = d.q_strides;
        FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, fmha_check_support(&d, 80));
        const std::string msg = fmha_last_error_message();
        INFO(msg);
        for (const char *n : {"descriptor.seqlen_q is 131070", "m_tiles x num_kv_heads",
                              "32768 x 2 = 65536"})
            CHECK(msg.find(n) != std::string::npos);
        d.seqlen_q = 131068;  // 32767 tiles x 2 = 65534
        fmha_strides_bshd(&d.q_strides, d.seqlen_q, 8, 128);
        d.o_strides = d.q_strides;
        expect_valid(d, 80);
    }
    SECTION("split-KV: (query row, head) pairs of the combine <= 2^31-1") {
        if (!embeds(90)) FMHA_SKIP("this build embeds no sm_90 image");
        fmha_descriptor d = dense_desc();
        d.kernel = FMHA_KERNEL_HOPPER;
        d.batch = 1;
        d.num_q_heads = d.num_kv_heads = 16;
        d.seqlen_q = int64_t(1) << 27;  // x 16 heads = 2^31 rows to combine
        fmha_strides_bshd(&d.q_strides, d.seqlen_q, 16, 128);
        fmha_strides_bshd(&d.k_strides, d.seqlen_k, 16, 128);
        d.v_strides = d.k_strides;
        d.o_strides = d.q_strides;
        d.num_splits = 2;
        FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, fmha_check_support(&d, 90));
        const std::string msg = fmha_last_error_message();
        INFO(msg);
        for (const char *n : {"num_splits", "134217728 query rows x 16 num_q_heads"})
            CHECK(msg.find(n) != std::string::npos);
        d.num_splits = 1;
        expect_valid(d, 90);
    }
}

TEST_CASE("v3: kernel family DECODE is known, 4 is not", "[cpu][validation][v3]") {
    fmha_descriptor d = dense_desc();
    d.kernel = FMHA_KERNEL_DECODE;
    expect_valid(d);
    d.kernel = 4;
    expect_rejected(d, FMHA_STATUS_INVALID_ARGUMENT, {"descriptor.kernel", "4"});
}

TEST_CASE("v3: tensors version 3 and plan_info version 2", "[cpu][validation][v3]") {
    SECTION("fmha_tensors_init(3) zeroes the index arrays") {
        fmha_tensors t;
        std::memset(&t, 0x77, sizeof t);
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_tensors_init(&t, 3));
        CHECK(t.version == 3u);
        CHECK(t.cu_seqlens_q == nullptr);
        CHECK(t.cu_seqlens_k == nullptr);
        CHECK(t.seqused_k == nullptr);
        CHECK(t.block_table == nullptr);
        CHECK(t.sinks == nullptr);
    }
    SECTION("fmha_tensors_init(2) writes only the version-2 struct") {
        alignas(fmha_tensors) unsigned char buf[sizeof(fmha_tensors)];
        std::memset(buf, 0xAB, sizeof buf);
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                            fmha_tensors_init(reinterpret_cast<fmha_tensors *>(buf), 2));
        for (size_t i = offsetof(fmha_tensors, cu_seqlens_q); i < sizeof buf; ++i)
            REQUIRE(buf[i] == 0xAB);
    }
    SECTION("plan_info version 1 is still accepted and written only as far as it goes") {
        alignas(fmha_plan_info) unsigned char buf[sizeof(fmha_plan_info)];
        std::memset(buf, 0xAB, sizeof buf);
        auto *info = reinterpret_cast<fmha_plan_info *>(buf);
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_plan_info_init(info, 1));
        CHECK(info->version == 1u);
        CHECK(info->kernel_name == nullptr);
        for (size_t i = offsetof(fmha_plan_info, num_splits); i < sizeof buf; ++i)
            REQUIRE(buf[i] == 0xAB);
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_plan_info_init(info, 2));
        CHECK(info->version == 2u);
        CHECK(info->num_splits == 0);
        CHECK(info->reserved0 == 0);
        fmha_plan_info bad;
        FMHA_CHECK_STATUS(FMHA_STATUS_VERSION_MISMATCH, fmha_plan_info_init(&bad, 3));
        FMHA_CHECK_STATUS(FMHA_STATUS_VERSION_MISMATCH, fmha_plan_info_init(&bad, 0));
    }
    SECTION("unknown tensors versions") {
        fmha_tensors t;
        for (uint32_t v : {0u, 4u, 99u}) {
            INFO("version " << v);
            FMHA_CHECK_STATUS(FMHA_STATUS_VERSION_MISMATCH, fmha_tensors_init(&t, v));
        }
    }
}

// ---- fmha_check_block_table ----------------------------------------------------

namespace {

// batch 3, seqlen_k 100, page_size 16: 7 pages for a full sequence; 8 columns.
fmha_descriptor table_desc() {
    fmha_descriptor d = dense_desc();
    d.seqlen_k = 100;
    d.flags = FMHA_FLAG_PAGED_KV;
    d.page_size = 16;
    d.num_pages = 20;
    d.max_pages_per_seq = 8;
    d.k_strides = d.v_strides = {16 * 2 * 128, 2 * 128, 128, 1};
    return d;
}

// Every entry valid and distinct: page (b * 8 + i) % 20... then fixed up.
std::vector<int32_t> valid_table() {
    std::vector<int32_t> t(3 * 8);
    for (int i = 0; i < 24; ++i) t[size_t(i)] = (i * 7) % 20;
    return t;
}

void expect_table_error(const fmha_descriptor &d, const std::vector<int32_t> &table,
                        const int32_t *lens, const char *entry, int32_t value) {
    fmha_status st = fmha_check_block_table(&d, table.data(), lens);
    const std::string msg = fmha_last_error_message();
    INFO("fmha_check_block_table -> " << status_name(st) << ": \"" << msg << "\"; expected "
                                      << entry);
    CHECK(st == FMHA_STATUS_INVALID_ARGUMENT);
    CHECK(fmha_last_error_status() == FMHA_STATUS_INVALID_ARGUMENT);
    CHECK(msg.find(entry) != std::string::npos);
    CHECK(msg.find(std::to_string(value)) != std::string::npos);
}

void expect_table_ok(const fmha_descriptor &d, const std::vector<int32_t> &table,
                     const int32_t *lens) {
    fmha_status st = fmha_check_block_table(&d, table.data(), lens);
    INFO("fmha_check_block_table -> " << status_name(st) << ": " << fmha_last_error_message());
    CHECK(st == FMHA_STATUS_SUCCESS);
    CHECK(std::string(fmha_last_error_message()).empty());
}

}  // namespace

TEST_CASE("fmha_check_block_table", "[cpu][validation][v3][block_table]") {
    const fmha_descriptor d = table_desc();
    REQUIRE(fmha_check_support(&d, FMHA_SM_ANY) == FMHA_STATUS_SUCCESS);
    SECTION("a valid table passes, with and without host lengths") {
        std::vector<int32_t> t = valid_table();
        expect_table_ok(d, t, nullptr);
        const int32_t lens[] = {100, 17, 0};
        expect_table_ok(d, t, lens);
        // The spare column and the pages past a sequence's length are not read.
        for (int b = 0; b < 3; ++b) t[size_t(b * 8 + 7)] = -1;
        expect_table_ok(d, t, nullptr);
        t[size_t(1 * 8 + 2)] = 999;  // sequence 1 (17 keys) reads pages 0 and 1 only
        t[size_t(2 * 8 + 0)] = -5;   // sequence 2 has no key
        expect_table_ok(d, t, lens);
        const int32_t lens32[] = {100, 32, 0};  // 32 keys: still exactly 2 pages
        expect_table_ok(d, t, lens32);
        // Entries at the ends of the range.
        t = valid_table();
        t[0] = 0;
        t[1] = 19;
        expect_table_ok(d, t, nullptr);
    }
    SECTION("an entry out of range is named as block_table[b][i]") {
        struct Bad {
            int b, i;
            int32_t value;
        } bads[] = {{0, 0, -1}, {1, 1, 20}, {2, 6, INT32_MIN}, {0, 3, INT32_MAX}, {2, 0, 21}};
        for (const Bad &bad : bads) {
            std::vector<int32_t> t = valid_table();
            t[size_t(bad.b * 8 + bad.i)] = bad.value;
            const std::string entry = "block_table[" + std::to_string(bad.b) + "][" +
                                      std::to_string(bad.i) + "]";
            INFO(entry << " = " << bad.value);
            expect_table_error(d, t, nullptr, entry.c_str(), bad.value);
        }
    }
    SECTION("the first bad entry in row-major order is named") {
        std::vector<int32_t> t = valid_table();
        t[size_t(2 * 8 + 0)] = -3;
        t[size_t(0 * 8 + 5)] = 42;
        expect_table_error(d, t, nullptr, "block_table[0][5]", 42);
    }
    SECTION("host lengths decide which entries are read") {
        std::vector<int32_t> t = valid_table();
        t[size_t(1 * 8 + 2)] = 20;
        const int32_t lens33[] = {100, 33, 0};  // 33 keys: pages 0, 1 and 2
        expect_table_error(d, t, lens33, "block_table[1][2]", 20);
        const int32_t lens32[] = {100, 32, 0};
        expect_table_ok(d, t, lens32);
        expect_table_error(d, t, nullptr, "block_table[1][2]", 20);  // NULL: seqlen_k for all
    }
    SECTION("page size 1: one entry per key") {
        fmha_descriptor p = d;
        p.page_size = 1;
        p.max_pages_per_seq = 100;
        p.num_pages = 300;
        p.k_strides = p.v_strides = {2 * 128, 0, 128, 1};
        std::vector<int32_t> t(300);
        for (int i = 0; i < 300; ++i) t[size_t(i)] = 299 - i;
        const int32_t lens[] = {100, 50, 1};
        expect_table_ok(p, t, lens);
        t[size_t(2 * 100 + 1)] = 300;  // sequence 2 uses one key
        expect_table_ok(p, t, lens);
        t[size_t(1 * 100 + 49)] = 300;
        expect_table_error(p, t, lens, "block_table[1][49]", 300);
    }
    SECTION("bad host lengths") {
        const std::vector<int32_t> t = valid_table();
        const int32_t negative[] = {100, -1, 0};
        fmha_status st = fmha_check_block_table(&d, t.data(), negative);
        INFO(fmha_last_error_message());
        CHECK(st == FMHA_STATUS_INVALID_ARGUMENT);
        CHECK(std::string(fmha_last_error_message()).find("host_seqlens_k[1]") != std::string::npos);
        const int32_t too_long[] = {101, 0, 0};  // more than seqlen_k
        st = fmha_check_block_table(&d, t.data(), too_long);
        INFO(fmha_last_error_message());
        CHECK(st == FMHA_STATUS_INVALID_ARGUMENT);
        CHECK(std::string(fmha_last_error_message()).find("host_seqlens_k[0]") != std::string::npos);
    }
    SECTION("bad arguments") {
        const std::vector<int32_t> t = valid_table();
        FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT,
                          fmha_check_block_table(nullptr, t.data(), nullptr));
        FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_check_block_table(&d, nullptr, nullptr));
        CHECK(std::string(fmha_last_error_message()).find("block_table") != std::string::npos);
        fmha_descriptor np = dense_desc();  // no FMHA_FLAG_PAGED_KV
        FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_check_block_table(&np, t.data(), nullptr));
        CHECK(std::string(fmha_last_error_message()).find("FMHA_FLAG_PAGED_KV") != std::string::npos);
        fmha_descriptor bad = d;  // the descriptor itself is checked
        bad.page_size = 0;
        FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_check_block_table(&bad, t.data(), nullptr));
        CHECK(std::string(fmha_last_error_message()).find("descriptor.page_size") != std::string::npos);
        bad = d;
        bad.version = 99;
        FMHA_CHECK_STATUS(FMHA_STATUS_VERSION_MISMATCH, fmha_check_block_table(&bad, t.data(), nullptr));
    }
}

TEST_CASE("fmha_check_block_table does not read FMHA_FORCE_KERNEL",
          "[cpu][validation][v3][block_table]") {
    ForceKernelEnv env;  // restores the variable afterwards
    const fmha_descriptor d = table_desc();
    const std::vector<int32_t> t = valid_table();
    for (const char *value : {"fast", "bogus", "hopper", "portable"}) {
        setenv("FMHA_FORCE_KERNEL", value, 1);
        INFO("FMHA_FORCE_KERNEL=" << value);
        expect_table_ok(d, t, nullptr);
        std::vector<int32_t> bad = t;
        bad[5] = 20;
        expect_table_error(d, bad, nullptr, "block_table[0][5]", 20);
    }
    // Plans and support queries still read it.
    setenv("FMHA_FORCE_KERNEL", "fast", 1);
    FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_check_support(&d, FMHA_SM_ANY));
    CHECK(std::string(fmha_last_error_message()).find("\"fast\"") != std::string::npos);
}

// ---- merge descriptor -----------------------------------------------------------

namespace {

fmha_merge_descriptor merge_desc() {
    fmha_merge_descriptor m;
    REQUIRE(fmha_merge_descriptor_init(&m, FMHA_MERGE_DESCRIPTOR_VERSION) == FMHA_STATUS_SUCCESS);
    m.dtype = FMHA_DTYPE_FP16;
    m.batch = 2;
    m.seqlen_q = 33;
    m.num_heads = 4;
    m.head_dim = 128;
    fmha_strides_bshd(&m.part_strides, 33, 4, 128);
    fmha_strides_bhsd(&m.o_strides, 33, 4, 128);
    m.num_parts = 3;
    m.flags = FMHA_FLAG_WRITE_LSE;
    return m;
}

// Validation comes before the driver: the status is the rule's, without a
// GPU as with one. A valid descriptor gets as far as the driver.
void expect_merge_rejected(const fmha_merge_descriptor &m, fmha_status expected,
                           std::initializer_list<const char *> needles) {
    fmha_plan *plan = reinterpret_cast<fmha_plan *>(0x10);
    fmha_status st = fmha_create_merge_plan(&plan, &m);
    const std::string msg = fmha_last_error_message();
    INFO("fmha_create_merge_plan -> " << status_name(st) << ": \"" << msg << "\"");
    CHECK(status_name(st) == status_name(expected));
    CHECK(plan == nullptr);
    for (const char *n : needles) {
        INFO("message should contain \"" << n << "\"");
        CHECK(msg.find(n) != std::string::npos);
    }
    if (st == FMHA_STATUS_SUCCESS) fmha_destroy_plan(plan);
}

void expect_merge_valid(const fmha_merge_descriptor &m) {
    fmha_plan *plan = nullptr;
    fmha_status st = fmha_create_merge_plan(&plan, &m);
    INFO("fmha_create_merge_plan -> " << status_name(st) << ": \"" << fmha_last_error_message()
                                      << "\"");
    // Past validation: success with a GPU, else the driver's answer.
    CHECK((st == FMHA_STATUS_SUCCESS || st == FMHA_STATUS_NO_DRIVER ||
           st == FMHA_STATUS_NO_DEVICE));
    CHECK((st == FMHA_STATUS_SUCCESS) == (plan != nullptr));
    fmha_destroy_plan(plan);
}

}  // namespace

TEST_CASE("merge descriptor: init and versions", "[cpu][validation][merge]") {
    fmha_merge_descriptor m;
    std::memset(&m, 0x5A, sizeof m);
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_merge_descriptor_init(&m, 1));
    CHECK(m.version == 1u);
    CHECK(m.dtype == FMHA_DTYPE_BF16);
    CHECK(m.batch == 0);
    CHECK(m.seqlen_q == 0);
    CHECK(m.num_heads == 0);
    CHECK(m.head_dim == 0);
    const fmha_strides zero_but_dim = {0, 0, 0, 1};
    CHECK(std::memcmp(&m.part_strides, &zero_but_dim, sizeof zero_but_dim) == 0);
    CHECK(std::memcmp(&m.o_strides, &zero_but_dim, sizeof zero_but_dim) == 0);
    CHECK(m.num_parts == 0);
    CHECK(m.flags == 0u);
    CHECK(m.device == 0);
    CHECK(m.reserved0 == 0);
    for (uint32_t v : {0u, 2u, 99u}) {
        INFO("version " << v);
        FMHA_CHECK_STATUS(FMHA_STATUS_VERSION_MISMATCH, fmha_merge_descriptor_init(&m, v));
        CHECK(std::string(fmha_last_error_message()).find(std::to_string(v)) != std::string::npos);
    }
    FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_merge_descriptor_init(nullptr, 1));
    // A default-initialized descriptor is incomplete, and says so.
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_merge_descriptor_init(&m, 1));
    expect_merge_rejected(m, FMHA_STATUS_INVALID_ARGUMENT, {"merge_descriptor.batch"});
}

TEST_CASE("merge descriptor: every field's rule", "[cpu][validation][merge]") {
    expect_merge_valid(merge_desc());
    SECTION("valid extremes") {
        for (int32_t parts : {1, 2, 64}) {
            fmha_merge_descriptor m = merge_desc();
            m.num_parts = parts;
            INFO("num_parts " << parts);
            expect_merge_valid(m);
        }
        for (int64_t hd : {8, 72, 512}) {
            fmha_merge_descriptor m = merge_desc();
            m.head_dim = hd;
            fmha_strides_bshd(&m.part_strides, 33, 4, hd);
            m.o_strides = m.part_strides;  // in place is allowed with the same strides
            INFO("head_dim " << hd);
            expect_merge_valid(m);
        }
        fmha_merge_descriptor m = merge_desc();
        m.flags = 0;
        expect_merge_valid(m);
    }
    SECTION("version") {
        fmha_merge_descriptor m = merge_desc();
        m.version = 2;
        expect_merge_rejected(m, FMHA_STATUS_VERSION_MISMATCH, {"version", "2"});
    }
    SECTION("NULLs") {
        fmha_plan *plan = reinterpret_cast<fmha_plan *>(0x10);
        FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_create_merge_plan(&plan, nullptr));
        CHECK(plan == nullptr);
        const fmha_merge_descriptor m = merge_desc();
        FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_create_merge_plan(nullptr, &m));
    }
    SECTION("num_parts in [1, 64]") {
        for (int32_t parts : {0, 65, -1, 1000}) {
            fmha_merge_descriptor m = merge_desc();
            m.num_parts = parts;
            INFO("num_parts " << parts);
            expect_merge_rejected(m, FMHA_STATUS_INVALID_ARGUMENT,
                                  {"merge_descriptor.num_parts", std::to_string(parts).c_str()});
        }
    }
    SECTION("sizes") {
        for (int64_t v : {int64_t(0), int64_t(-1)}) {
            fmha_merge_descriptor m = merge_desc();
            m.batch = v;
            expect_merge_rejected(m, FMHA_STATUS_INVALID_ARGUMENT, {"merge_descriptor.batch"});
            m = merge_desc();
            m.seqlen_q = v;
            expect_merge_rejected(m, FMHA_STATUS_INVALID_ARGUMENT, {"merge_descriptor.seqlen_q"});
            m = merge_desc();
            m.num_heads = v;
            expect_merge_rejected(m, FMHA_STATUS_INVALID_ARGUMENT, {"merge_descriptor.num_heads"});
        }
    }
    SECTION("batch x seqlen_q x num_heads <= 2^31-1, also where the product wraps 64 bits") {
        // 2^21 x 2^21 x 2^22 = 2^64, 0 in 64 bits; 2^31-1 cubed wraps too.
        for (int64_t b : {int64_t(1) << 21, int64_t(INT32_MAX)}) {
            fmha_merge_descriptor m = merge_desc();
            m.batch = b;
            m.seqlen_q = b == INT32_MAX ? INT32_MAX : int64_t(1) << 21;
            m.num_heads = b == INT32_MAX ? INT32_MAX : int64_t(1) << 22;
            m.head_dim = 8;
            m.part_strides = m.o_strides = {0, 0, 0, 1};  // strides come after the sizes
            INFO("batch " << m.batch << " seqlen_q " << m.seqlen_q << " num_heads " << m.num_heads);
            expect_merge_rejected(m, FMHA_STATUS_NOT_SUPPORTED,
                                  {"merge_descriptor", std::to_string(m.num_heads).c_str(),
                                   "2^31-1"});
        }
        fmha_merge_descriptor m = merge_desc();
        m.batch = 1;
        m.seqlen_q = 1 << 16;
        m.num_heads = 1 << 15;  // 2^31 pairs: one too many
        expect_merge_rejected(m, FMHA_STATUS_NOT_SUPPORTED, {"merge_descriptor", "2^31-1"});
    }
    SECTION("head_dim: a multiple of 8 from 8 to 512") {
        for (int64_t hd : {0, 4, 12, 100, 520, 1024, -8}) {
            fmha_merge_descriptor m = merge_desc();
            m.head_dim = hd;
            INFO("head_dim " << hd);
            expect_merge_rejected(m, FMHA_STATUS_NOT_SUPPORTED,
                                  {"merge_descriptor.head_dim", std::to_string(hd).c_str()});
        }
    }
    SECTION("dtype, flags, device, reserved0") {
        fmha_merge_descriptor m = merge_desc();
        m.dtype = 3;
        expect_merge_rejected(m, FMHA_STATUS_INVALID_ARGUMENT, {"merge_descriptor.dtype", "3"});
        m = merge_desc();
        m.flags = FMHA_FLAG_WRITE_LSE | FMHA_FLAG_SINKS;
        expect_merge_rejected(m, FMHA_STATUS_INVALID_ARGUMENT, {"merge_descriptor.flags"});
        m = merge_desc();
        m.flags = FMHA_FLAG_VARLEN_Q;
        expect_merge_rejected(m, FMHA_STATUS_INVALID_ARGUMENT, {"merge_descriptor.flags"});
        m = merge_desc();
        m.device = -1;
        expect_merge_rejected(m, FMHA_STATUS_INVALID_ARGUMENT, {"merge_descriptor.device", "-1"});
        m = merge_desc();
        m.reserved0 = 7;
        expect_merge_rejected(m, FMHA_STATUS_INVALID_ARGUMENT, {"merge_descriptor.reserved0", "7"});
    }
    SECTION("strides") {
        fmha_merge_descriptor m = merge_desc();
        m.part_strides.dim = 2;
        expect_merge_rejected(m, FMHA_STATUS_NOT_SUPPORTED, {"part_strides.dim"});
        m = merge_desc();
        m.part_strides.seq += 4;
        expect_merge_rejected(m, FMHA_STATUS_MISALIGNED,
                              {"part_strides.seq", std::to_string(m.part_strides.seq).c_str()});
        m = merge_desc();
        m.o_strides.head = 20;
        expect_merge_rejected(m, FMHA_STATUS_MISALIGNED, {"o_strides.head", "20"});
        m = merge_desc();
        m.o_strides.batch = -m.o_strides.batch;
        expect_merge_rejected(m, FMHA_STATUS_NOT_SUPPORTED, {"o_strides.batch", "negative"});
        m = merge_desc();
        m.o_strides.seq = 64;  // rows of one head overlap
        expect_merge_rejected(m, FMHA_STATUS_INVALID_ARGUMENT, {"o_strides.seq", "overlap"});
        // Parts are inputs: a broadcast part (stride 0) is allowed.
        m = merge_desc();
        m.part_strides.batch = 0;
        expect_merge_valid(m);
    }
}

// ---- the serving test support itself --------------------------------------------

namespace {

ServingCase small_serving_case() {
    return serving_case(FMHA_DTYPE_FP16, 64, 4, 2)
        .varlen_q({5, 0, 17, 1, 33}, 4)
        .paged(16, {40, 7, 100, 0, 90})  // keys the pages hold
        .seqused({33, 7, 100, 0, 70})
        .mask(FMHA_MASK_CAUSAL_BOTTOM_RIGHT)
        .window(20)
        .softcap(15.0f)
        .sinks()
        .seed(99);
}

size_t count_non_nan(const std::vector<uint16_t> &v, fmha_dtype dt) {
    size_t n = 0;
    for (uint16_t x : v) n += !is_nan_lowp(x, dt);
    return n;
}

}  // namespace

TEST_CASE("serving support: generator invariants", "[cpu][support][serving]") {
    ServingCase c = small_serving_case();
    ServingHost host(c);
    const fmha_descriptor d = host.descriptor();
    FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_check_support(&d, FMHA_SM_ANY));
    CHECK(d.total_q == 5 + 0 + 17 + 1 + 33 + 4);
    CHECK(d.seqlen_q == 33);
    CHECK(d.seqlen_k == 100);
    CHECK(d.flags == (FMHA_FLAG_WRITE_LSE | FMHA_FLAG_SINKS | FMHA_FLAG_VARLEN_Q |
                      FMHA_FLAG_SEQUSED_K | FMHA_FLAG_PAGED_KV));
    // Inputs exist exactly where a run reads them; NaN everywhere else.
    int64_t q_rows = 0, k_rows = 0;
    for (int64_t b = 0; b < c.batch(); ++b) {
        q_rows += c.eff_q(b);
        k_rows += c.eff_k(b);
    }
    CHECK(count_non_nan(host.host_q(), c.dtype) == size_t(q_rows * 4 * 64));
    CHECK(count_non_nan(host.host_k(), c.dtype) == size_t(k_rows * 2 * 64));
    CHECK(count_non_nan(host.host_v(), c.dtype) == size_t(k_rows * 2 * 64));
    // The used pages are distinct and in range, the rest of each row is not;
    // fmha_check_block_table agrees with both.
    const std::vector<int32_t> &bt = host.host_block_table();
    std::set<int32_t> seen;
    for (int64_t b = 0; b < c.batch(); ++b)
        for (int64_t i = 0; i < host.pages_used(b); ++i) {
            const int32_t page = bt[size_t(b * host.max_pages_per_seq() + i)];
            CHECK(page >= 0);
            CHECK(page < host.num_pages());
            CHECK(seen.insert(page).second);
        }
    FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_check_block_table(&d, bt.data(), c.seqused.data()));
    FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_check_block_table(&d, bt.data(), nullptr));
    CHECK(std::string(fmha_last_error_message()).find("block_table[") != std::string::npos);
    // Sequences 0, 2 and 4 use keys; the work estimate is positive.
    CHECK(c.reference_work() > 0);
    CHECK(c.name().find("paged16") != std::string::npos);
}

TEST_CASE("serving support: references match reference_fp64/reference_lowp", "[cpu][support][serving]") {
    SECTION("a dense case, bitwise") {
        const ServingCase c = serving_case(FMHA_DTYPE_BF16, 64, 4, 1)
                                  .q({23, 23})
                                  .k({51, 51})
                                  .mask(FMHA_MASK_CAUSAL_TOP_LEFT)
                                  .window(9)
                                  .sinks()
                                  .layout(Layout::SLICED);
        ServingHost host(c);
        RefProblem p;
        p.dtype = c.dtype;
        p.batch = 2;
        p.num_q_heads = 4;
        p.num_kv_heads = 1;
        p.seqlen_q = 23;
        p.seqlen_k = 51;
        p.head_dim = 64;
        p.mask = c.mask;
        p.softmax_scale = double(1.0f / std::sqrt(64.0f));
        p.q = p.o = host.q_layout.strides;
        p.k = p.v = host.k_layout.strides;
        p.window_left = c.window_left;
        for (float s : host.host_sinks()) p.sinks.push_back(s);
        const RefResult r64 = reference_fp64(p, host.host_q().data() + host.q_layout.offset,
                                             host.host_k().data() + host.k_layout.offset,
                                             host.host_v().data() + host.k_layout.offset);
        const RefResult rlp = reference_lowp(p, host.host_q().data() + host.q_layout.offset,
                                             host.host_k().data() + host.k_layout.offset,
                                             host.host_v().data() + host.k_layout.offset);
        const ServingRef &s64 = host.ref64();
        const ServingRef &slp = host.ref_lowp();
        int mismatches = 0;
        for (int64_t b = 0; b < 2; ++b)
            for (int64_t h = 0; h < 4; ++h)
                for (int64_t i = 0; i < 23; ++i) {
                    const size_t row = size_t(host.row_index(b, i));
                    const size_t ref_row = size_t((b * 4 + h) * 23 + i);
                    mismatches += s64.lse[row * 4 + size_t(h)] != r64.lse[ref_row];
                    mismatches += slp.lse[row * 4 + size_t(h)] != rlp.lse[ref_row];
                    for (int64_t d = 0; d < 64; ++d) {
                        mismatches += s64.o[(row * 4 + size_t(h)) * 64 + size_t(d)] !=
                                      r64.o[ref_row * 64 + size_t(d)];
                        mismatches += slp.o[(row * 4 + size_t(h)) * 64 + size_t(d)] !=
                                      rlp.o[ref_row * 64 + size_t(d)];
                    }
                }
        CHECK(mismatches == 0);
    }
    SECTION("a varlen + paged case, per sequence through a dense copy of its pages") {
        ServingCase c = small_serving_case();
        ServingHost host(c);
        const ServingRef &s64 = host.ref64();
        const int64_t Hq = 4, Hkv = 2, D = 64, ps = c.page_size;
        const fmha_strides ks = host.k_layout.strides;
        double worst = 0;
        int64_t rows_checked = 0;
        for (int64_t b = 0; b < c.batch(); ++b) {
            const int64_t lq = c.eff_q(b), lk = c.eff_k(b);
            if (lq == 0) continue;
            // Gather this sequence's keys from its pages, by hand.
            std::vector<uint16_t> k(size_t(std::max<int64_t>(lk, 1) * Hkv * D)), v(k.size());
            for (int64_t j = 0; j < lk; ++j) {
                const int64_t page =
                    host.host_block_table()[size_t(b * host.max_pages_per_seq() + j / ps)];
                for (int64_t h = 0; h < Hkv; ++h)
                    for (int64_t d = 0; d < D; ++d) {
                        const size_t src = size_t(host.k_layout.offset + page * ks.batch +
                                                  (j % ps) * ks.seq + h * ks.head + d);
                        k[size_t((j * Hkv + h) * D + d)] = host.host_k()[src];
                        v[size_t((j * Hkv + h) * D + d)] = host.host_v()[src];
                    }
            }
            RefProblem p;
            p.dtype = c.dtype;
            p.num_q_heads = Hq;
            p.num_kv_heads = Hkv;
            p.seqlen_q = lq;
            p.seqlen_k = std::max<int64_t>(lk, 1);
            p.head_dim = D;
            p.mask = c.mask;
            p.softmax_scale = double(1.0f / std::sqrt(64.0f));
            p.q = p.o = host.q_layout.strides;
            p.q.batch = 0;
            p.k = p.v = {0, Hkv * D, D, 1};
            p.window_left = c.window_left;
            p.softcap = c.softcap;
            for (float s : host.host_sinks()) p.sinks.push_back(s);
            if (lk == 0) continue;  // (RefProblem needs a key; covered below)
            const uint16_t *q = host.host_q().data() + host.q_layout.offset +
                                host.host_cu_q()[size_t(b)] * host.q_layout.strides.seq;
            const RefResult r = reference_fp64(p, q, k.data(), v.data());
            for (int64_t h = 0; h < Hq; ++h)
                for (int64_t i = 0; i < lq; ++i) {
                    const size_t row = size_t(host.row_index(b, i));
                    worst = std::max(worst, std::fabs(s64.lse[row * Hq + size_t(h)] -
                                                      r.lse[size_t(h * lq + i)]));
                    for (int64_t d = 0; d < D; ++d)
                        worst = std::max(worst, std::fabs(s64.o[(row * Hq + size_t(h)) * D + size_t(d)] -
                                                          r.o[size_t((h * lq + i) * D + d)]));
                    ++rows_checked;
                }
        }
        CHECK(rows_checked > 0);
        CHECK(worst <= 1e-12);
        // Sequence 3 has one row and no key: O = 0 and LSE = its head's sink.
        for (int64_t h = 0; h < Hq; ++h) {
            const size_t row = size_t(host.row_index(3, 0));
            CHECK(s64.lse[row * Hq + size_t(h)] == double(host.host_sinks()[size_t(h)]));
            for (int64_t d = 0; d < D; ++d) CHECK(s64.o[(row * Hq + size_t(h)) * D + size_t(d)] == 0.0);
        }
    }
}

TEST_CASE("serving support: compare() passes correct outputs and catches wrong ones",
          "[cpu][support][serving]") {
    ServingCase c = small_serving_case();
    c.sinks = false;  // so rows that see no key have LSE = -inf
    c.window_left = 3;
    ServingHost host(c);
    const Outputs good = host.expected_outputs();
    Comparison ok = host.compare(good);
    INFO(ok.detail);
    CHECK(ok.o_ok);
    CHECK(ok.lse_ok);
    CHECK(ok.all_written);
    CHECK(ok.gaps_untouched);
    CHECK(ok.masked_rows_ok);
    CHECK(ok.masked_rows > 0);  // sequence 3 sees no key
    SECTION("an extra row written") {
        Outputs o = good;
        const int64_t extra_row = host.total_q() - 1;  // past cu_seqlens_q[batch]
        o.o[size_t(host.q_layout.offset + extra_row * host.q_layout.strides.seq)] = 0;
        Comparison r = host.compare(o);
        CHECK_FALSE(r.gaps_untouched);
    }
    SECTION("an LSE entry of an extra row written") {
        Outputs o = good;
        o.lse[size_t(host.total_q() - 1)] = 0.0f;
        CHECK_FALSE(host.compare(o).gaps_untouched);
    }
    SECTION("an element left unwritten") {
        Outputs o = good;
        o.o[size_t(host.o_element(2, 5, 1, 7))] = kOutputPrefill16;
        Comparison r = host.compare(o);
        CHECK_FALSE(r.all_written);
        CHECK_FALSE(r.o_ok);
    }
    SECTION("an element off by a lot") {
        Outputs o = good;
        const size_t at = size_t(host.o_element(4, 30, 3, 0));
        o.o[at] = float_to_lowp(lowp_to_float(o.o[at], c.dtype) + 0.25f, c.dtype);
        CHECK_FALSE(host.compare(o).o_ok);
    }
    SECTION("a row that sees no key with O != 0 or LSE != -inf") {
        Outputs o = good;
        o.o[size_t(host.o_element(3, 0, 0, 0))] = float_to_lowp(1e-3f, c.dtype);
        CHECK_FALSE(host.compare(o).masked_rows_ok);
        o = good;
        o.lse[size_t(host.lse_entry(3, 0, 2))] = 0.0f;
        CHECK_FALSE(host.compare(o).masked_rows_ok);
    }
    SECTION("an LSE far off") {
        Outputs o = good;
        o.lse[size_t(host.lse_entry(0, 4, 1))] += 0.5f;
        CHECK_FALSE(host.compare(o).lse_ok);
    }
}

TEST_CASE("serving support: merge references", "[cpu][support][serving]") {
    MergeInput in;
    in.dtype = FMHA_DTYPE_BF16;
    in.batch = 1;
    in.seqlen_q = 3;
    in.num_heads = 1;
    in.head_dim = 8;
    const double ninf = -std::numeric_limits<double>::infinity();
    // Row 0: weights 1/4 and 3/4. Row 1: only part 1 saw keys. Row 2: no part did.
    in.lse = {{std::log(1.0), ninf, ninf}, {std::log(3.0), 0.5, ninf}};
    in.o.assign(2, std::vector<double>(3 * 8, 0.0));
    for (int d = 0; d < 8; ++d) {
        in.o[0][size_t(d)] = 4.0;
        in.o[1][size_t(d)] = 8.0;
        in.o[0][size_t(8 + d)] = 1000.0;  // garbage in a part whose LSE is -inf
        in.o[1][size_t(8 + d)] = -2.0;
        in.o[0][size_t(16 + d)] = 77.0;
        in.o[1][size_t(16 + d)] = 77.0;
    }
    for (const RefResult &r : {merge_reference_fp64(in), merge_reference_lowp(in)}) {
        CHECK(std::fabs(r.o[0] - 7.0) < 1e-6);  // 4/4 + 8*3/4
        CHECK(std::fabs(r.lse[0] - std::log(4.0)) < 1e-6);
        CHECK(r.o[8] == -2.0);
        CHECK(std::fabs(r.lse[1] - 0.5) < 1e-7);
        CHECK(r.o[16] == 0.0);
        CHECK(std::isinf(r.lse[2]));
        CHECK(r.lse[2] < 0);
    }
}

TEST_CASE("serving support: every case of the GPU suites is a valid problem",
          "[cpu][support][serving]") {
    ForceKernelEnv env;
    const struct {
        const char *name;
        std::vector<ServingCase> cases;
    } suites[] = {{"varlen", varlen_suite()},   {"paged", paged_suite()},
                  {"decode", decode_suite()},   {"split", split_suite()},
                  {"features", feature_suite()}, {"sanitize", sanitize_suite()}};
    const bool sm80 = embeds(80);
    double total_work = 0;
    int n = 0;
    for (const auto &suite : suites) {
        CHECK_FALSE(suite.cases.empty());
        double work = 0;
        for (const ServingCase &c : suite.cases) {
            INFO(suite.name << ": " << c.name());
            ServingHost host(c, /*with_inputs=*/false);  // throws on an inconsistent case
            work += c.reference_work();
            ++n;
            std::vector<int32_t> splits = {c.num_splits};
            if (std::string(suite.name) == "split") splits = split_counts();
            for (int32_t s : splits)
                for (fmha_kernel_family k :
                     {FMHA_KERNEL_AUTO, FMHA_KERNEL_PORTABLE, FMHA_KERNEL_DECODE}) {
                    const fmha_descriptor d = host.descriptor(k, s);
                    INFO("kernel " << family_name(k) << ", num_splits " << s);
                    if (k == FMHA_KERNEL_PORTABLE && d.head_dim == 512)  // no device needed to say
                        FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED,
                                          fmha_check_support(&d, FMHA_SM_ANY));
                    else
                        expect_valid(d);
                    if (!sm80) continue;
                    const fmha_status st = fmha_check_support(&d, 80);
                    INFO("sm_80: " << status_name(st) << ": " << fmha_last_error_message());
                    // Every case fits sm_80's 163 KB per block (hd256 and hd512
                    // decode on the compact tile).
                    if (documented_unsupported(d))
                        CHECK(st == FMHA_STATUS_NOT_SUPPORTED);
                    else CHECK(st == FMHA_STATUS_SUCCESS);
                }
            // The Hopper kernel takes every case at every split count on sm_90:
            // the GPU suites count a forced Hopper run it declines as a failure.
            if (embeds(90))
                for (int32_t s : splits) {
                    const fmha_descriptor d = host.descriptor(FMHA_KERNEL_HOPPER, s);
                    INFO("kernel hopper, num_splits " << s);
                    expect_valid(d, 90);
                }
            if (c.keys == KeyLayout::PAGED) {
                std::vector<int32_t> lens;
                for (int64_t b = 0; b < c.batch(); ++b) lens.push_back(int32_t(c.eff_k(b)));
                const fmha_descriptor d = host.descriptor();
                FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS,
                                  fmha_check_block_table(&d, host.host_block_table().data(), lens.data()));
            }
        }
        std::printf("serving suite %s: %zu cases, reference work %.3g\n", suite.name,
                    suite.cases.size(), work);
        total_work += work;
    }
    // The float64 and same-precision references of every case (each computed
    // once per case, not per kernel family) must stay affordable: about 1e9
    // of these units per second per core.
    std::printf("serving suites: %d cases, reference work %.3g\n", n, total_work);
    CHECK(total_work < 2.7e10);
}

TEST_CASE("serving support: the large-offset cases are valid and lie past 2^36 bytes",
          "[cpu][support][serving][large-offsets]") {
    ForceKernelEnv env;
    const std::vector<ServingCase> cases = large_offset_suite();
    CHECK(cases.size() >= 10);
    double work = 0;
    for (const ServingCase &c : cases) {
        INFO(c.name());
        const FarData far(c, FarPlacement{}, /*on_device=*/false);
        INFO(far.placement());
        work += c.reference_work();
        // Past a 32-bit offset in 16-byte units, hence past every narrower one.
        CHECK(far.largest_offset() > (uint64_t(1) << 36));
        for (fmha_kernel_family k : {FMHA_KERNEL_AUTO, FMHA_KERNEL_PORTABLE, FMHA_KERNEL_DECODE,
                                     FMHA_KERNEL_HOPPER}) {
            const fmha_descriptor d = far.descriptor(k, c.num_splits);
            INFO("kernel " << family_name(k));
            if (k == FMHA_KERNEL_PORTABLE && d.head_dim == 512)  // no device needed to say
                FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, fmha_check_support(&d, FMHA_SM_ANY));
            else if (k != FMHA_KERNEL_HOPPER)
                expect_valid(d);
            // On sm_90 every case runs on the Hopper kernel too: its TMA maps
            // take the moved strides (the GPU suite requires the runs).
            if (embeds(90) && (k == FMHA_KERNEL_HOPPER || k == FMHA_KERNEL_AUTO))
                expect_valid(d, 90);
        }
        if (c.keys == KeyLayout::PAGED) {
            std::vector<int32_t> lens;
            for (int64_t b = 0; b < c.batch(); ++b) lens.push_back(int32_t(c.eff_k(b)));
            const fmha_descriptor d = far.descriptor();
            FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS,
                              fmha_check_block_table(&d, far.far_block_table().data(), lens.data()));
        }
    }
    std::printf("large-offset suite: %zu cases, reference work %.3g\n", cases.size(), work);
    CHECK(work < 3e9);
}

TEST_CASE("serving support: the sanitizer cases' expected outputs pass compare()",
          "[cpu][support][serving]") {
    for (const ServingCase &c : sanitize_suite()) {
        INFO(c.name());
        ServingHost host(c);
        const Comparison cmp = host.compare(host.expected_outputs());
        INFO(cmp.detail);
        CHECK(cmp.o_ok);
        CHECK(cmp.lse_ok);
        CHECK(cmp.all_written);
        CHECK(cmp.gaps_untouched);
        CHECK(cmp.masked_rows_ok);
    }
}
