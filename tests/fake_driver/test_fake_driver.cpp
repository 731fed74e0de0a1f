// Plan creation and fmha_run against a fake CUDA driver (FMHA_LIBCUDA points
// at libfmha_fake_cuda.so): device selection, image choice per compute
// capability, shared-memory limits, context handling, launch geometry,
// driver-error reporting and graph-capture safety, all without a GPU.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fake_cuda.h"
#include "fmha/fmha.h"
#include "fmha_catch.h"
#include "fmha_test/archs.h"
#include "fmha_test/layout.h"

using namespace fmha_test;

namespace {

// Before main, so the library's first (and only) driver load finds the fake.
const bool g_env_set = [] {
    setenv("FMHA_LIBCUDA", FMHA_FAKE_CUDA_PATH, 1);
    unsetenv("FMHA_FORCE_KERNEL");
    return true;
}();

struct Fake {
    void *handle = nullptr;
    fake_cuda_reset_fn reset;
    fake_cuda_configure_fn configure;
    fake_cuda_fail_fn fail;
    fake_cuda_get_stats_fn get_stats;
    fake_cuda_last_launch_fn last_launch;
    fake_cuda_previous_launch_fn previous_launch;
    fake_cuda_set_in_run_fn set_in_run;
    fake_cuda_context_fn context;
    fake_cuda_push_fn push;
    fake_cuda_pop_fn pop;

    Fake() {
        handle = dlopen(FMHA_FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
        REQUIRE(handle != nullptr);
        reset = sym<fake_cuda_reset_fn>("fake_cuda_reset");
        configure = sym<fake_cuda_configure_fn>("fake_cuda_configure");
        fail = sym<fake_cuda_fail_fn>("fake_cuda_fail");
        get_stats = sym<fake_cuda_get_stats_fn>("fake_cuda_get_stats");
        last_launch = sym<fake_cuda_last_launch_fn>("fake_cuda_last_launch");
        previous_launch = sym<fake_cuda_previous_launch_fn>("fake_cuda_previous_launch");
        set_in_run = sym<fake_cuda_set_in_run_fn>("fake_cuda_set_in_run");
        context = sym<fake_cuda_context_fn>("fake_cuda_context");
        push = sym<fake_cuda_push_fn>("fake_cuda_push");
        pop = sym<fake_cuda_pop_fn>("fake_cuda_pop");
        reset();
    }
    template <typename T>
    T sym(const char *name) {
        void *p = dlsym(handle, name);
        INFO(name);
        REQUIRE(p != nullptr);
        return reinterpret_cast<T>(p);
    }
    fake_cuda_stats stats() {
        fake_cuda_stats s;
        get_stats(&s);
        return s;
    }
};

Fake &fake() {
    static Fake *f = new Fake;
    return *f;
}

// Fresh fake state for one test (the loaded driver and module cache stay).
Fake &fresh_fake(int sm = 80) {
    Fake &f = fake();
    f.reset();
    f.configure("sm", sm);
    return f;
}

int next_context_id() {
    static int id = 0;
    return ++id;
}

fmha_descriptor make_desc(fmha_dtype dt = FMHA_DTYPE_BF16, int64_t hd = 128,
                          Layout layout = Layout::BSHD, int64_t sq = 300, int64_t sk = 520) {
    fmha_descriptor d;
    REQUIRE(fmha_descriptor_init(&d, FMHA_DESCRIPTOR_VERSION) == FMHA_STATUS_SUCCESS);
    d.dtype = dt;
    d.batch = 3;
    d.num_q_heads = 8;
    d.num_kv_heads = 2;
    d.seqlen_q = sq;
    d.seqlen_k = sk;
    d.head_dim = hd;
    d.q_strides = d.o_strides = make_layout(layout, d.batch, sq, 8, hd).strides;
    d.k_strides = d.v_strides = make_layout(layout, d.batch, sk, 2, hd).strides;
    d.flags = FMHA_FLAG_WRITE_LSE;
    // This small problem (72 portable CTAs) would split on the portable
    // kernel and need a workspace; the tests of split-KV ask for it.
    d.num_splits = 1;
    return d;
}

// Two BSHD parts of 4 rows x 2 heads x 128 merged into one.
fmha_merge_descriptor make_merge_desc() {
    fmha_merge_descriptor m;
    REQUIRE(fmha_merge_descriptor_init(&m, FMHA_MERGE_DESCRIPTOR_VERSION) == FMHA_STATUS_SUCCESS);
    m.batch = 1;
    m.seqlen_q = 4;
    m.num_heads = 2;
    m.head_dim = 128;
    m.num_parts = 2;
    REQUIRE(fmha_strides_bshd(&m.part_strides, 4, 2, 128) == FMHA_STATUS_SUCCESS);
    m.o_strides = m.part_strides;
    return m;
}

// Never dereferenced by the fake: only alignment matters.
alignas(256) unsigned char g_fake_memory[4096];

// The combine's grid (split_kv.cpp, combine_team): a team of whole warps per
// (row, head) covering its 4-column chunks, doubled up to the CTA's 128
// threads (never past them: 96 becomes 128) while a thread would sum more
// than 4 parts; 128 / team teams per CTA.
unsigned expected_combine_ctas(int64_t pairs, int64_t head_dim, int parts) {
    const int64_t chunks = head_dim / 4;
    int64_t team = (chunks + 31) / 32 * 32;
    while (team < 128 && parts > 4 * (team / chunks)) team = std::min<int64_t>(2 * team, 128);
    const int64_t per_cta = 128 / team;
    return unsigned((pairs + per_cta - 1) / per_cta);
}

fmha_tensors fake_tensors() {
    fmha_tensors t;
    REQUIRE(fmha_tensors_init(&t, FMHA_TENSORS_VERSION) == FMHA_STATUS_SUCCESS);
    t.q = g_fake_memory;
    t.k = g_fake_memory + 256;
    t.v = g_fake_memory + 512;
    t.o = g_fake_memory + 768;
    t.lse = reinterpret_cast<float *>(g_fake_memory + 1024);
    return t;
}
void *fake_workspace() { return g_fake_memory + 2048; }

struct Plan {
    fmha_plan *p = nullptr;
    ~Plan() { fmha_destroy_plan(p); }
};

fmha_status create(Plan &plan, const fmha_descriptor &d) {
    return fmha_create_plan(&plan.p, &d);
}

// The sm of the cubin that a device of compute capability `sm` runs from this
// build's FMHA_CUDA_ARCHS ("80,90a,100,120"), 0 if none: the newest of the
// same major revision at or below it, an arch-specific one ("90a") only on its
// own sm, a family one ("100f") like a plain one (CUDA's binary compatibility
// rule).
int expected_cubin(int sm) {
    int best = 0;
    std::stringstream ss(FMHA_TEST_BUILD_ARCHS);
    std::string arch;
    while (std::getline(ss, arch, ',')) {
        if (arch.empty()) continue;
        const int a = std::stoi(arch);
        const bool specific = arch.back() == 'a';
        const bool runs = specific ? a == sm : (a / 10 == sm / 10 && a <= sm);
        if (runs && a > best) best = a;
    }
    return best;
}

fmha_plan_info info_of(const fmha_plan *p) {
    fmha_plan_info i;
    fmha_plan_info_init(&i, FMHA_PLAN_INFO_VERSION);
    REQUIRE(fmha_plan_get_info(p, &i) == FMHA_STATUS_SUCCESS);
    return i;
}

// The last launch of a run, checked against what the plan reports: the
// kernel it names, its threads and its shared memory.
fake_cuda_launch launch_as_planned(Fake &f, const fmha_plan_info &i) {
    fake_cuda_launch l;
    REQUIRE(f.last_launch(&l) == 1);
    CHECK(std::string(l.kernel) == i.kernel_name);
    CHECK(l.block[0] == static_cast<unsigned>(i.threads_per_cta));
    CHECK(l.shared_bytes == static_cast<unsigned>(i.shared_memory_bytes));
    return l;
}

// A decode entry point's name in its keys-on-M form (at most 8 query rows per
// KV head on sm_90; launch_decode.cpp, keys_on_m): "_r8" before the dtype.
std::string keys_on_m_name(const std::string &name) {
    const size_t at = name.find(name.find("_bf16") != std::string::npos ? "_bf16" : "_fp16");
    return name.substr(0, at) + "_r8" + name.substr(at);
}

std::string expected_portable_name(fmha_dtype dt, int64_t hd) {
    return std::string("fmha_fwd_portable_") + (dt == FMHA_DTYPE_BF16 ? "bf16" : "fp16") + "_hd" +
           std::to_string(hd);
}

}  // namespace

TEST_CASE("the fake driver is what libfmha loads", "[cpu][fake-driver]") {
    Fake &f = fresh_fake();
    int32_t version = 0;
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_driver_version(&version));
    CHECK(version == 12080);
    (void)f;
}

TEST_CASE("fake sm_80: portable plans for every dtype and head dim", "[cpu][fake-driver]") {
    Fake &f = fresh_fake(80);
    const int retained = f.stats().primary_retained;
    for (fmha_dtype dt : {FMHA_DTYPE_BF16, FMHA_DTYPE_FP16})
        for (int64_t hd : {64, 96, 128, 256}) {
            INFO("dtype " << dt << " hd " << hd);
            Plan plan;
            FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, make_desc(dt, hd)));
            fmha_plan_info i = info_of(plan.p);
            CHECK(i.kernel_family == FMHA_KERNEL_PORTABLE);
            REQUIRE(i.kernel_name != nullptr);
            CHECK(std::string(i.kernel_name) == expected_portable_name(dt, hd));
            CHECK(i.device == 0);
            CHECK(i.device_sm == 80);
            if (embeds(80)) {
                CHECK(i.image_sm == 80);
                CHECK(i.image_is_ptx == 0);
            }
            CHECK(i.workspace_bytes == 0u);
            CHECK(i.tile_m > 0);
            CHECK(i.threads_per_cta > 0);
            CHECK(f.stats().primary_retained == retained + 1);  // the plan holds the primary context
        }
    CHECK(f.stats().primary_retained == retained);  // and gives it back
}

// The portable kernel's query block: 128 rows, or 64 (the `_short` entry
// points) where no sequence has more than 64 query rows; hd256 has only the
// 64-row block. The launch covers every row with blocks of the planned size.
TEST_CASE("fake sm_80: the portable kernel's query block follows seqlen_q", "[cpu][fake-driver]") {
    Fake &f = fresh_fake(80);
    for (int64_t hd : {64, 96, 128, 256})
        for (int64_t sq : {1, 64, 65, 128, 129, 300}) {
            INFO("hd " << hd << " seqlen_q " << sq);
            fmha_descriptor d = make_desc(FMHA_DTYPE_FP16, hd, Layout::BSHD, sq);
            d.kernel = FMHA_KERNEL_PORTABLE;
            d.num_splits = 1;  // small grids split (a test of its own below)
            Plan plan;
            FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
            const fmha_plan_info i = info_of(plan.p);
            const bool short_block = sq <= 64 && hd != 256;
            const int64_t block = hd == 256 || sq <= 64 ? 64 : 128;
            CHECK(std::string(i.kernel_name) ==
                  std::string("fmha_fwd_portable") + (short_block ? "_short" : "") + "_fp16_hd" +
                      std::to_string(hd));
            CHECK(i.tile_m == block);
            CHECK(i.tile_n == 64);
            CHECK(i.threads_per_cta == 128);
            // Q plus one K and one V tile of 64 rows, rows padded by 16 bytes.
            CHECK(int64_t(i.shared_memory_bytes) == (block + 128) * (hd + 8) * 2);
            CHECK(i.shared_memory_bytes <= 99 * 1024);  // sm_86/89/120 opt-in limit
            const fmha_tensors t = fake_tensors();
            FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_run(plan.p, &t, nullptr, 0, nullptr));
            const fake_cuda_launch l = launch_as_planned(f, i);
            CHECK(l.grid[0] == static_cast<unsigned>((sq + block - 1) / block * d.num_q_heads * d.batch));
        }
    // Over pages, hd256 keeps its 32-key tile (kernel notes p11).
    fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, 256);
    d.kernel = FMHA_KERNEL_PORTABLE;
    d.flags |= FMHA_FLAG_PAGED_KV | FMHA_FLAG_SEQUSED_K;
    d.page_size = 16;
    d.max_pages_per_seq = (d.seqlen_k + d.page_size - 1) / d.page_size;
    d.num_pages = d.batch * d.max_pages_per_seq;
    REQUIRE(fmha_strides_bshd(&d.k_strides, d.page_size, d.num_kv_heads, 256) == FMHA_STATUS_SUCCESS);
    d.v_strides = d.k_strides;
    Plan plan;
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
    const fmha_plan_info i = info_of(plan.p);
    CHECK(std::string(i.kernel_name) == "fmha_fwd_portable_paged_bf16_hd256");
    CHECK(i.tile_m == 64);
    CHECK(i.tile_n == 32);
    CHECK(i.shared_memory_bytes == (64 + 2 * 32) * (256 + 8) * 2);
}

// Split-KV on the portable kernel: automatic where the grid would not fill
// the SMs' two CTA slots once (splits up to that, each at least 256 keys, at
// most 64), or as asked; the `_split` entry point over (CTAs, splits), then
// the combine over every (row, head), as a programmatic dependent on sm_90.
TEST_CASE("fake devices: the portable kernel splits the keys of small grids", "[cpu][fake-driver][run]") {
    struct Shape {
        int64_t hd, q_heads, kv_heads, sq, sk, num_splits, splits;  // num_splits asked, splits expected
    };
    // 108 SMs (as an A100): 216 slots
    const Shape shapes[] = {
        {128, 32, 8, 600, 32768, 0, 1},   // 160 CTAs of 128 rows: over one per SM
        {128, 32, 8, 300, 32768, 0, 2},   // 96 CTAs: 216 / 96
        {128, 8, 2, 64, 32768, 0, 27},    // 8 CTAs of 64 rows: 216 / 8
        {128, 8, 2, 64, 1000, 0, 3},      // 1000 keys: 3 splits of >= 256
        {128, 8, 2, 64, 300, 0, 1},       // one split's worth of keys
        {128, 4, 1, 64, 100000, 0, 54},   // 4 CTAs: 216 / 4, under the cap of 64
        {128, 1, 1, 64, 100000, 0, 64},   // the cap
        {256, 8, 8, 200, 8192, 0, 6},     // hd256's 64-row block: 32 CTAs
        {64, 32, 8, 300, 4096, 5, 5},     // asked for, whatever the grid
        {96, 8, 2, 64, 4096, 1, 1},       // asked not to split
    };
    for (const int sm : {80, 90}) {
        if (!embeds(sm)) continue;
        for (const Shape &sh : shapes) {
            Fake &f = fresh_fake(sm);
            f.configure("sms", 108);
            fmha_descriptor d = make_desc(FMHA_DTYPE_FP16, sh.hd, Layout::BSHD, sh.sq, sh.sk);
            d.batch = 1;
            d.num_q_heads = sh.q_heads;
            d.num_kv_heads = sh.kv_heads;
            d.q_strides = d.o_strides = make_layout(Layout::BSHD, 1, sh.sq, sh.q_heads, sh.hd).strides;
            d.k_strides = d.v_strides = make_layout(Layout::BSHD, 1, sh.sk, sh.kv_heads, sh.hd).strides;
            d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
            d.kernel = FMHA_KERNEL_PORTABLE;
            d.num_splits = int32_t(sh.num_splits);
            Plan plan;
            INFO("sm_" << sm << " hd" << sh.hd << " H" << sh.q_heads << "/" << sh.kv_heads << " sq "
                       << sh.sq << " sk " << sh.sk << " num_splits " << sh.num_splits);
            FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
            const fmha_plan_info i = info_of(plan.p);
            CHECK(i.kernel_family == FMHA_KERNEL_PORTABLE);
            CHECK(i.num_splits == sh.splits);
            const bool short_block = sh.sq <= 64 && sh.hd != 256;
            CHECK(std::string(i.kernel_name) ==
                  std::string("fmha_fwd_portable") + (short_block ? "_short" : "") + "_fp16_hd" +
                      std::to_string(sh.hd) + (sh.splits > 1 ? "_split" : ""));
            const uint64_t partials = uint64_t(sh.sq * sh.q_heads) * sh.splits;  // rows x heads
            CHECK(i.workspace_bytes ==
                  (sh.splits > 1 ? (partials * sh.hd * 4 + 255) / 256 * 256 + (partials * 4 + 255) / 256 * 256
                                 : 0u));
            const fmha_tensors t = fake_tensors();
            const int launches = f.stats().launches;
            if (i.workspace_bytes > 0)  // the partials need the workspace
                FMHA_CHECK_STATUS(FMHA_STATUS_WORKSPACE_TOO_SMALL, fmha_run(plan.p, &t, nullptr, 0, nullptr));
            CHECK(f.stats().launches == launches);
            FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                                fmha_run(plan.p, &t, fake_workspace(), i.workspace_bytes, nullptr));
            CHECK(f.stats().launches == launches + (sh.splits > 1 ? 2 : 1));
            const unsigned ctas = unsigned((sh.sq + i.tile_m - 1) / i.tile_m * sh.q_heads);
            fake_cuda_launch l;
            REQUIRE(f.last_launch(&l) == 1);
            if (sh.splits > 1) {
                fake_cuda_launch k;
                REQUIRE(f.previous_launch(&k) == 1);
                CHECK(std::string(k.kernel) == i.kernel_name);
                CHECK(k.grid[0] == ctas);
                CHECK(k.grid[1] == unsigned(sh.splits));
                CHECK(k.grid[2] == 1u);
                CHECK(k.programmatic == 0);
                CHECK(std::string(l.kernel).find("fmha_combine_splits_fp16") == 0);
                CHECK(l.grid[0] == expected_combine_ctas(sh.sq * sh.q_heads, sh.hd, int(sh.splits)));
                CHECK(l.programmatic == (sm >= 90 && i.image_sm >= 90 ? 1 : 0));
            } else {
                CHECK(std::string(l.kernel) == i.kernel_name);
                CHECK(l.grid[0] == ctas);
                CHECK(l.grid[1] == 1u);
            }
        }
    }
}

TEST_CASE("fake devices: which image each compute capability gets", "[cpu][fake-driver]") {
    const int ptx = fmha_embedded_ptx_arch();
    INFO("FMHA_CUDA_ARCHS of this build: " << FMHA_TEST_BUILD_ARCHS);
    for (int sm : {80, 86, 89, 90, 100, 103, 110, 120, 121}) {
        Fake &f = fresh_fake(sm);
        (void)f;
        for (int family : {FMHA_KERNEL_AUTO, FMHA_KERNEL_PORTABLE}) {
            fmha_descriptor d = make_desc();
            d.kernel = family;
            Plan plan;
            fmha_status st = create(plan, d);
            INFO("sm " << sm << " family " << family << ": " << fmha_status_string(st) << ": "
                       << fmha_last_error_message());
            const int cubin_sm = expected_cubin(sm);
            const bool cubin = cubin_sm != 0;
            if (!cubin && !(ptx != 0 && ptx <= sm)) {
                CHECK(st == FMHA_STATUS_NO_KERNEL_IMAGE);
                continue;
            }
            REQUIRE(st == FMHA_STATUS_SUCCESS);
            fmha_plan_info i = info_of(plan.p);
            CHECK(i.device_sm == sm);
            if (cubin) {
                CHECK(i.image_is_ptx == 0);
                CHECK(i.image_sm == cubin_sm);
            } else {
                CHECK(i.image_is_ptx == 1);
                CHECK(i.image_sm == ptx);
            }
            if (family == FMHA_KERNEL_PORTABLE) CHECK(i.kernel_family == FMHA_KERNEL_PORTABLE);
            if (family == FMHA_KERNEL_AUTO && sm == 90 && embeds(90))
                CHECK(i.kernel_family == FMHA_KERNEL_HOPPER);  // the fastest kernel on Hopper
            if (sm != 90) CHECK(i.kernel_family == FMHA_KERNEL_PORTABLE);
        }
    }
}

// The decode kernel, the split combine and the merge are launched as
// programmatic dependents (scheduled while the stream's previous kernel
// drains), which is safe only for kernels that execute griddepcontrol.wait
// before reading memory: those compiled for sm_90+. A device that JIT-compiles
// older PTX (sm_110 in a build with cubins up to sm_100 and sm_120, or sm_103
// where only sm_100a is embedded) must get plain launches.
TEST_CASE("fake devices: programmatic launches only of kernels that wait for their predecessor",
          "[cpu][fake-driver][run]") {
    INFO("FMHA_CUDA_ARCHS of this build: " << FMHA_TEST_BUILD_ARCHS << ", PTX "
                                           << fmha_embedded_ptx_arch());
    for (int sm : {80, 90, 100, 103, 110, 120, 121}) {
        Fake &f = fresh_fake(sm);
        fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, 128, Layout::BSHD, 1, 4096);
        d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
        d.kernel = FMHA_KERNEL_DECODE;
        d.num_splits = 4;
        Plan plan;
        const fmha_status st = create(plan, d);
        INFO("sm " << sm << ": " << fmha_status_string(st) << ": " << fmha_last_error_message());
        if (st == FMHA_STATUS_NO_KERNEL_IMAGE) continue;  // nothing in this build runs there
        REQUIRE(st == FMHA_STATUS_SUCCESS);
        const fmha_plan_info i = info_of(plan.p);
        INFO("image sm_" << i.image_sm << (i.image_is_ptx ? " (PTX)" : ""));
        // The combine image has the decode image's archs, so the same sm.
        const int expected = sm >= 90 && i.image_sm >= 90 ? 1 : 0;
        if (i.image_is_ptx && i.image_sm < 90) CHECK(expected == 0);
        const fmha_tensors t = fake_tensors();
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                            fmha_run(plan.p, &t, fake_workspace(), i.workspace_bytes, nullptr));
        fake_cuda_launch decode, combine;
        REQUIRE(f.previous_launch(&decode) == 1);
        REQUIRE(f.last_launch(&combine) == 1);
        CHECK(std::string(decode.kernel) == i.kernel_name);
        CHECK(std::string(combine.kernel).find("fmha_combine_splits_bf16") == 0);
        CHECK(decode.programmatic == expected);
        CHECK(combine.programmatic == expected);

        fmha_merge_descriptor m = make_merge_desc();
        Plan merge;
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_create_merge_plan(&merge.p, &m));
        const void *o_parts[2] = {g_fake_memory, g_fake_memory};
        const float *lse_parts[2] = {reinterpret_cast<const float *>(g_fake_memory + 512),
                                     reinterpret_cast<const float *>(g_fake_memory + 512)};
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                            fmha_run_merge(merge.p, o_parts, lse_parts, g_fake_memory + 1024,
                                           nullptr, nullptr));
        fake_cuda_launch merged;
        REQUIRE(f.last_launch(&merged) == 1);
        CHECK(merged.programmatic == expected);
        CHECK(f.stats().programmatic_without_wait == 0);
    }
}

TEST_CASE("fake devices: pre-Ampere, no device, bad ordinal", "[cpu][fake-driver]") {
    SECTION("sm_75") {
        fresh_fake(75);
        fmha_descriptor d = make_desc();
        Plan plan;
        FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, create(plan, d));
        CHECK(plan.p == nullptr);
        CHECK(std::string(fmha_last_error_message()).find("sm_75") != std::string::npos);
        FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, fmha_check_support(&d, FMHA_SM_CURRENT_DEVICE));
        fresh_fake(80);
        FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_check_support(&d, FMHA_SM_CURRENT_DEVICE));
    }
    SECTION("no device") {
        Fake &f = fresh_fake(80);
        f.configure("devices", 0);
        const int retained = f.stats().primary_retained;
        Plan plan;
        FMHA_CHECK_STATUS(FMHA_STATUS_NO_DEVICE, create(plan, make_desc()));
        CHECK(plan.p == nullptr);
        CHECK(f.stats().primary_retained == retained);
    }
    SECTION("device ordinal beyond the device count") {
        Fake &f = fresh_fake(80);
        f.configure("devices", 2);
        fmha_descriptor d = make_desc();
        d.device = 2;
        Plan plan;
        FMHA_CHECK_STATUS(FMHA_STATUS_NO_DEVICE, create(plan, d));
        CHECK(std::string(fmha_last_error_message()).find("device is 2") != std::string::npos);
        d.device = 1;
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
        CHECK(info_of(plan.p).device == 1);
    }
}

TEST_CASE("fake devices: kernels needing more shared memory than offered", "[cpu][fake-driver]") {
    for (int64_t hd : {64, 96, 128, 256}) {
        Fake &f = fresh_fake(80);
        Plan big;
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(big, make_desc(FMHA_DTYPE_FP16, hd)));
        const int needed = info_of(big.p).shared_memory_bytes;
        INFO("hd " << hd << " needs " << needed << " bytes of shared memory");
        f.configure("smem_optin", needed - 16);
        Plan small;
        FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, create(small, make_desc(FMHA_DTYPE_FP16, hd)));
        CHECK(std::string(fmha_last_error_message()).find("shared memory") != std::string::npos);
        f.configure("smem_optin", needed);
        FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, create(small, make_desc(FMHA_DTYPE_FP16, hd)));
    }
}

TEST_CASE("fake driver: long key sequences take hd128's wide key tile on sm_90",
          "[cpu][fake-driver][plan]") {
    if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
    for (int64_t hd : {64, 96, 128, 256})
        for (int64_t sk : {4095, 4096, 4097, 9000}) {
            fresh_fake(90);
            Plan plan;
            REQUIRE(create(plan, make_desc(FMHA_DTYPE_FP16, hd, Layout::BSHD, 300, sk)) ==
                    FMHA_STATUS_SUCCESS);
            const fmha_plan_info i = info_of(plan.p);
            INFO("hd " << hd << " sk " << sk << ": " << i.kernel_name);
            REQUIRE(i.kernel_family == FMHA_KERNEL_HOPPER);
            const bool wide = hd == 128 && sk > 4096;
            CHECK((std::string(i.kernel_name).find("_wide") != std::string::npos) == wide);
            CHECK(i.tile_n == (wide ? 192 : hd == 256 ? 80 : 128));
        }
}

// AUTO's plan for bf16 hd128 attention of seqlen_q x seqlen_k under a mask and
// a left window (the name points at the library's static kernel table).
fmha_plan_info windowed_plan(int64_t seqlen_q, int64_t seqlen_k, fmha_mask mask, int32_t left) {
    fresh_fake(90);
    fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, 128, Layout::BSHD, seqlen_q, seqlen_k);
    d.num_splits = 0;  // automatic
    d.mask = mask;
    d.window_left = left;
    Plan plan;
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
    return info_of(plan.p);
}

TEST_CASE("fake driver: windows, softcap and sinks take the Hopper kernel's _scoremod entry points",
          "[cpu][fake-driver][plan]") {
    if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
    struct Shape {
        int32_t left, right;
        float softcap;
        bool sinks;
        bool scoremod;  // expected
    };
    const Shape shapes[] = {{-1, -1, 0, false, false}, {128, -1, 0, false, true},
                            {-1, 0, 0, false, true},   {-1, -1, 30, false, true},
                            {-1, -1, 0, true, true},   {64, 64, 10, true, true}};
    for (const Shape &sh : shapes)
        for (int64_t hd : {64, 96, 128, 256})
            for (int64_t sk : {1000, 5000}) {
                fresh_fake(90);
                fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, hd, Layout::BSHD, 300, sk);
                d.num_splits = 0;  // automatic
                d.window_left = sh.left;
                d.window_right = sh.right;
                d.softcap = sh.softcap;
                if (sh.sinks) d.flags |= FMHA_FLAG_SINKS;
                d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
                d.kernel = FMHA_KERNEL_HOPPER;  // AUTO's choice too: below
                Plan plan;
                INFO("hd " << hd << " sk " << sk << " window " << sh.left << ":" << sh.right
                           << " softcap " << sh.softcap << " sinks " << sh.sinks);
                FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
                const fmha_plan_info i = info_of(plan.p);
                INFO(i.kernel_name);
                CHECK(i.kernel_family == FMHA_KERNEL_HOPPER);
                const std::string name = i.kernel_name;
                CHECK((name.find("_scoremod") != std::string::npos) == sh.scoremod);
                // A left window shortens every key loop: no wide tile.
                CHECK((name.find("_wide") != std::string::npos) == (hd == 128 && sk > 4096 && sh.left < 0));
                // hd64 under a narrow window: 128-row blocks.
                CHECK((name.find("_narrow") != std::string::npos) == (hd == 64 && sh.left >= 0));
            }
    // The narrow-row tile: up to 1024 keys per 128-row block (window + 128),
    // 128 rows and 384 threads per CTA; the kernel's launch agrees.
    for (int32_t left : {0, 127, 896, 897, 4096}) {
        Fake &f = fresh_fake(90);
        fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, 64, Layout::BSHD, 1000, 5000);
        d.num_splits = 0;  // automatic
        d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
        d.window_left = left;
        Plan plan;
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
        const fmha_plan_info i = info_of(plan.p);
        const bool narrow = left <= 896;
        INFO("window_left " << left << ": " << i.kernel_name);
        CHECK((std::string(i.kernel_name) == "fmha_fwd_sm90_bf16_hd64_narrow_scoremod") == narrow);
        CHECK(i.tile_m == (narrow ? 128 : 192));
        CHECK(i.threads_per_cta == (narrow ? 384 : 512));
        const fmha_tensors t = fake_tensors();
        REQUIRE(fmha_run(plan.p, &t, fake_workspace(), 0, nullptr) == FMHA_STATUS_SUCCESS);
        launch_as_planned(f, i);
    }
    // AUTO keeps windows of any width on the Hopper kernel (measured, h6: it
    // beat the portable kernel from 32-key windows, 1.09x, to 1024, 2.5x).
    for (int32_t left : {0, 31, 128, 192, 1024}) {
        const fmha_plan_info i = windowed_plan(2000, 2000, FMHA_MASK_CAUSAL_TOP_LEFT, left);
        INFO("window_left " << left << ": " << i.kernel_name);
        CHECK(i.kernel_family == FMHA_KERNEL_HOPPER);
    }
    // hd128's wide tile: above 4096 keys without a left window, from 8192 keys
    // a block sees (window_left + 128) with one.
    struct WideCase {
        int64_t sk;
        int32_t left;
        bool wide;
    };
    for (const WideCase &w : {WideCase{4097, -1, true}, WideCase{4096, -1, false},
                              WideCase{16384, 4096, false}, WideCase{16384, 8063, false},
                              WideCase{16384, 8064, true}, WideCase{8192, 8192, true}}) {
        const std::string name =
            windowed_plan(1024, w.sk, FMHA_MASK_CAUSAL_BOTTOM_RIGHT, w.left).kernel_name;
        INFO("seqlen_k " << w.sk << " window_left " << w.left << ": " << name);
        CHECK((name.find("_wide") != std::string::npos) == w.wide);
    }
    // A left window bounds a short query's automatic split count: 32 positions x
    // 4 heads per KV head (one block per KV head, 6 blocks) over 32768 keys.
    for (int32_t left : {-1, 1000}) {
        const fmha_plan_info i = windowed_plan(32, 32768, FMHA_MASK_CAUSAL_BOTTOM_RIGHT, left);
        INFO("window_left " << left << ": " << i.kernel_name << " splits " << i.num_splits);
        CHECK(i.kernel_family == FMHA_KERNEL_HOPPER);
        // 132 SMs / 6 blocks = 22; under the window a block sees 1032 keys, 9 tiles
        // of 128 (no wide tile for so short a loop): hd128 splits down to one
        // tile each, 9 splits.
        CHECK(i.num_splits == (left < 0 ? 22 : 9));
    }
}

TEST_CASE("fake driver: hd64 causal prefill up to 2048 keys takes the row-mask entry point",
          "[cpu][fake-driver][plan]") {
    if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
    struct Case {
        fmha_dtype dtype;
        int64_t hd, sk;
        fmha_mask mask;
        float softcap;
        const char *kernel;  // expected
    };
    const Case cases[] = {
        {FMHA_DTYPE_BF16, 64, 512, FMHA_MASK_CAUSAL_TOP_LEFT, 0, "fmha_fwd_sm90_bf16_hd64_rowmask"},
        {FMHA_DTYPE_BF16, 64, 2048, FMHA_MASK_CAUSAL_BOTTOM_RIGHT, 0, "fmha_fwd_sm90_bf16_hd64_rowmask"},
        {FMHA_DTYPE_FP16, 64, 1024, FMHA_MASK_CAUSAL_TOP_LEFT, 0, "fmha_fwd_sm90_fp16_hd64_rowmask"},
        {FMHA_DTYPE_BF16, 64, 2049, FMHA_MASK_CAUSAL_TOP_LEFT, 0, "fmha_fwd_sm90_bf16_hd64"},
        {FMHA_DTYPE_BF16, 64, 1024, FMHA_MASK_NONE, 0, "fmha_fwd_sm90_bf16_hd64"},
        // Score modifiers: the default tile's scoremod entry masks by rows already.
        {FMHA_DTYPE_BF16, 64, 1024, FMHA_MASK_CAUSAL_TOP_LEFT, 30, "fmha_fwd_sm90_bf16_hd64_scoremod"},
        {FMHA_DTYPE_BF16, 128, 1024, FMHA_MASK_CAUSAL_TOP_LEFT, 0, "fmha_fwd_sm90_bf16_hd128"},
    };
    for (const Case &c : cases) {
        Fake &f = fresh_fake(90);
        fmha_descriptor d = make_desc(c.dtype, c.hd, Layout::BSHD, c.sk, c.sk);
        d.mask = c.mask;
        d.softcap = c.softcap;
        d.kernel = FMHA_KERNEL_HOPPER;
        Plan plan;
        INFO("hd " << c.hd << " sk " << c.sk << " mask " << int(c.mask) << " softcap " << c.softcap);
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
        const fmha_plan_info i = info_of(plan.p);
        CHECK(std::string(i.kernel_name) == c.kernel);
        if (c.hd == 64) {  // the same 192-row tile either way
            CHECK(i.tile_m == 192);
            CHECK(i.threads_per_cta == 512);
        }
        const fmha_tensors t = fake_tensors();
        REQUIRE(fmha_run(plan.p, &t, fake_workspace(), 0, nullptr) == FMHA_STATUS_SUCCESS);
        launch_as_planned(f, i);
    }
}

TEST_CASE("fake driver: the Hopper grid is persistent up to 2048 keys (4096 at hd64 and hd128), causal or not",
          "[cpu][fake-driver][run]") {
    if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
    for (int32_t hd : {64, 128, 256})
        for (fmha_mask mask : {FMHA_MASK_NONE, FMHA_MASK_CAUSAL_TOP_LEFT, FMHA_MASK_CAUSAL_BOTTOM_RIGHT})
            for (int64_t sk : {520, 2048, 2049, 4096, 4097, 5000}) {
                Fake &f = fresh_fake(90);
                fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, hd, Layout::BSHD, 2048, sk);
                d.mask = mask;
                Plan plan;
                REQUIRE(create(plan, d) == FMHA_STATUS_SUCCESS);
                const fmha_plan_info i = info_of(plan.p);
                INFO("hd " << hd << " mask " << int(mask) << " sk " << sk << ": " << i.kernel_name);
                REQUIRE(i.kernel_family == FMHA_KERNEL_HOPPER);
                const fmha_tensors t = fake_tensors();
                REQUIRE(fmha_run(plan.p, &t, fake_workspace(), 0, nullptr) == FMHA_STATUS_SUCCESS);
                fake_cuda_launch l;
                REQUIRE(f.last_launch(&l) == 1);
                const long long tiles = (d.seqlen_q + i.tile_m - 1) / i.tile_m * d.num_q_heads * d.batch;
                REQUIRE(tiles > 132);  // so the two grids differ
                const int64_t bound = hd == 64 || hd == 128 ? 4096 : 2048;
                CHECK((long long)l.grid[0] == (sk <= bound ? 132 : tiles));
            }
    // A left window bounds every key loop: persistent when a 128-row block
    // sees at most 4096 keys (window + 128).
    for (int32_t left : {-1, 128, 3968, 3969}) {
        Fake &f = fresh_fake(90);
        fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, 128, Layout::BSHD, 8192, 8192);
        d.mask = FMHA_MASK_CAUSAL_TOP_LEFT;
        d.window_left = left;
        d.kernel = FMHA_KERNEL_HOPPER;
        Plan plan;
        REQUIRE(create(plan, d) == FMHA_STATUS_SUCCESS);
        const fmha_plan_info i = info_of(plan.p);
        const fmha_tensors t = fake_tensors();
        REQUIRE(fmha_run(plan.p, &t, fake_workspace(), 0, nullptr) == FMHA_STATUS_SUCCESS);
        fake_cuda_launch l;
        REQUIRE(f.last_launch(&l) == 1);
        const long long tiles = (d.seqlen_q + i.tile_m - 1) / i.tile_m * d.num_q_heads * d.batch;
        INFO("window_left " << left << ": " << i.kernel_name);
        CHECK((long long)l.grid[0] == (left >= 0 && left <= 3968 ? 132 : tiles));
        // and the key loop is short: hd128 keeps its 128-key tile.
        CHECK((std::string(i.kernel_name).find("_wide") == std::string::npos) == (left >= 0));
    }
}

TEST_CASE("fake driver: fmha_run launches one kernel over every query block",
          "[cpu][fake-driver][run]") {
    for (int sm : {80, 90}) {
        for (Layout layout : {Layout::BSHD, Layout::BHSD, Layout::SLICED})
            for (int64_t hd : {64, 96, 128, 256}) {
                Fake &f = fresh_fake(sm);
                fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, hd, layout);
                Plan plan;
                fmha_status cst = create(plan, d);
                INFO("sm " << sm << " " << layout_name(layout) << " hd " << hd << ": "
                           << fmha_last_error_message());
                if (cst == FMHA_STATUS_NO_KERNEL_IMAGE) continue;  // build without a fitting image
                REQUIRE(cst == FMHA_STATUS_SUCCESS);
                const fmha_plan_info i = info_of(plan.p);
                INFO("kernel " << i.kernel_name);
                const fmha_tensors t = fake_tensors();
                const fake_cuda_stats before = f.stats();
                auto *stream = reinterpret_cast<fmha_stream>(uintptr_t(0x5000));
                f.set_in_run(1);
                fmha_status st = fmha_run(plan.p, &t, fake_workspace(), i.workspace_bytes, stream);
                f.set_in_run(0);
                INFO(fmha_status_string(st) << ": " << fmha_last_error_message());
                REQUIRE(st == FMHA_STATUS_SUCCESS);
                const fake_cuda_stats after = f.stats();
                CHECK(after.launches == before.launches + 1);
                INFO("first call fmha_run should not make: " << after.last_not_allowed);
                CHECK(after.calls_in_run_not_allowed == 0);
                CHECK(after.context_pushes - before.context_pushes ==
                      after.context_pops - before.context_pops);
                CHECK(after.tensor_map_errors == 0);
                fake_cuda_launch l;
                REQUIRE(f.last_launch(&l) == 1);
                CHECK(std::string(l.kernel) == i.kernel_name);
                CHECK(l.stream == static_cast<void *>(stream));
                CHECK(l.programmatic == 0);  // the prefill kernels are plain launches
                CHECK(l.block[0] * l.block[1] * l.block[2] == unsigned(i.threads_per_cta));
                CHECK(int(l.shared_bytes) == i.shared_memory_bytes);
                const long long tiles = (d.seqlen_q + i.tile_m - 1) / i.tile_m * d.num_q_heads * d.batch;
                const long long ctas = (long long)l.grid[0] * l.grid[1] * l.grid[2];
                if (i.kernel_family == FMHA_KERNEL_PORTABLE) {
                    CHECK(ctas == tiles);
                } else {  // one CTA per tile, or a persistent grid of one CTA per SM
                    CHECK((ctas == tiles || ctas == std::min<long long>(tiles, 132)));
                    CHECK(after.tensor_maps == before.tensor_maps + 4);
                    CHECK(i.workspace_bytes == 0u);
                }
            }
    }
}

TEST_CASE("fake driver: a current context is used, the primary one is not retained",
          "[cpu][fake-driver]") {
    Fake &f = fresh_fake(80);
    void *ctx = f.context(0, next_context_id());
    f.push(ctx);
    const int retained = f.stats().primary_retained;
    Plan plan;
    fmha_descriptor d = make_desc();
    d.device = 5;  // ignored: a context is current
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
    CHECK(f.stats().primary_retained == retained);
    CHECK(info_of(plan.p).device == 0);
    const fmha_tensors t = fake_tensors();
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_run(plan.p, &t, nullptr, 0, nullptr));
    fake_cuda_launch l;
    REQUIRE(f.last_launch(&l) == 1);
    CHECK(l.context == ctx);
    f.pop();
    // From a thread with no current context the plan's context is pushed
    // for the launch and popped afterwards.
    fmha_status st = FMHA_STATUS_INTERNAL_ERROR;
    std::thread th([&] { st = fmha_run(plan.p, &t, nullptr, 0, nullptr); });
    th.join();
    CHECK(st == FMHA_STATUS_SUCCESS);
    REQUIRE(f.last_launch(&l) == 1);
    CHECK(l.context == ctx);
    fake_cuda_stats s = f.stats();
    CHECK(s.context_pushes == s.context_pops);
}

TEST_CASE("fake driver: a stream of another context gives CONTEXT_MISMATCH", "[cpu][fake-driver]") {
    Fake &f = fresh_fake(80);
    Plan plan;
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, make_desc()));
    const fmha_tensors t = fake_tensors();
    f.fail("cuLaunchKernel", 201 /* CUDA_ERROR_INVALID_CONTEXT */);
    FMHA_CHECK_STATUS(FMHA_STATUS_CONTEXT_MISMATCH, fmha_run(plan.p, &t, nullptr, 0, nullptr));
    f.fail("cuLaunchKernel", 701 /* CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES */);
    FMHA_CHECK_STATUS(FMHA_STATUS_DRIVER_ERROR, fmha_run(plan.p, &t, nullptr, 0, nullptr));
    f.fail(nullptr, 0);
    FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_run(plan.p, &t, nullptr, 0, nullptr));
    fake_cuda_stats s = f.stats();
    CHECK(s.context_pushes == s.context_pops);
}

TEST_CASE("fake driver: failing driver calls during plan creation", "[cpu][fake-driver]") {
    const struct {
        const char *entry;
        int result;
        fmha_status expected;
    } cases[] = {
        {"cuModuleLoadDataEx", 200 /* INVALID_IMAGE */, FMHA_STATUS_DRIVER_ERROR},
        {"cuModuleGetFunction", 500 /* NOT_FOUND */, FMHA_STATUS_INTERNAL_ERROR},
        {"cuDevicePrimaryCtxRetain", 2 /* OUT_OF_MEMORY */, FMHA_STATUS_DRIVER_ERROR},
        {"cuDeviceGetAttribute", 101 /* INVALID_DEVICE */, FMHA_STATUS_DRIVER_ERROR},
        {"cuCtxGetCurrent", 201 /* INVALID_CONTEXT */, FMHA_STATUS_DRIVER_ERROR},
    };
    for (const auto &c : cases) {
        Fake &f = fresh_fake(80);
        // A new context, so the module is not already cached for it.
        void *ctx = f.context(0, next_context_id());
        const bool needs_context = std::strcmp(c.entry, "cuDevicePrimaryCtxRetain") != 0;
        if (needs_context) f.push(ctx);
        const int retained = f.stats().primary_retained;
        f.fail(c.entry, c.result);
        Plan plan;
        fmha_status st = create(plan, make_desc());
        const std::string msg = fmha_last_error_message();
        f.fail(nullptr, 0);
        if (needs_context) f.pop();
        INFO(c.entry << " -> " << fmha_status_string(st) << ": " << msg);
        CHECK(st == c.expected);
        CHECK(plan.p == nullptr);
        CHECK(!msg.empty());
        CHECK(f.stats().primary_retained == retained);  // nothing leaked on the way out
    }
}

// Regression: fmha::fail() once formatted into the thread-local buffer while
// callers passed that same buffer as a %s argument, garbling these messages.
TEST_CASE("fake driver: driver-error messages name the call and the CUresult",
          "[cpu][fake-driver]") {
    const struct {
        const char *entry;
        const char *alias;  // libfmha's own name for the call, also accepted
        int result;
        const char *result_name;
        bool at_run;
    } cases[] = {
        {"cuModuleLoadDataEx", "module_load_data_ex", 200, "CUDA_ERROR_INVALID_IMAGE", false},
        {"cuModuleGetFunction", "module_get_function", 500, "CUDA_ERROR_NOT_FOUND", false},
        {"cuDevicePrimaryCtxRetain", "primary_ctx_retain", 2, "CUDA_ERROR_OUT_OF_MEMORY", false},
        {"cuDeviceGetAttribute", "device_get_attribute", 101, "CUDA_ERROR_INVALID_DEVICE", false},
        {"cuCtxGetCurrent", "ctx_get_current", 201, "CUDA_ERROR_INVALID_CONTEXT", false},
        {"cuLaunchKernel", "launch_kernel", 701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", true},
    };
    for (const auto &c : cases) {
        Fake &f = fresh_fake(80);
        void *ctx = f.context(0, next_context_id());
        const bool needs_context = std::strcmp(c.entry, "cuDevicePrimaryCtxRetain") != 0;
        if (needs_context) f.push(ctx);
        Plan plan;
        if (c.at_run) REQUIRE(create(plan, make_desc()) == FMHA_STATUS_SUCCESS);
        f.fail(c.entry, c.result);
        if (c.at_run) {
            const fmha_tensors t = fake_tensors();
            fmha_run(plan.p, &t, nullptr, 0, nullptr);
        } else {
            create(plan, make_desc());
        }
        const std::string msg = fmha_last_error_message();
        f.fail(nullptr, 0);
        if (needs_context) f.pop();
        INFO(c.entry << ": \"" << msg << "\"");
        CHECK((msg.find(c.entry) != std::string::npos || msg.find(c.alias) != std::string::npos));
        CHECK(msg.find(c.result_name) != std::string::npos);
    }
}

TEST_CASE("fake driver: one module load per context and image", "[cpu][fake-driver]") {
    Fake &f = fresh_fake(80);
    for (int round = 0; round < 2; ++round) {
        void *ctx = f.context(0, next_context_id());
        f.push(ctx);
        const int loads = f.stats().module_loads;
        for (int i = 0; i < 5; ++i) {
            Plan plan;
            FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                                create(plan, make_desc(i % 2 ? FMHA_DTYPE_FP16 : FMHA_DTYPE_BF16,
                                                       i % 2 ? 64 : 128)));
        }
        CHECK(f.stats().module_loads == loads + 1);
        f.pop();
    }
}

// Plan creation on two contexts loads their modules at the same time (a
// server creating plans for each of its GPUs at start-up), while one context's
// image is loaded once however many threads ask for it together.
TEST_CASE("fake driver: module loads of different contexts run concurrently",
          "[cpu][fake-driver][threads]") {
    Fake &f = fresh_fake(80);
    auto create_on = [&](void *ctx, fmha_status *st) {
        f.push(ctx);
        fmha_plan *p = nullptr;
        const fmha_descriptor d = make_desc();
        *st = fmha_create_plan(&p, &d);
        fmha_destroy_plan(p);
        f.pop();
    };
    SECTION("two contexts: both loads in progress together") {
        f.configure("load_rendezvous", 2);
        void *a = f.context(0, next_context_id()), *b = f.context(0, next_context_id());
        const int loads = f.stats().module_loads;
        fmha_status sa = FMHA_STATUS_INTERNAL_ERROR, sb = FMHA_STATUS_INTERNAL_ERROR;
        std::thread ta(create_on, a, &sa), tb(create_on, b, &sb);
        ta.join();
        tb.join();
        CHECK(sa == FMHA_STATUS_SUCCESS);
        CHECK(sb == FMHA_STATUS_SUCCESS);
        CHECK(f.stats().module_loads == loads + 2);
        CHECK(f.stats().max_concurrent_loads == 2);
    }
    SECTION("one context, six threads: one load") {
        // A second load of the pair would meet the first at the rendezvous;
        // the first instead waits it out alone and the others reuse it.
        f.configure("load_rendezvous", 2);
        void *ctx = f.context(0, next_context_id());
        const int loads = f.stats().module_loads;
        std::vector<fmha_status> st(6, FMHA_STATUS_INTERNAL_ERROR);
        std::vector<std::thread> pool;
        for (size_t n = 0; n < st.size(); ++n) pool.emplace_back(create_on, ctx, &st[n]);
        for (auto &th : pool) th.join();
        for (fmha_status s : st) CHECK(s == FMHA_STATUS_SUCCESS);
        CHECK(f.stats().module_loads == loads + 1);
        CHECK(f.stats().max_concurrent_loads == 1);
    }
}

TEST_CASE("fake driver: run-time argument checks need a plan, not a GPU", "[cpu][fake-driver][run]") {
    for (int sm : {80, 90}) {
        Fake &f = fresh_fake(sm);
        Plan plan;
        fmha_status cst = create(plan, make_desc());
        if (cst == FMHA_STATUS_NO_KERNEL_IMAGE) continue;
        REQUIRE(cst == FMHA_STATUS_SUCCESS);
        const fmha_plan_info i = info_of(plan.p);
        INFO("sm " << sm << ", kernel " << i.kernel_name);
        const int launches = f.stats().launches;
        const fmha_tensors good = fake_tensors();
        fmha_tensors t = good;
        t.q = g_fake_memory + 2;
        FMHA_CHECK_STATUS(FMHA_STATUS_MISALIGNED,
                          fmha_run(plan.p, &t, fake_workspace(), i.workspace_bytes, nullptr));
        CHECK(std::string(fmha_last_error_message()).find("tensors.q") != std::string::npos);
        t = good;
        t.lse = nullptr;
        FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT,
                          fmha_run(plan.p, &t, fake_workspace(), i.workspace_bytes, nullptr));
        if (i.workspace_bytes > 0) {
            FMHA_CHECK_STATUS(FMHA_STATUS_WORKSPACE_TOO_SMALL,
                              fmha_run(plan.p, &good, fake_workspace(), i.workspace_bytes - 1,
                                       nullptr));
            FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT,
                              fmha_run(plan.p, &good, nullptr, i.workspace_bytes, nullptr));
            FMHA_CHECK_STATUS(FMHA_STATUS_MISALIGNED,
                              fmha_run(plan.p, &good, g_fake_memory + 2050, i.workspace_bytes,
                                       nullptr));
        } else {
            FMHA_CHECK_STATUS(FMHA_STATUS_SUCCESS, fmha_run(plan.p, &good, nullptr, 0, nullptr));
        }
        CHECK(f.stats().launches == launches + (i.workspace_bytes > 0 ? 0 : 1));
    }
}

TEST_CASE("fake driver: the Hopper kernel packs a short query's heads per KV head",
          "[cpu][fake-driver][run]") {
    if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
    struct Shape {
        int64_t heads, kv_heads, sq;
        int64_t packed, packed512;  // tile rows per query position expected (hd512: its own)
    };
    // Up to 64 heads per KV head (hd512: 128), padded to a power of two,
    // queries up to 256 positions; otherwise one head per tile.
    const Shape shapes[] = {{32, 8, 32, 4, 4},     {64, 8, 17, 8, 8},   {64, 1, 256, 64, 64},
                            {8, 8, 32, 1, 1},      {12, 4, 32, 4, 4},   {40, 8, 32, 8, 8},
                            {28, 4, 100, 8, 8},    {96, 2, 5, 64, 64},  {128, 1, 32, 1, 128},
                            {96, 1, 3, 1, 128},    {256, 1, 1, 1, 1},   {32, 8, 257, 1, 1}};
    for (const Shape &shape : shapes)
        for (int64_t hd : {64, 128, 256, 512}) {
            Shape sh = shape;
            if (hd == 512) sh.packed = sh.packed512;
            Fake &f = fresh_fake(90);
            fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, hd, Layout::BSHD, sh.sq, 5000);
            d.num_q_heads = sh.heads;
            d.num_kv_heads = sh.kv_heads;
            d.q_strides = d.o_strides = make_layout(Layout::BSHD, d.batch, sh.sq, sh.heads, hd).strides;
            d.k_strides = d.v_strides =
                make_layout(Layout::BSHD, d.batch, 5000, sh.kv_heads, hd).strides;
            d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
            d.kernel = FMHA_KERNEL_HOPPER;
            d.num_splits = 1;  // the split grid is checked below
            Plan plan;
            INFO("Hq " << sh.heads << " Hkv " << sh.kv_heads << " sq " << sh.sq << " hd " << hd);
            FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
            const fmha_plan_info i = info_of(plan.p);
            const fmha_tensors t = fake_tensors();
            const int before = f.stats().tensor_maps;
            FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_run(plan.p, &t, nullptr, 0, nullptr));
            const fake_cuda_stats after = f.stats();
            REQUIRE(after.tensor_maps == before + 4);
            const fake_cuda_tensor_map &q = after.maps[before % FAKE_CUDA_MAP_RING];
            const fake_cuda_tensor_map &o = after.maps[(before + 3) % FAKE_CUDA_MAP_RING];
            // Q and O: (dim, group, positions, tile heads, batch), the box as
            // wide as the group's power of two.
            const int64_t group = sh.packed > 1 ? sh.heads / sh.kv_heads : 1;
            const int64_t tile_heads = sh.packed > 1 ? sh.kv_heads : sh.heads;
            for (const fake_cuda_tensor_map *m : {&q, &o}) {
                REQUIRE(m->rank == 5u);
                CHECK(m->dims[1] == (unsigned long long)group);
                CHECK(m->dims[2] == (unsigned long long)sh.sq);
                CHECK(m->dims[3] == (unsigned long long)tile_heads);
                // A group wider than the 64-row box: 64 of its heads at one position.
                CHECK(m->box[1] == unsigned(std::min<int64_t>(sh.packed, 64)));
            }
            CHECK(q.box[2] * q.box[1] == unsigned(i.tile_m));
            CHECK(o.box[2] * o.box[1] == 64u);
            if (hd == 512) {  // split D: both consumers on one 64-row block
                CHECK(i.tile_m == 64);
                CHECK(i.threads_per_cta == 384);
                // 64+ query rows per KV head: the consumers share S (h9b).
                const bool shared_s = sh.sq * (sh.heads / sh.kv_heads) >= 64;
                CHECK(std::string(i.kernel_name) ==
                      (shared_s ? "fmha_fwd_sm90_bf16_hd512_shared_s" : "fmha_fwd_sm90_bf16_hd512"));
                CHECK(i.shared_memory_bytes == (shared_s ? 197712 + 32768 : 197712));
            }
            fake_cuda_launch l;
            REQUIRE(f.last_launch(&l) == 1);
            const long long tiles =
                (sh.sq * sh.packed + i.tile_m - 1) / i.tile_m * tile_heads * d.batch;
            CHECK((long long)l.grid[0] == tiles);  // 5000 keys: one CTA per tile
        }
}

TEST_CASE("fake driver: the Hopper kernel splits the keys of a short query's few tiles",
          "[cpu][fake-driver][run]") {
    if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
    struct Shape {
        int64_t batch, sq, sk, num_splits, splits;  // num_splits asked, splits expected
    };
    // bf16 hd128 Hq32/Hkv8 (4 heads per tile, 1 query block at sq 32), 132 SMs:
    // automatic splits fill the SMs (132 / 8 blocks = 16) with at least one key
    // tile each (128 keys, 192 on the wide tile from 4097 keys).
    const Shape shapes[] = {{1, 32, 32768, 0, 16}, {8, 32, 8192, 0, 2}, {32, 32, 4096, 0, 1},
                            {1, 32, 700, 0, 6},    {1, 32, 3000, 0, 16}, {2, 32, 4096, 3, 3},
                            {1, 300, 32768, 0, 1}};
    for (const Shape &sh : shapes) {
        Fake &f = fresh_fake(90);
        fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, 128, Layout::BSHD, sh.sq, sh.sk);
        d.batch = sh.batch;
        d.num_q_heads = 32;
        d.num_kv_heads = 8;
        d.q_strides = d.o_strides = make_layout(Layout::BSHD, d.batch, sh.sq, 32, 128).strides;
        d.k_strides = d.v_strides = make_layout(Layout::BSHD, d.batch, sh.sk, 8, 128).strides;
        d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
        d.kernel = FMHA_KERNEL_HOPPER;
        d.num_splits = int32_t(sh.num_splits);
        Plan plan;
        INFO("B" << sh.batch << " sq " << sh.sq << " sk " << sh.sk << " num_splits "
                 << sh.num_splits);
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
        const fmha_plan_info i = info_of(plan.p);
        CHECK(i.num_splits == sh.splits);
        const uint64_t partials = uint64_t(sh.batch * sh.sq * 32) * sh.splits;  // rows x heads
        CHECK(i.workspace_bytes ==
              (sh.splits > 1 ? (partials * 128 * 4 + 255) / 256 * 256 + (partials * 4 + 255) / 256 * 256
                             : 0u));
        const fmha_tensors t = fake_tensors();
        const int launches = f.stats().launches;
        if (i.workspace_bytes > 0)  // the partials need the workspace
            FMHA_CHECK_STATUS(FMHA_STATUS_WORKSPACE_TOO_SMALL,
                              fmha_run(plan.p, &t, nullptr, 0, nullptr));
        CHECK(f.stats().launches == launches);
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                            fmha_run(plan.p, &t, fake_workspace(), i.workspace_bytes, nullptr));
        CHECK(f.stats().launches == launches + (sh.splits > 1 ? 2 : 1));
        fake_cuda_launch l;
        REQUIRE(f.last_launch(&l) == 1);
        if (sh.splits > 1) {  // the combine over every (row, head), after the Hopper grid
            // hd128: four (row, head) teams of 32 threads per CTA up to 4 splits,
            // two of 64 up to 8, one of 128 beyond, each on its own entry point
            CHECK(std::string(l.kernel) ==
                  std::string("fmha_combine_splits_bf16") +
                      (sh.splits <= 4 ? "_team32" : sh.splits <= 8 ? "_team64" : ""));
            const long long pairs = sh.batch * sh.sq * 32;
            const long long per_cta = sh.splits <= 4 ? 4 : sh.splits <= 8 ? 2 : 1;
            CHECK((long long)l.grid[0] == (pairs + per_cta - 1) / per_cta);
            CHECK(l.grid[0] == expected_combine_ctas(pairs, 128, int(sh.splits)));
            CHECK(l.block[0] == 128u);
            CHECK(l.programmatic == 1);
        } else {
            CHECK(std::string(l.kernel).find("fmha_fwd_sm90_bf16_hd128") == 0);
        }
    }
}

// The shortest automatic split per head_dim (sm90_min_split_key_tiles,
// measured on the H200: kernel-notes d31, d33): one key tile at hd64-hd128,
// 2 at hd256 (80-key tiles), 4 at hd512 (32-key tiles); hd512 stops at 64
// splits (d36), the others at 128. MQA T=1 with 32 query heads is one query
// block, so 132 SMs cap nothing below 128 splits.
TEST_CASE("fake driver: the Hopper kernel's shortest automatic split depends on head_dim",
          "[cpu][fake-driver][run]") {
    if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
    struct Row {
        int64_t hd, sk, splits;
    };
    const Row rows[] = {{64, 2048, 16},  {64, 8192, 64},  {96, 2048, 16},  {96, 8192, 64},
                        {128, 2048, 16}, {128, 32768, 128}, {256, 2048, 13}, {256, 8192, 51},
                        {512, 2048, 16}, {512, 8192, 64},   {512, 16384, 64}, {512, 32768, 64}};
    for (const Row &r : rows) {
        fresh_fake(90);
        fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, r.hd, Layout::BSHD, 1, r.sk);
        d.num_splits = 0;  // automatic
        d.batch = 1;
        d.num_q_heads = 32;
        d.num_kv_heads = 1;
        d.q_strides = d.o_strides = make_layout(Layout::BSHD, 1, 1, 32, r.hd).strides;
        d.k_strides = d.v_strides = make_layout(Layout::BSHD, 1, r.sk, 1, r.hd).strides;
        d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
        d.kernel = FMHA_KERNEL_HOPPER;
        Plan plan;
        INFO("hd " << r.hd << " sk " << r.sk);
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
        const fmha_plan_info i = info_of(plan.p);
        INFO(i.kernel_name << " tile_n " << i.tile_n);
        CHECK(i.num_splits == r.splits);
    }
}

TEST_CASE("fake driver: the Hopper kernel maps a paged cache as (dim, row, head, page)",
          "[cpu][fake-driver][run]") {
    if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
    struct Shape {
        int64_t hd, sk;
        int32_t page_size, chunk;  // chunk: rows per K/V box expected (0: rows gathered, `_gather`)
        bool paged_chunk_boxes;    // `_paged16`: K and V one box per chunk, all its columns
        // The pool's layout: [page, row, head, dim], heads outside the rows
        // ([page, head, row, dim]), or heads hd + 64 elements apart in a row
        // (no `_paged16`: K's map cannot fold them).
        enum { kRowsOuter, kHeadsOuter, kSpacedHeads } pool = kRowsOuter;
    };
    // Key tiles: hd64 and hd128 128 keys, hd128 above 4096 keys 192, hd256 80, hd512 32.
    // 16-row chunks of the plain hd128 (default and wide) and hd256 tiles take `_paged16`.
    // Pages without a 16-row divisor are gathered on the default tiles (hd128 at
    // 5000 keys too), and at hd512 pages without a 32-row divisor (h40): no K/V maps.
    const Shape shapes[] = {{128, 3000, 16, 16, true},   {128, 3000, 64, 64, false},
                            {128, 3000, 256, 64, false}, {128, 5000, 128, 64, false},
                            {128, 5000, 48, 16, true},   {64, 3000, 32, 32, false},
                            {256, 3000, 64, 16, true},   {96, 3000, 16, 16, false},
                            {128, 3000, 8, 0, false},    {128, 3000, 1, 0, false},
                            {128, 3000, 24, 0, false},   {128, 5000, 1, 0, false},
                            {64, 3000, 1, 0, false},     {96, 3000, 8, 0, false},
                            {256, 3000, 1, 0, false},    {256, 3000, 40, 0, false},
                            {512, 3000, 32, 32, false},  {512, 3000, 64, 32, false},
                            {512, 3000, 16, 0, false},   {512, 3000, 48, 0, false},
                            {512, 3000, 1, 0, false},
                            {128, 3000, 16, 16, false, Shape::kSpacedHeads},
                            {128, 3000, 16, 16, true, Shape::kHeadsOuter},
                            {256, 3000, 64, 16, true, Shape::kHeadsOuter}};
    for (const Shape &sh : shapes) {
        Fake &f = fresh_fake(90);
        fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, sh.hd, Layout::BSHD, 32, sh.sk);
        d.num_q_heads = 8;
        d.num_kv_heads = 2;
        d.q_strides = d.o_strides = make_layout(Layout::BSHD, d.batch, 32, 8, sh.hd).strides;
        d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
        d.flags |= FMHA_FLAG_PAGED_KV | FMHA_FLAG_SEQUSED_K;
        d.page_size = sh.page_size;
        d.max_pages_per_seq = (sh.sk + sh.page_size - 1) / sh.page_size;
        d.num_pages = d.batch * d.max_pages_per_seq + 3;
        if (sh.pool == Shape::kHeadsOuter)
            REQUIRE(fmha_strides_bhsd(&d.k_strides, sh.page_size, 2, sh.hd) ==
                    FMHA_STATUS_SUCCESS);
        else
            REQUIRE(fmha_strides_bshd(&d.k_strides, sh.page_size, 2, sh.hd) ==
                    FMHA_STATUS_SUCCESS);
        if (sh.pool == Shape::kSpacedHeads) {
            d.k_strides.head = sh.hd + 64;
            d.k_strides.seq = 2 * d.k_strides.head;
            d.k_strides.batch = sh.page_size * d.k_strides.seq;
        }
        d.v_strides = d.k_strides;
        d.kernel = FMHA_KERNEL_HOPPER;
        d.num_splits = 1;
        INFO("hd " << sh.hd << " sk " << sh.sk << " page " << sh.page_size << " pool "
                   << int(sh.pool));
        Plan plan;
        const fmha_status cst = create(plan, d);
        INFO(fmha_last_error_message());
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, cst);
        fmha_tensors t = fake_tensors();
        t.block_table = reinterpret_cast<const int32_t *>(g_fake_memory + 1536);
        t.seqused_k = reinterpret_cast<const int32_t *>(g_fake_memory + 1792);
        const int before = f.stats().tensor_maps;
        f.set_in_run(1);
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_run(plan.p, &t, nullptr, 0, nullptr));
        f.set_in_run(0);
        const fake_cuda_stats after = f.stats();
        CHECK(after.calls_in_run_not_allowed == 0);
        const std::string kernel = info_of(plan.p).kernel_name;
        const int64_t tile_n = sh.hd == 512 ? 32 : sh.hd == 256 ? 80 : 128;
        CHECK(info_of(plan.p).tile_n == (sh.sk > 4096 && sh.hd == 128 && sh.chunk > 0 ? 192 : tile_n));
        if (sh.chunk == 0) {  // Q and O maps only; K/V rows copied from their addresses
            CHECK(after.tensor_maps == before + 2);
            // hd512: 4 heads x 32 positions per KV head share S
            CHECK(kernel == "fmha_fwd_sm90_bf16_hd" + std::to_string(sh.hd) +
                                (sh.hd == 512 ? "_shared_s_gather" : "_gather"));
            continue;
        }
        REQUIRE(after.tensor_maps == before + 4);
        CHECK((kernel.size() > 8 && kernel.compare(kernel.size() - 8, 8, "_paged16") == 0) ==
              sh.paged_chunk_boxes);
        for (int m = 1; m <= 2; ++m) {  // K and V: the pool of pages, one chunk per box
            const fake_cuda_tensor_map &kv = after.maps[(before + m) % FAKE_CUDA_MAP_RING];
            if (m == 1 && sh.paged_chunk_boxes) {  // (64, row in group, column box, group, page)
                // The two KV heads fold into the column boxes, or (heads outer) the groups.
                const int heads_in_columns = sh.pool == Shape::kHeadsOuter ? 1 : 2;
                REQUIRE(kv.rank == 5u);
                CHECK(kv.dims[0] == 64u);
                CHECK(kv.dims[1] == 8u);
                CHECK(kv.dims[2] == (unsigned long long)(heads_in_columns * sh.hd / 64));
                CHECK(kv.dims[3] == (unsigned long long)(2 / heads_in_columns * sh.page_size / 8));
                CHECK(kv.dims[4] == (unsigned long long)d.num_pages);
                CHECK(kv.strides[0] == (unsigned long long)(d.k_strides.seq * 2));
                CHECK(kv.strides[1] == 128u);
                CHECK(kv.strides[2] == (unsigned long long)(8 * d.k_strides.seq * 2));
                CHECK(kv.strides[3] == (unsigned long long)(d.k_strides.batch * 2));
                CHECK(kv.box[0] == 64u);
                CHECK(kv.box[1] == 8u);
                CHECK(kv.box[2] == unsigned(sh.hd / 64));
                CHECK(kv.box[3] == unsigned(sh.chunk / 8));
                CHECK(kv.box[4] == 1u);
                continue;
            }
            if (m == 2 && sh.paged_chunk_boxes) {  // (64, row in page, column box, head, page)
                REQUIRE(kv.rank == 5u);
                CHECK(kv.dims[0] == 64u);
                CHECK(kv.dims[1] == (unsigned long long)sh.page_size);
                CHECK(kv.dims[2] == (unsigned long long)(sh.hd / 64));
                CHECK(kv.dims[3] == 2u);
                CHECK(kv.dims[4] == (unsigned long long)d.num_pages);
                CHECK(kv.box[1] == unsigned(sh.chunk));
                CHECK(kv.box[2] == unsigned(sh.hd / 64));
                CHECK(kv.box[3] == 1u);
                CHECK(kv.box[4] == 1u);
                continue;
            }
            REQUIRE(kv.rank == 4u);
            CHECK(kv.dims[1] == (unsigned long long)sh.page_size);
            CHECK(kv.dims[2] == 2u);
            CHECK(kv.dims[3] == (unsigned long long)d.num_pages);
            CHECK(kv.box[0] == 64u);
            CHECK(kv.box[1] == unsigned(sh.chunk));
        }
        // AUTO: 4 heads x 32 positions per KV head pack into the Hopper kernel.
        d.kernel = FMHA_KERNEL_AUTO;
        Plan autop;
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(autop, d));
        CHECK(info_of(autop.p).kernel_family == FMHA_KERNEL_HOPPER);
    }
}

TEST_CASE("fake driver: gathered pages take `_gather_scoremod` for score modifiers",
          "[cpu][fake-driver]") {
    if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
    struct Case {
        int64_t hd;
        int32_t kv_heads, window_left;
        float softcap;
        const char *kernel;  // the HOPPER plan's entry point
    };
    const Case cases[] = {{128, 2, 256, 0.0f, "fmha_fwd_sm90_bf16_hd128_gather_scoremod"},
                          {128, 2, -1, 30.0f, "fmha_fwd_sm90_bf16_hd128_gather_scoremod"},
                          {64, 2, 64, 0.0f, "fmha_fwd_sm90_bf16_hd64_gather_scoremod"},
                          {256, 2, 1000, 20.0f, "fmha_fwd_sm90_bf16_hd256_gather_scoremod"},
                          {128, 2, -1, 0.0f, "fmha_fwd_sm90_bf16_hd128_gather"},
                          // hd512: 8 heads x 32 positions on one KV head take the
                          // shared-S tile's gather, plain or with score modifiers
                          {512, 1, -1, 0.0f, "fmha_fwd_sm90_bf16_hd512_shared_s_gather"},
                          {512, 1, -1, 30.0f, "fmha_fwd_sm90_bf16_hd512_shared_s_gather_scoremod"},
                          {512, 1, 500, 0.0f, "fmha_fwd_sm90_bf16_hd512_shared_s_gather_scoremod"}};
    for (const Case &c : cases) {
        fresh_fake(90);
        fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, c.hd, Layout::BSHD, 32, 3000);
        d.num_q_heads = 8;
        d.num_kv_heads = c.kv_heads;
        d.q_strides = d.o_strides = make_layout(Layout::BSHD, d.batch, 32, 8, c.hd).strides;
        d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
        d.window_left = c.window_left;
        d.softcap = c.softcap;
        d.flags |= FMHA_FLAG_PAGED_KV;
        d.page_size = 4;
        d.max_pages_per_seq = 3000 / 4;
        d.num_pages = d.batch * d.max_pages_per_seq;
        REQUIRE(fmha_strides_bshd(&d.k_strides, 4, c.kv_heads, c.hd) == FMHA_STATUS_SUCCESS);
        d.v_strides = d.k_strides;
        d.kernel = FMHA_KERNEL_HOPPER;
        INFO("hd " << c.hd << " window " << c.window_left << " softcap " << c.softcap);
        Plan plan;
        const fmha_status st = create(plan, d);
        INFO(fmha_last_error_message());
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, st);
        CHECK(std::string(info_of(plan.p).kernel_name) == c.kernel);
        // AUTO agrees: 256 query rows per KV head are past the decode kernel's 16
        d.kernel = FMHA_KERNEL_AUTO;
        Plan autop;
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(autop, d));
        CHECK(std::string(info_of(autop.p).kernel_name) == c.kernel);
    }
}

TEST_CASE("fake driver: broadcast inputs fall back from the Hopper kernel", "[cpu][fake-driver]") {
    fresh_fake(90);
    fmha_descriptor d = make_desc();
    d.k_strides.batch = 0;
    d.v_strides.batch = 0;
    Plan plan;
    fmha_status st = create(plan, d);
    if (st == FMHA_STATUS_NO_KERNEL_IMAGE) FMHA_SKIP("this build has no image for sm_90");
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, st);
    CHECK(info_of(plan.p).kernel_family == FMHA_KERNEL_PORTABLE);
    d.kernel = FMHA_KERNEL_HOPPER;
    Plan hopper;
    st = create(hopper, d);
    INFO(fmha_last_error_message());
    if (embeds(90)) CHECK(st == FMHA_STATUS_NOT_SUPPORTED);
    else CHECK(st == FMHA_STATUS_NO_KERNEL_IMAGE);
}

TEST_CASE("fake driver: strides TMA cannot encode fall back from the Hopper kernel",
          "[cpu][fake-driver]") {
    fresh_fake(90);
    if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
    // K's batches 2^40 bytes apart (a cache in a sparse reservation): TMA
    // takes strides below 2^40 bytes, the portable kernel any.
    struct {
        const char *what;
        int64_t k_batch;  // elements (2 bytes)
        bool tma;         // within TMA's limits
    } cases[] = {{"just below 2^40 bytes", (int64_t(1) << 39) - 8, true},
                 {"2^40 bytes", int64_t(1) << 39, false},
                 {"2^41 bytes", int64_t(1) << 40, false}};
    for (const auto &c : cases) {
        INFO(c.what);
        fmha_descriptor d = make_desc();
        d.k_strides.batch = c.k_batch;
        Plan autop;
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(autop, d));
        const fmha_plan_info i = info_of(autop.p);
        CHECK(i.kernel_family == (c.tma ? FMHA_KERNEL_HOPPER : FMHA_KERNEL_PORTABLE));
        fmha_tensors t = fake_tensors();
        CHECK(fmha_run(autop.p, &t, nullptr, 0, nullptr) == FMHA_STATUS_SUCCESS);
        d.kernel = FMHA_KERNEL_HOPPER;
        Plan hopper;
        const fmha_status st = create(hopper, d);
        const std::string msg = fmha_last_error_message();
        INFO(msg);
        if (c.tma) {
            CHECK(st == FMHA_STATUS_SUCCESS);
        } else {
            CHECK(st == FMHA_STATUS_NOT_SUPPORTED);
            CHECK(msg.find("descriptor.k_strides") != std::string::npos);
            CHECK(msg.find(std::to_string(c.k_batch)) != std::string::npos);
            CHECK(msg.find("2^40") != std::string::npos);
        }
    }
    // A single KV head: its head dimension has extent 1, whose stride is never
    // stepped, so it does not push the map past TMA's limit however far apart
    // the batches lie (below 2^40 bytes each).
    fmha_descriptor d = make_desc();
    d.num_kv_heads = 1;
    d.k_strides = d.v_strides = make_layout(Layout::BSHD, d.batch, d.seqlen_k, 1, 128).strides;
    d.k_strides.batch = (int64_t(1) << 39) - 8;  // 3 batches span 3 x (2^40 - 16) bytes
    d.kernel = FMHA_KERNEL_HOPPER;
    Plan mqa;
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(mqa, d));
    CHECK(info_of(mqa.p).kernel_family == FMHA_KERNEL_HOPPER);
    fmha_tensors t = fake_tensors();
    CHECK(fmha_run(mqa.p, &t, nullptr, 0, nullptr) == FMHA_STATUS_SUCCESS);
}

TEST_CASE("fake driver: plans created and run from many threads", "[cpu][fake-driver][threads]") {
    Fake &f = fresh_fake(80);
    const int retained = f.stats().primary_retained;
    const int launches = f.stats().launches;
    constexpr int kThreads = 8, kIters = 40;
    std::vector<std::string> errors(kThreads);
    Plan shared;
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(shared, make_desc()));
    std::vector<std::thread> pool;
    for (int n = 0; n < kThreads; ++n)
        pool.emplace_back([&, n] {
            const fmha_tensors t = fake_tensors();
            for (int it = 0; it < kIters && errors[size_t(n)].empty(); ++it) {
                fmha_plan *p = nullptr;
                fmha_descriptor d = make_desc(n % 2 ? FMHA_DTYPE_FP16 : FMHA_DTYPE_BF16,
                                              (n % 4 + 1) * 64 == 192 ? 96 : (n % 4 + 1) * 64);
                fmha_status st = fmha_create_plan(&p, &d);
                if (st == FMHA_STATUS_SUCCESS) st = fmha_run(p, &t, nullptr, 0, nullptr);
                if (st == FMHA_STATUS_SUCCESS) st = fmha_run(shared.p, &t, nullptr, 0, nullptr);
                if (st != FMHA_STATUS_SUCCESS)
                    errors[size_t(n)] = std::string(fmha_status_string(st)) + ": " +
                                        fmha_last_error_message();
                fmha_destroy_plan(p);
            }
        });
    for (auto &th : pool) th.join();
    for (int n = 0; n < kThreads; ++n) {
        INFO("thread " << n);
        CHECK(errors[size_t(n)] == "");
    }
    CHECK(f.stats().launches == launches + 2 * kThreads * kIters);
    CHECK(f.stats().primary_retained == retained + 1);  // only `shared` still holds one
}

// The decode family's host side: entry-point names exist in the embedded
// images (the fake looks them up), the launch matches the plan's info, a
// split plan enqueues decode + combine, and AUTO falls back when the decode
// kernel does not fit a device's shared memory.
TEST_CASE("fake driver: decode plans, contiguous and paged, split and not",
          "[cpu][fake-driver][run][decode]") {
    for (int sm : {80, 90}) {
        for (bool paged : {false, true})
            for (int64_t hd : {64, 96, 128, 256, 512})
                for (int splits : {1, 4}) {
                    Fake &f = fresh_fake(sm);
                    fmha_descriptor d = make_desc(FMHA_DTYPE_FP16, hd, Layout::BSHD, 1, 4096);
                    d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
                    d.kernel = FMHA_KERNEL_DECODE;
                    d.num_splits = splits;
                    if (paged) {
                        d.flags |= FMHA_FLAG_PAGED_KV | FMHA_FLAG_SEQUSED_K;
                        d.page_size = 16;
                        d.max_pages_per_seq = 256;
                        d.num_pages = 3 * 256;
                        REQUIRE(fmha_strides_bshd(&d.k_strides, 16, 2, hd) == FMHA_STATUS_SUCCESS);
                        d.v_strides = d.k_strides;
                    }
                    Plan plan;
                    fmha_status cst = create(plan, d);
                    INFO("sm " << sm << (paged ? " paged" : " contiguous") << " hd " << hd
                               << " splits " << splits << ": " << fmha_last_error_message());
                    if (cst == FMHA_STATUS_NO_KERNEL_IMAGE) continue;
                    REQUIRE(cst == FMHA_STATUS_SUCCESS);
                    const fmha_plan_info i = info_of(plan.p);
                    INFO("kernel " << i.kernel_name);
                    CHECK(i.kernel_family == FMHA_KERNEL_DECODE);
                    CHECK(i.num_splits == splits);
                    CHECK((std::string(i.kernel_name).find("_paged_") != std::string::npos) == paged);
                    // sm_90 reads contiguous hd64's and hd96's two KV heads as one
                    // pair (d39, d49; 6 CTAs here, at most one per SM).
                    const bool paired = sm == 90 && (hd == 64 || hd == 96) && !paged;
                    CHECK((std::string(i.kernel_name).find("_paired_") != std::string::npos) == paired);
                    CHECK((i.workspace_bytes > 0) == (splits > 1));
                    fmha_tensors t = fake_tensors();
                    t.block_table = reinterpret_cast<const int32_t *>(g_fake_memory + 1536);
                    t.seqused_k = reinterpret_cast<const int32_t *>(g_fake_memory + 1792);
                    const fake_cuda_stats before = f.stats();
                    f.set_in_run(1);
                    const fmha_status st =
                        fmha_run(plan.p, &t, fake_workspace(), i.workspace_bytes, nullptr);
                    f.set_in_run(0);
                    INFO(fmha_status_string(st) << ": " << fmha_last_error_message());
                    REQUIRE(st == FMHA_STATUS_SUCCESS);
                    const fake_cuda_stats after = f.stats();
                    CHECK(after.calls_in_run_not_allowed == 0);
                    CHECK(after.launches == before.launches + (splits > 1 ? 2 : 1));
                    if (splits == 1) {
                        const fake_cuda_launch l = launch_as_planned(f, i);
                        // (split, 16-row tiles x KV heads, batch): 1 row x 4 heads per KV
                        // head; paired, one 16-row tile holds both heads' 8 rows.
                        CHECK(l.grid[0] == 1u);
                        CHECK(l.grid[1] == (paired ? 1u : 2u));
                        CHECK(l.grid[2] == 3u);
                        // Programmatic dependent launch on sm_90+ from sm_90+ images only.
                        CHECK(l.programmatic == (sm >= 90 && i.image_sm >= 90 ? 1 : 0));
                    } else {
                        fake_cuda_launch l;
                        REQUIRE(f.last_launch(&l) == 1);
                        CHECK(std::string(l.kernel).find("fmha_combine_splits_fp16") == 0);
                        // 3 rows x 8 heads, in teams (CTAs of 128 / team of them)
                        CHECK(l.grid[1] * l.grid[2] == 1u);
                        CHECK(l.grid[0] == expected_combine_ctas(3 * 8, hd, splits));
                        CHECK(l.programmatic == (sm >= 90 && i.image_sm >= 90 ? 1 : 0));
                    }
                }
    }
}

// Contiguous hd64 reads two KV heads as one 128-column head on sm_90 where
// their rows lie side by side and the pair's query rows fill at most one
// 16-row tile (launch_decode.cpp, kernel-notes d39); the launch is then the
// hd128 kernel's shape over half the KV heads.
TEST_CASE("fake driver: hd64 decode pairs KV heads only where they are adjacent and fit a tile",
          "[cpu][fake-driver][run][decode]") {
    struct Row {
        int sm;
        int64_t q_heads, kv_heads, seqlen_q;
        Layout layout;
        bool paired;
    };
    const Row rows[] = {
        {90, 32, 8, 1, Layout::BSHD, true},    // group 4: 8 rows per pair
        {90, 64, 8, 1, Layout::BSHD, true},    // group 8: 16 rows
        {90, 32, 32, 1, Layout::BSHD, true},   // MHA
        {90, 32, 8, 2, Layout::BSHD, true},    // 2 positions x 8
        {90, 32, 8, 4, Layout::BSHD, false},   // 32 rows: two tiles would read K/V twice
        {90, 128, 8, 1, Layout::BSHD, false},  // group 16
        {90, 32, 1, 1, Layout::BSHD, false},   // MQA: no pair
        {90, 24, 3, 1, Layout::BSHD, false},   // odd KV heads
        {90, 32, 8, 1, Layout::BHSD, false},   // heads not side by side
        {90, 32, 8, 1, Layout::SLICED, false},
        {80, 32, 8, 1, Layout::BSHD, false},   // measured on sm_90 only
    };
    for (const Row &r : rows) {
        if (!embeds(r.sm)) continue;
        Fake &f = fresh_fake(r.sm);
        fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, 64, r.layout, r.seqlen_q, 2048);
        d.batch = 3;
        d.num_q_heads = r.q_heads;
        d.num_kv_heads = r.kv_heads;
        d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
        d.q_strides = d.o_strides = make_layout(r.layout, 3, r.seqlen_q, r.q_heads, 64).strides;
        d.k_strides = d.v_strides = make_layout(r.layout, 3, 2048, r.kv_heads, 64).strides;
        d.kernel = FMHA_KERNEL_DECODE;
        d.num_splits = 1;
        Plan plan;
        REQUIRE(create(plan, d) == FMHA_STATUS_SUCCESS);
        const fmha_plan_info i = info_of(plan.p);
        INFO("sm_" << r.sm << " Hq " << r.q_heads << " Hkv " << r.kv_heads << " T " << r.seqlen_q
                   << " layout " << int(r.layout) << ": " << i.kernel_name);
        // A pair of at most 8 rows (both heads' groups) puts the keys on M.
        const bool r8 = r.paired && 2 * (r.q_heads / r.kv_heads) * r.seqlen_q <= 8;
        CHECK(std::string(i.kernel_name) ==
              (r8 ? "fmha_decode_paired_r8_bf16_hd64"
                  : r.paired ? "fmha_decode_paired_bf16_hd64" : "fmha_decode_bf16_hd64"));
        fmha_tensors t = fake_tensors();
        REQUIRE(fmha_run(plan.p, &t, fake_workspace(), i.workspace_bytes, nullptr) ==
                FMHA_STATUS_SUCCESS);
        fake_cuda_launch l;
        REQUIRE(f.last_launch(&l) == 1);
        CHECK(std::string(l.kernel) == i.kernel_name);
        const int64_t group = r.q_heads / r.kv_heads;
        const int64_t heads = r.paired ? r.kv_heads / 2 : r.kv_heads;
        const int64_t rows_per_head = (r.paired ? 2 : 1) * group * r.seqlen_q;
        CHECK(l.grid[1] == unsigned(heads * ((rows_per_head + 15) / 16)));
        CHECK(l.grid[2] == 3u);
        if (r.paired) {  // the hd128 tile: 4 warps, Q and 3 stages of 64 K/V rows of 128
            CHECK(l.block[0] == 128);
            CHECK(i.tile_n == 64);
        }
    }
}

// With an automatic split count a pair keeps the unpaired plan's grid: 2s
// splits (at most 32) where the unpaired plan splits s ways, unsplit only
// where half the KV heads still give nearly every one of the 132 SMs a CTA
// (d39).
TEST_CASE("fake driver: hd64 pairs keep the unpaired grid under automatic splits",
          "[cpu][fake-driver][plan][decode]") {
    if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
    struct Row {
        int64_t batch, q_heads, kv_heads, seqlen_k;
        bool paired;
        int splits;
    };
    const Row rows[] = {
        {32, 32, 8, 4096, true, 1},   // 128 paired CTAs
        {64, 32, 32, 2048, true, 1},  // 1024
        {16, 64, 8, 4096, false, 1},  // 64 paired CTAs: the unpaired 128 instead
        {8, 32, 8, 8192, true, 4},    // unpaired: 2 splits of 8 x 8 tiles
        {1, 32, 8, 32768, true, 32},  // unpaired: 16
        {2, 16, 2, 16384, false, 32}, // 64 paired splits would be past 32
    };
    for (const Row &r : rows) {
        fresh_fake(90);
        fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, 64, Layout::BSHD, 1, r.seqlen_k);
        d.num_splits = 0;  // automatic
        d.batch = r.batch;
        d.num_q_heads = r.q_heads;
        d.num_kv_heads = r.kv_heads;
        d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
        d.q_strides = d.o_strides = make_layout(Layout::BSHD, r.batch, 1, r.q_heads, 64).strides;
        d.k_strides = d.v_strides = make_layout(Layout::BSHD, r.batch, r.seqlen_k, r.kv_heads, 64).strides;
        Plan plan;
        REQUIRE(create(plan, d) == FMHA_STATUS_SUCCESS);
        const fmha_plan_info i = info_of(plan.p);
        INFO("B" << r.batch << " H" << r.q_heads << "/" << r.kv_heads << " S" << r.seqlen_k << ": "
                 << i.kernel_name << ", " << i.num_splits << " splits");
        const bool r8 = r.paired && 2 * (r.q_heads / r.kv_heads) <= 8;  // T = 1
        CHECK(std::string(i.kernel_name) ==
              (r8 ? "fmha_decode_paired_r8_bf16_hd64"
                  : r.paired ? "fmha_decode_paired_bf16_hd64" : "fmha_decode_bf16_hd64"));
        CHECK(i.num_splits == r.splits);
    }
}

// A bf16 decode-shaped descriptor: Q/O [batch, seqlen_q, q_heads, hd] and a
// dense [batch, seqlen_k, kv_heads, hd] cache, or pages of 16 rows of
// [page, row, kv_heads, hd]; causal bottom-right past one query position.
static fmha_descriptor decode_row_desc(int64_t batch, int64_t q_heads, int64_t kv_heads,
                                       int64_t seqlen_q, int64_t seqlen_k, int64_t hd,
                                       bool paged) {
    fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, hd, Layout::BSHD, seqlen_q, seqlen_k);
    d.num_splits = 0;  // automatic
    d.batch = batch;
    d.num_q_heads = q_heads;
    d.num_kv_heads = kv_heads;
    if (seqlen_q > 1) d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
    REQUIRE(fmha_strides_bshd(&d.q_strides, seqlen_q, q_heads, hd) == FMHA_STATUS_SUCCESS);
    d.o_strides = d.q_strides;
    if (paged) {
        d.flags |= FMHA_FLAG_PAGED_KV;
        d.page_size = 16;
        d.max_pages_per_seq = seqlen_k / 16;
        d.num_pages = batch * d.max_pages_per_seq;
        REQUIRE(fmha_strides_bshd(&d.k_strides, 16, kv_heads, hd) == FMHA_STATUS_SUCCESS);
    } else {
        REQUIRE(fmha_strides_bshd(&d.k_strides, seqlen_k, kv_heads, hd) == FMHA_STATUS_SUCCESS);
    }
    d.v_strides = d.k_strides;
    return d;
}

// Runs a decode plan on the fake: one launch, or two with the combine when
// split. An unsplit plan's decode launch (128 threads, the plan's kernel) is
// returned in *decode and true; false after a split plan's combine.
static bool run_decode_plan(Fake &f, const fmha_plan *plan, const fmha_plan_info &i,
                            const fmha_tensors &t, fake_cuda_launch *decode) {
    const int launches = f.stats().launches;
    REQUIRE(fmha_run(plan, &t, fake_workspace(), i.workspace_bytes, nullptr) ==
            FMHA_STATUS_SUCCESS);
    // Split plans launch the combine after the decode kernel, except those
    // whose two splits run as clusters of two CTAs (`_cluster` entry points).
    const bool clustered = std::string(i.kernel_name).find("_cluster") != std::string::npos;
    const bool combine = i.num_splits > 1 && !clustered;
    CHECK(f.stats().launches == launches + (combine ? 2 : 1));
    if (combine) return false;  // the last launch is the combine
    REQUIRE(f.last_launch(decode) == 1);
    CHECK(std::string(decode->kernel) == i.kernel_name);
    CHECK(decode->block[0] == 128);
    CHECK(decode->cluster[0] == (clustered ? 2u : 1u));
    CHECK(decode->cluster[1] * decode->cluster[2] == 1u);
    return true;
}

// Runs a decode plan on the fake; unsplit, checks its launch's CTA count and
// shared memory (a split plan's last launch is the combine).
static void check_decode_launch(Fake &f, const fmha_plan *plan, const fmha_plan_info &i,
                                unsigned grid_ctas, unsigned shared_bytes) {
    fake_cuda_launch l;
    if (!run_decode_plan(f, plan, i, fake_tensors(), &l)) return;
    CHECK(l.grid[0] * l.grid[1] * l.grid[2] == grid_ctas);
    CHECK(l.shared_bytes == shared_bytes);
}

// Dense hd128 decode on sm_90 streams the narrow tile (32 keys, up to 4 CTAs
// per SM) where its grid is one wave of 132 x 4 CTAs with at least 1.45 per
// SM (launch_decode.cpp, kernel-notes d43); lone CTAs (128), more waves (768,
// 2048), paged caches, other head dims and other devices keep their tiles.
// (T = 1 rows carry no mask here; the decode kernel reads it the same way.)
TEST_CASE("fake driver: dense hd128 decode takes the narrow tile for one-wave grids on sm_90",
          "[cpu][fake-driver][run][decode]") {
    struct Row {
        int sm;
        int64_t batch, kv_heads, seqlen_q, seqlen_k, head_dim;
        int32_t num_splits;  // 0: automatic
        bool paged;
        bool narrow;
        unsigned grid_ctas;
    };
    const Row rows[] = {
        {90, 16, 8, 1, 8192, 128, 1, false, false, 128},
        {90, 24, 8, 1, 4096, 128, 1, false, true, 192},
        {90, 23, 8, 1, 4096, 128, 1, false, false, 184},  // 1.39 CTAs per SM
        {90, 32, 8, 1, 4096, 128, 0, false, true, 256},
        {90, 32, 8, 2, 4096, 128, 0, false, true, 256},   // 8 rows: one tile
        {90, 48, 8, 1, 4096, 128, 0, false, true, 384},
        {90, 66, 8, 1, 2048, 128, 1, false, true, 528},   // a full wave
        {90, 67, 8, 1, 2048, 128, 1, false, false, 536},
        {90, 96, 8, 1, 2048, 128, 0, false, false, 768},
        {90, 64, 32, 1, 2048, 128, 0, false, false, 2048},
        {90, 8, 8, 1, 8192, 128, 0, false, false, 128},   // 2 automatic splits
        {90, 24, 8, 1, 4096, 128, 0, false, true, 384},   // 2 automatic splits
        {90, 1, 8, 1, 32768, 128, 33, false, true, 264},
        {90, 32, 8, 1, 4096, 128, 0, true, false, 256},
        {90, 16, 8, 1, 8192, 96, 0, false, false, 128},   // (unpaired: 64 pairs)
        {80, 32, 8, 1, 4096, 128, 1, false, false, 256}};
    for (const Row &r : rows) {
        if (!embeds(r.sm)) continue;
        Fake &f = fresh_fake(r.sm);
        const int64_t hd = r.head_dim;
        fmha_descriptor d =
            decode_row_desc(r.batch, 32, r.kv_heads, r.seqlen_q, r.seqlen_k, hd, r.paged);
        d.kernel = FMHA_KERNEL_DECODE;
        d.num_splits = r.num_splits;
        Plan plan;
        REQUIRE(create(plan, d) == FMHA_STATUS_SUCCESS);
        const fmha_plan_info i = info_of(plan.p);
        INFO("sm_" << r.sm << " B" << r.batch << " Hkv " << r.kv_heads << " T" << r.seqlen_q
                   << " S" << r.seqlen_k << " hd" << hd << (r.paged ? " paged" : "")
                   << " splits " << r.num_splits << ": " << i.kernel_name << ", "
                   << i.num_splits << " splits");
        const std::string plain = std::string(r.paged ? "fmha_decode_paged_bf16_hd" : "fmha_decode_bf16_hd") +
                                  std::to_string(hd);
        const std::string tile = r.narrow ? "fmha_decode_narrow_bf16_hd128" : plain;
        // 4 query heads per KV head x T <= 8 rows at hd128 on sm_90: keys on M.
        const bool r8 = r.sm == 90 && hd == 128 && 4 * r.seqlen_q <= 8;
        // Two splits of the usual tile's keys-on-M grid: clusters of two, on
        // the lone tile (128 keys) where the grid fits one CTA per SM.
        const bool clustered = r8 && !r.narrow && !r.paged && i.num_splits == 2;
        const bool lone = clustered && r.grid_ctas <= 132;
        CHECK(std::string(i.kernel_name) == (lone        ? std::string("fmha_decode_r8_cluster_lone_bf16_hd128")
                                             : clustered ? std::string("fmha_decode_r8_cluster_bf16_hd128")
                                             : r8        ? keys_on_m_name(tile)
                                                         : tile));
        CHECK(i.tile_n == (r.narrow ? 32 : lone ? 128 : 64));
        CHECK(int64_t(i.num_splits) * r.batch * r.kv_heads == r.grid_ctas);
        // Q (16 rows of 136 elements), then 3 stages of 32 K and 32 V rows.
        if (r.narrow)
            check_decode_launch(f, plan.p, i, r.grid_ctas, 16 * 136 * 2 + 3 * 2 * 32 * 128 * 2);
    }
}

// Decode grids of at most 8 query rows per KV head (positions x group) on
// sm_90 put the keys on the MMA's M side: hd128 on its usual, narrow and paged
// tiles, and paired hd64 (launch_decode.cpp, kernel-notes d67). 9 rows and
// more, other head dims and other devices keep the 16-row form. The launch
// keeps the tile's grid (one 16-row tile per KV head), threads and shared memory.
TEST_CASE("fake driver: decode grids of at most 8 rows per KV head put the keys on M",
          "[cpu][fake-driver][run][decode]") {
    struct Row {
        int sm;
        int64_t q_heads, kv_heads, seqlen_q, head_dim;
        bool paged;
        const char *kernel;
    };
    const Row rows[] = {
        {90, 32, 8, 1, 128, false, "fmha_decode_r8_bf16_hd128"},         // 4 rows
        {90, 32, 8, 2, 128, false, "fmha_decode_r8_bf16_hd128"},         // 8 rows
        {90, 32, 8, 3, 128, false, "fmha_decode_bf16_hd128"},            // 12 rows
        {90, 64, 8, 1, 128, false, "fmha_decode_r8_bf16_hd128"},         // group 8
        {90, 72, 8, 1, 128, false, "fmha_decode_bf16_hd128"},            // group 9
        {90, 8, 8, 8, 128, false, "fmha_decode_r8_bf16_hd128"},          // MHA, 8 positions
        {90, 32, 8, 1, 128, true, "fmha_decode_paged_r8_bf16_hd128"},
        {90, 32, 8, 3, 128, true, "fmha_decode_paged_bf16_hd128"},
        {90, 32, 8, 1, 256, false, "fmha_decode_bf16_hd256"},
        {90, 32, 8, 1, 96, true, "fmha_decode_paged_bf16_hd96"},
        {90, 32, 8, 1, 64, true, "fmha_decode_paged_wide_bf16_hd64"},    // unpaired hd64
        {80, 32, 8, 1, 128, false, "fmha_decode_bf16_hd128"},
        {80, 32, 8, 1, 128, true, "fmha_decode_paged_bf16_hd128"},
    };
    for (const Row &r : rows) {
        if (!embeds(r.sm)) continue;
        Fake &f = fresh_fake(r.sm);
        fmha_descriptor d = decode_row_desc(4, r.q_heads, r.kv_heads, r.seqlen_q, 4096, r.head_dim, r.paged);
        d.kernel = FMHA_KERNEL_DECODE;
        d.num_splits = 1;
        Plan plan;
        REQUIRE(create(plan, d) == FMHA_STATUS_SUCCESS);
        const fmha_plan_info i = info_of(plan.p);
        INFO("sm_" << r.sm << " H" << r.q_heads << "/" << r.kv_heads << " T" << r.seqlen_q << " hd"
                   << r.head_dim << (r.paged ? " paged" : "") << ": " << i.kernel_name);
        CHECK(std::string(i.kernel_name) == r.kernel);
        if (r.paged) continue;  // (fake_tensors has no block table)
        fake_cuda_launch l;
        REQUIRE(run_decode_plan(f, plan.p, i, fake_tensors(), &l));
        CHECK(l.grid[0] * l.grid[1] * l.grid[2] ==
              unsigned(4 * r.kv_heads * ((r.q_heads / r.kv_heads * r.seqlen_q + 15) / 16)));
        CHECK(l.shared_bytes == unsigned(i.shared_memory_bytes));
        if (r.head_dim == 128 && !r.paged)  // Q (16 rows of 136), 3 stages of 64 K and 64 V rows
            CHECK(l.shared_bytes == unsigned(16 * 136 * 2 + 3 * 2 * 64 * 128 * 2));
    }
}

// Two splits of a keys-on-M hd128 grid over a contiguous cache on sm_90 run
// as clusters of two CTAs that merge in shared memory (launch_decode.cpp,
// cluster_merge; kernel-notes d71): one launch with a cluster dimension of
// (2, 1, 1), programmatic, no combine and no workspace; on the lone tile
// (8 warps, 2 stages of 128 keys) where the grid fits one CTA per SM of the
// fake's 132 (kernel-notes d75), else on the usual one. Other split counts,
// the narrow and paged tiles, 16-row tiles and other devices keep the
// combine kernel.
TEST_CASE("fake driver: two keys-on-M splits run as clusters of two, with no combine",
          "[cpu][fake-driver][run][decode]") {
    struct Row {
        int sm;
        fmha_dtype dtype;
        int64_t batch, seqlen_q, seqlen_k;
        int32_t num_splits;  // 0: automatic
        bool paged;
        const char *kernel;
    };
    const Row rows[] = {
        {90, FMHA_DTYPE_BF16, 8, 1, 8192, 0, false, "fmha_decode_r8_cluster_lone_bf16_hd128"},  // AUTO: 2
        {90, FMHA_DTYPE_FP16, 8, 1, 8192, 0, false, "fmha_decode_r8_cluster_lone_fp16_hd128"},
        {90, FMHA_DTYPE_BF16, 8, 2, 8192, 2, false, "fmha_decode_r8_cluster_lone_bf16_hd128"},  // 8 rows
        {90, FMHA_DTYPE_BF16, 1, 1, 8192, 2, false, "fmha_decode_r8_cluster_lone_bf16_hd128"},  // 16 CTAs
        {90, FMHA_DTYPE_BF16, 10, 1, 8192, 2, false, "fmha_decode_r8_cluster_bf16_hd128"},  // 160 CTAs
        {90, FMHA_DTYPE_FP16, 10, 1, 8192, 2, false, "fmha_decode_r8_cluster_fp16_hd128"},
        {90, FMHA_DTYPE_BF16, 64, 1, 2048, 2, false, "fmha_decode_r8_cluster_bf16_hd128"},
        {90, FMHA_DTYPE_BF16, 8, 1, 8192, 3, false, "fmha_decode_narrow_r8_bf16_hd128"},
        {90, FMHA_DTYPE_BF16, 8, 1, 8192, 4, false, "fmha_decode_narrow_r8_bf16_hd128"},
        {90, FMHA_DTYPE_BF16, 64, 1, 2048, 3, false, "fmha_decode_r8_bf16_hd128"},
        {90, FMHA_DTYPE_BF16, 8, 3, 8192, 2, false, "fmha_decode_bf16_hd128"},     // 12 rows
        {90, FMHA_DTYPE_BF16, 8, 1, 8192, 2, true, "fmha_decode_paged_r8_bf16_hd128"},
        {90, FMHA_DTYPE_BF16, 24, 1, 4096, 0, false, "fmha_decode_narrow_r8_bf16_hd128"},  // AUTO: 2
        {80, FMHA_DTYPE_BF16, 8, 1, 8192, 2, false, "fmha_decode_bf16_hd128"},
    };
    for (const Row &r : rows) {
        if (!embeds(r.sm)) continue;
        Fake &f = fresh_fake(r.sm);
        fmha_descriptor d = decode_row_desc(r.batch, 32, 8, r.seqlen_q, r.seqlen_k, 128, r.paged);
        d.dtype = r.dtype;
        d.kernel = FMHA_KERNEL_DECODE;
        d.num_splits = r.num_splits;
        Plan plan;
        REQUIRE(create(plan, d) == FMHA_STATUS_SUCCESS);
        const fmha_plan_info i = info_of(plan.p);
        INFO("sm_" << r.sm << " B" << r.batch << " T" << r.seqlen_q << " S" << r.seqlen_k
                   << (r.paged ? " paged" : "") << " splits " << r.num_splits << ": "
                   << i.kernel_name << ", " << i.num_splits << " splits");
        CHECK(std::string(i.kernel_name) == r.kernel);
        CHECK(i.num_splits == (r.num_splits > 0 ? r.num_splits : 2));
        const bool clustered = std::string(r.kernel).find("_cluster") != std::string::npos;
        size_t workspace = 0;
        REQUIRE(fmha_plan_workspace_size(plan.p, &workspace) == FMHA_STATUS_SUCCESS);
        CHECK((workspace == 0) == clustered);
        if (r.paged) continue;  // (fake_tensors has no block table)
        const fmha_tensors t = fake_tensors();
        const int launches = f.stats().launches;
        REQUIRE(fmha_run(plan.p, &t, clustered ? nullptr : fake_workspace(), workspace, nullptr) ==
                FMHA_STATUS_SUCCESS);
        CHECK(f.stats().launches == launches + (clustered ? 1 : 2));
        fake_cuda_launch decode;
        REQUIRE((clustered ? f.last_launch(&decode) : f.previous_launch(&decode)) == 1);
        CHECK(std::string(decode.kernel) == r.kernel);
        CHECK(decode.grid[0] == unsigned(i.num_splits));
        CHECK(decode.cluster[0] == (clustered ? 2u : 1u));
        CHECK(decode.cluster[1] * decode.cluster[2] == 1u);
        CHECK(decode.programmatic == (r.sm >= 90 ? 1 : 0));
        if (!clustered) continue;
        // Q (16 rows of 136), then the lone tile's 2 stages of 128 K and 128 V
        // rows for 8 warps, or the usual 3 stages of 64 for 4, then the
        // merge's inbox (16 rows of 136).
        const bool lone = std::string(r.kernel).find("_lone") != std::string::npos;
        CHECK(decode.block[0] * decode.block[1] * decode.block[2] == (lone ? 256u : 128u));
        CHECK(decode.shared_bytes ==
              unsigned(2 * 16 * 136 * 2 + (lone ? 2 * 2 * 128 : 3 * 2 * 64) * 128 * 2));
        CHECK(i.tile_n == (lone ? 128 : 64));
    }
}

// Dense hd96 decode on sm_90 streams the shallow tile (64 keys, 2 stages, 4
// CTAs per SM) where the grid has more than 2 and at most 3 CTAs per SM of a
// 132-SM device, 265-396 CTAs (launch_decode.cpp, kernel-notes d44); the split
// count is the 3-stage tile's. Other grids, paged caches, hd128 (the narrow
// tile there) and other devices keep their tiles. The cache's heads are
// padded to 128 elements here, so that they are not read in pairs (the next
// test has the pairs).
TEST_CASE("fake driver: dense hd96 decode takes the shallow tile for grids of 2-3 CTAs per SM on sm_90",
          "[cpu][fake-driver][run][decode]") {
    struct Row {
        int sm;
        int64_t batch, kv_heads, seqlen_k, head_dim;
        int32_t num_splits;  // 0: automatic
        bool paged;
        const char *kernel;
        unsigned grid_ctas;
    };
    const char *shallow = "fmha_decode_shallow_bf16_hd96", *plain = "fmha_decode_bf16_hd96";
    const Row rows[] = {
        {90, 48, 8, 4096, 96, 0, false, shallow, 384},  // 1 automatic split
        {90, 12, 32, 4096, 96, 0, false, shallow, 384},
        {90, 34, 8, 4096, 96, 1, false, shallow, 272},
        {90, 49, 8, 4096, 96, 1, false, shallow, 392},
        {90, 4, 8, 8192, 96, 10, false, shallow, 320},
        {90, 33, 8, 4096, 96, 1, false, plain, 264},   // 2 CTAs per SM
        {90, 50, 8, 4096, 96, 1, false, plain, 400},
        {90, 32, 8, 4096, 96, 0, false, plain, 256},
        {90, 40, 8, 4096, 96, 0, false, plain, 640},   // 2 automatic splits
        {90, 48, 8, 4096, 96, 1, true, "fmha_decode_paged_bf16_hd96", 384},
        {90, 48, 8, 4096, 128, 1, false, "fmha_decode_narrow_r8_bf16_hd128", 384},
        {80, 48, 8, 4096, 96, 1, false, plain, 384}};
    for (const Row &r : rows) {
        if (!embeds(r.sm)) continue;
        Fake &f = fresh_fake(r.sm);
        fmha_descriptor d = decode_row_desc(r.batch, 32, r.kv_heads, 1, r.seqlen_k, r.head_dim, r.paged);
        if (!r.paged) {  // [B, S, Hkv, 128] rows holding head_dim elements
            d.k_strides.head = 128;
            d.k_strides.seq = r.kv_heads * 128;
            d.k_strides.batch = r.seqlen_k * d.k_strides.seq;
            d.v_strides = d.k_strides;
        }
        d.kernel = FMHA_KERNEL_DECODE;
        d.num_splits = r.num_splits;
        Plan plan;
        REQUIRE(create(plan, d) == FMHA_STATUS_SUCCESS);
        const fmha_plan_info i = info_of(plan.p);
        INFO("sm_" << r.sm << " B" << r.batch << " Hkv " << r.kv_heads << " S" << r.seqlen_k << " hd"
                   << r.head_dim << (r.paged ? " paged" : "") << " splits " << r.num_splits << ": "
                   << i.kernel_name << ", " << i.num_splits << " splits");
        CHECK(std::string(i.kernel_name) == r.kernel);
        CHECK(int64_t(i.num_splits) * r.batch * r.kv_heads == r.grid_ctas);
        // Q (16 rows of 104 elements), then 2 stages of 64 K and 64 V rows (128
        // threads: run_decode_plan checks them).
        if (r.kernel == shallow)
            check_decode_launch(f, plan.p, i, r.grid_ctas, 16 * 104 * 2 + 2 * 2 * 64 * 96 * 2);
    }
}

// Contiguous hd96 reads two KV heads as one 192-column head on sm_90 (rows of
// whole 128-byte lines; kernel-notes d49) where the paired grid has at most
// one CTA per SM (3 stages, 144 KB) or is unsplit with at least 1.45 per SM
// (the shallow 2 stages, 96 KB); in between, split grids past one CTA per SM,
// heads not side by side and other devices stay unpaired (then the shallow
// tile's own rule applies). 132 SMs.
TEST_CASE("fake driver: hd96 decode pairs KV heads on the tile its grid was measured on",
          "[cpu][fake-driver][run][decode]") {
    struct Row {
        int sm;
        int64_t batch, q_heads, kv_heads, seqlen_k;
        Layout layout;
        int32_t num_splits;  // 0: automatic
        const char *kernel;
        int splits;
        unsigned grid_ctas;  // of the decode launch
    };
    const char *paired = "fmha_decode_paired_bf16_hd96";
    const char *paired_shallow = "fmha_decode_paired_shallow_bf16_hd96";
    const char *shallow = "fmha_decode_shallow_bf16_hd96", *plain = "fmha_decode_bf16_hd96";
    const Row rows[] = {
        {90, 32, 32, 8, 4096, Layout::BSHD, 0, paired, 1, 128},
        {90, 33, 32, 8, 4096, Layout::BSHD, 1, paired, 1, 132},
        {90, 8, 64, 8, 16384, Layout::BSHD, 0, paired, 4, 128},   // unpaired: 2 splits
        {90, 1, 32, 8, 32768, Layout::BSHD, 0, plain, 16, 128},   // 32 paired splits: past 16
        {90, 4, 32, 8, 16384, Layout::BSHD, 0, paired, 8, 128},   // unpaired: 4
        {90, 34, 32, 8, 4096, Layout::BSHD, 1, shallow, 1, 272},  // 136 pairs: unpaired
        {90, 48, 32, 8, 4096, Layout::BSHD, 0, paired_shallow, 1, 192},
        {90, 12, 32, 32, 4096, Layout::BSHD, 0, paired_shallow, 1, 192},
        {90, 64, 32, 32, 2048, Layout::BSHD, 0, paired_shallow, 1, 1024},
        {90, 40, 32, 8, 4096, Layout::BSHD, 0, plain, 2, 640},    // split, 640 pairs
        {90, 34, 32, 8, 4096, Layout::BSHD, 0, plain, 4, 1088},   // split, 1088 pairs
        {90, 16, 32, 8, 8192, Layout::BSHD, 0, plain, 1, 128},    // 64 pairs
        {90, 32, 32, 1, 4096, Layout::BSHD, 0, plain, 4, 256},    // MQA
        {90, 32, 32, 8, 4096, Layout::BHSD, 0, plain, 1, 256},    // heads not side by side
        {80, 32, 32, 8, 4096, Layout::BSHD, 0, plain, 1, 256},
    };
    for (const Row &r : rows) {
        if (!embeds(r.sm)) continue;
        Fake &f = fresh_fake(r.sm);
        fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, 96, r.layout, 1, r.seqlen_k);
        d.batch = r.batch;
        d.num_q_heads = r.q_heads;
        d.num_kv_heads = r.kv_heads;
        d.q_strides = d.o_strides = make_layout(r.layout, r.batch, 1, r.q_heads, 96).strides;
        d.k_strides = d.v_strides = make_layout(r.layout, r.batch, r.seqlen_k, r.kv_heads, 96).strides;
        d.kernel = FMHA_KERNEL_DECODE;
        d.num_splits = r.num_splits;
        Plan plan;
        REQUIRE(create(plan, d) == FMHA_STATUS_SUCCESS);
        const fmha_plan_info i = info_of(plan.p);
        INFO("sm_" << r.sm << " B" << r.batch << " H" << r.q_heads << "/" << r.kv_heads << " S"
                   << r.seqlen_k << " layout " << int(r.layout) << ": " << i.kernel_name << ", "
                   << i.num_splits << " splits");
        CHECK(std::string(i.kernel_name) == r.kernel);
        CHECK(i.num_splits == r.splits);
        // Q (16 rows of head_dim + 8), then the stages of 64 K and 64 V rows.
        const bool pair = r.kernel == paired || r.kernel == paired_shallow;
        const int cols = pair ? 192 : 96;
        const int stages = r.kernel == paired || r.kernel == plain ? 3 : 2;
        CHECK(i.threads_per_cta == 128);
        CHECK(i.shared_memory_bytes == 16 * (cols + 8) * 2 + stages * 2 * 64 * cols * 2);
        // (split, 16-row tiles x KV heads or pairs, batch): one tile of 4 or
        // 8 query rows per head or pair; MQA's 32 query heads take two tiles.
        const int64_t heads = pair ? r.kv_heads / 2 : r.kv_heads;
        const int64_t tiles = (int64_t(pair ? 2 : 1) * (r.q_heads / r.kv_heads) + 15) / 16;
        CHECK(int64_t(i.num_splits) * heads * tiles * r.batch == r.grid_ctas);
        check_decode_launch(f, plan.p, i, r.grid_ctas, unsigned(i.shared_memory_bytes));
    }
}

// The automatic split count on a 132-SM sm_90 device, for the serving
// benchmark's decode rows (bf16; T > 1 causal bottom-right): the counts
// measured fastest on the H200, or within 4% of it (docs/kernel-notes.md,
// d21; paged B64 is 3% off its best, 3 splits).
// Contiguous B=8 wants one CTA per SM (2 splits), paged B=1 two (32). Past
// one 16-row decode tile per KV head the Hopper kernel takes over (d30):
// T=4 H64/8 (32 rows), T=32 with 4 query heads per KV head (heads packed,
// 8 tiles, 16 splits: docs/kernel-notes.md h2), MHA from T=17 and paged
// caches alike; and so does head_dim 512 (split D, h9; at most 64 automatic
// splits, d36).
TEST_CASE("fake driver: automatic split counts of the decode benchmark rows",
          "[cpu][fake-driver][plan][decode]") {
    if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
    struct Row {
        int64_t batch, q_heads, kv_heads, seqlen_q, seqlen_k, head_dim;
        bool paged;
        int splits;
        fmha_kernel_family family = FMHA_KERNEL_DECODE;
    };
    const Row rows[] = {
        {1, 32, 8, 1, 32768, 128, false, 16}, {8, 32, 8, 1, 8192, 128, false, 2},
        {32, 32, 8, 1, 4096, 128, false, 1},  {64, 32, 32, 1, 2048, 128, false, 1},
        {8, 64, 8, 1, 16384, 128, false, 2},  {1, 32, 8, 1, 32768, 128, true, 32},
        {32, 32, 8, 1, 4096, 128, true, 1},   {64, 32, 32, 1, 2048, 128, true, 1},
        {1, 32, 8, 4, 32768, 128, false, 16}, {64, 32, 32, 16, 2048, 128, false, 1},
        {8, 64, 8, 4, 16384, 128, false, 2, FMHA_KERNEL_HOPPER},
        {1, 32, 8, 32, 32768, 128, false, 16, FMHA_KERNEL_HOPPER},
        {64, 32, 32, 17, 2048, 128, false, 1, FMHA_KERNEL_HOPPER},
        {64, 32, 32, 32, 2048, 128, true, 1, FMHA_KERNEL_HOPPER},
        {1, 8, 8, 256, 32768, 128, false, 8, FMHA_KERNEL_HOPPER},
        {1, 16, 1, 1, 4096, 512, false, 32, FMHA_KERNEL_HOPPER},
        {1, 16, 1, 1, 16384, 512, false, 64, FMHA_KERNEL_HOPPER},
        {8, 128, 1, 1, 16384, 512, false, 8, FMHA_KERNEL_HOPPER},
        {32, 128, 1, 1, 4096, 512, false, 2, FMHA_KERNEL_HOPPER}};
    for (const Row &r : rows) {
        fresh_fake(90);
        const int64_t hd = r.head_dim;
        const fmha_descriptor d =
            decode_row_desc(r.batch, r.q_heads, r.kv_heads, r.seqlen_q, r.seqlen_k, hd, r.paged);
        Plan plan;
        REQUIRE(create(plan, d) == FMHA_STATUS_SUCCESS);
        const fmha_plan_info i = info_of(plan.p);
        INFO("B" << r.batch << " H" << r.q_heads << "/" << r.kv_heads << " T" << r.seqlen_q
                 << " S" << r.seqlen_k << " hd" << hd << (r.paged ? " paged" : "") << ": "
                 << i.kernel_name);
        REQUIRE(i.kernel_family == r.family);
        CHECK(i.num_splits == r.splits);
    }
}

// Paged hd64 streams 128-key tiles on sm_90, except where only the 64-key
// tile's grid fits one wave (launch_decode.cpp, kernel-notes d37). On 132
// SMs: 4 CTAs of 64-key tiles per SM (528) against 3 of 128-key tiles (396).
// Other devices, where the wide tile was not measured, keep the 64-key one.
TEST_CASE("fake driver: paged hd64 takes the 64-key tile only where it alone fits one wave",
          "[cpu][fake-driver][run][decode]") {
    if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
    struct Row {
        int64_t batch, kv_heads, seqlen_k;
        int32_t num_splits;  // 0: automatic
        bool wide;
        unsigned grid_ctas;
    };
    const Row rows[] = {
        {8, 8, 1024, 1, true, 64},    {8, 8, 1024, 6, true, 384},   {8, 8, 1024, 7, false, 448},
        {8, 8, 1024, 8, false, 512},  {8, 8, 1024, 9, true, 576},   {8, 8, 1024, 16, true, 1024},
        {64, 8, 2048, 0, false, 512}, {32, 8, 4096, 0, true, 256},  {64, 32, 2048, 0, true, 2048}};
    for (int sm : {90, 80}) {
        for (Row r : rows) {
            if (!embeds(sm)) continue;
            if (sm != 90) r.wide = false;
            Fake &f = fresh_fake(sm);
            fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, 64, Layout::BSHD, 1, r.seqlen_k);
            d.batch = r.batch;
            d.num_kv_heads = r.kv_heads;
            d.num_q_heads = 32;
            REQUIRE(fmha_strides_bshd(&d.q_strides, 1, 32, 64) == FMHA_STATUS_SUCCESS);
            d.o_strides = d.q_strides;
            d.flags |= FMHA_FLAG_PAGED_KV;
            d.page_size = 16;
            d.max_pages_per_seq = r.seqlen_k / 16;
            d.num_pages = r.batch * d.max_pages_per_seq;
            REQUIRE(fmha_strides_bshd(&d.k_strides, 16, r.kv_heads, 64) == FMHA_STATUS_SUCCESS);
            d.v_strides = d.k_strides;
            d.kernel = FMHA_KERNEL_DECODE;
            d.num_splits = r.num_splits;
            Plan plan;
            REQUIRE(create(plan, d) == FMHA_STATUS_SUCCESS);
            const fmha_plan_info i = info_of(plan.p);
            INFO("sm_" << sm << " B" << r.batch << " Hkv " << r.kv_heads << " S"
                       << r.seqlen_k << " splits " << r.num_splits << ": " << i.kernel_name
                       << ", " << i.num_splits << " splits");
            CHECK(std::string(i.kernel_name) ==
                  (r.wide ? "fmha_decode_paged_wide_bf16_hd64" : "fmha_decode_paged_bf16_hd64"));
            CHECK(i.tile_n == (r.wide ? 128 : 64));
            if (sm == 90 || r.num_splits > 0)  // sm_80's automatic counts differ
                CHECK(int64_t(i.num_splits) * r.batch * r.kv_heads == r.grid_ctas);
            fmha_tensors t = fake_tensors();
            t.block_table = reinterpret_cast<const int32_t *>(g_fake_memory + 1536);
            fake_cuda_launch l;
            if (!run_decode_plan(f, plan.p, i, t, &l)) continue;
            CHECK(l.grid[0] * l.grid[1] * l.grid[2] == i.num_splits * r.batch * r.kv_heads);
            // Q (16 rows of 72 elements), then 2 stages of K and V rows.
            const unsigned keys = r.wide ? 128 : 64;
            CHECK(l.shared_bytes == 16 * 72 * 2 + 2 * 2 * keys * 64 * 2);
        }
    }
}

// Packed Q on a persistent grid without causal head groups walks only the
// real query blocks: the plain default tiles' `_varlen` entry points (h26),
// up to kSm90CompactMaxBatch (256) sequences; the others keep their kernels.
TEST_CASE("fake driver: varlen prefill takes the _varlen entry points where they apply",
          "[cpu][fake-driver][plan]") {
    if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
    struct Row {
        int64_t hd, batch, max_len;
        fmha_mask mask;
        float softcap;
        const char *kernel;
    };
    const Row rows[] = {
        {128, 10, 3953, FMHA_MASK_NONE, 0.f, "fmha_fwd_sm90_bf16_hd128_varlen"},
        {64, 10, 3953, FMHA_MASK_NONE, 0.f, "fmha_fwd_sm90_bf16_hd64_varlen"},
        {96, 10, 2000, FMHA_MASK_NONE, 0.f, "fmha_fwd_sm90_bf16_hd96_varlen"},
        {256, 10, 2000, FMHA_MASK_NONE, 0.f, "fmha_fwd_sm90_bf16_hd256_varlen"},
        {128, 256, 1000, FMHA_MASK_NONE, 0.f, "fmha_fwd_sm90_bf16_hd128_varlen"},
        {128, 257, 1000, FMHA_MASK_NONE, 0.f, "fmha_fwd_sm90_bf16_hd128"},  // batch cap
        {128, 10, 3953, FMHA_MASK_CAUSAL_TOP_LEFT, 0.f, "fmha_fwd_sm90_bf16_hd128"},  // head groups
        {128, 10, 3953, FMHA_MASK_NONE, 30.f, "fmha_fwd_sm90_bf16_hd128_scoremod"},
        {128, 10, 8192, FMHA_MASK_NONE, 0.f, "fmha_fwd_sm90_bf16_hd128_wide"},  // one tile per CTA
        {512, 10, 2000, FMHA_MASK_NONE, 0.f, "fmha_fwd_sm90_bf16_hd512_shared_s"}};
    for (const Row &r : rows) {
        Fake &f = fresh_fake(90);
        fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, r.hd, Layout::BSHD, r.max_len, r.max_len);
        d.batch = r.batch;
        d.flags |= FMHA_FLAG_VARLEN_Q | FMHA_FLAG_VARLEN_K;
        d.total_q = d.total_k = r.batch * r.max_len;
        d.q_strides.batch = d.o_strides.batch = d.k_strides.batch = d.v_strides.batch = 0;
        d.mask = r.mask;
        d.softcap = r.softcap;
        d.kernel = FMHA_KERNEL_HOPPER;
        Plan plan;
        INFO("hd " << r.hd << " batch " << r.batch << " max_len " << r.max_len << " mask "
                   << int(r.mask) << " softcap " << r.softcap);
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
        const fmha_plan_info i = info_of(plan.p);
        CHECK(std::string(i.kernel_name) == r.kernel);
        fmha_tensors t = fake_tensors();
        t.cu_seqlens_q = t.cu_seqlens_k = reinterpret_cast<const int32_t *>(g_fake_memory + 1536);
        REQUIRE(fmha_run(plan.p, &t, fake_workspace(), i.workspace_bytes, nullptr) ==
                FMHA_STATUS_SUCCESS);
        fake_cuda_launch l;
        REQUIRE(f.last_launch(&l) == 1);
        CHECK(std::string(l.kernel) == r.kernel);
    }
}

// A paged cache read in 16-row chunks by the plain hd128 (default or wide) or
// hd256 tile takes the `_paged16` entry points (V one TMA box per chunk,
// h28, h29), unless packed
// Q walks compactly (`_varlen`); other tiles and chunk sizes keep theirs, and
// pages no box fits take `_gather` (h34).
TEST_CASE("fake driver: 16-row page chunks take the _paged16 entry points where they apply",
          "[cpu][fake-driver][plan]") {
    if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
    struct Row {
        fmha_dtype dtype;
        int64_t hd, seqlen_k;
        int32_t page_size;
        fmha_mask mask;
        float softcap;
        bool varlen_q;
        const char *kernel;
    };
    const fmha_mask causal = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
    const Row rows[] = {
        {FMHA_DTYPE_BF16, 128, 2000, 16, causal, 0.f, false, "fmha_fwd_sm90_bf16_hd128_paged16"},
        {FMHA_DTYPE_FP16, 128, 2000, 16, causal, 0.f, false, "fmha_fwd_sm90_fp16_hd128_paged16"},
        {FMHA_DTYPE_FP16, 256, 2000, 16, causal, 0.f, false, "fmha_fwd_sm90_fp16_hd256_paged16"},
        {FMHA_DTYPE_BF16, 256, 2000, 32, causal, 0.f, false, "fmha_fwd_sm90_bf16_hd256_paged16"},
        {FMHA_DTYPE_BF16, 128, 2000, 48, causal, 0.f, true, "fmha_fwd_sm90_bf16_hd128_paged16"},
        {FMHA_DTYPE_BF16, 128, 2000, 32, causal, 0.f, false, "fmha_fwd_sm90_bf16_hd128"},
        {FMHA_DTYPE_BF16, 128, 2000, 16, causal, 30.f, false, "fmha_fwd_sm90_bf16_hd128_scoremod"},
        {FMHA_DTYPE_BF16, 128, 9000, 16, causal, 0.f, false, "fmha_fwd_sm90_bf16_hd128_wide_paged16"},
        {FMHA_DTYPE_FP16, 128, 9000, 32, causal, 0.f, false, "fmha_fwd_sm90_fp16_hd128_wide"},
        {FMHA_DTYPE_BF16, 64, 2000, 16, causal, 0.f, false, "fmha_fwd_sm90_bf16_hd64_rowmask"},
        {FMHA_DTYPE_BF16, 96, 2000, 16, causal, 0.f, false, "fmha_fwd_sm90_bf16_hd96"},
        {FMHA_DTYPE_BF16, 128, 2000, 16, FMHA_MASK_NONE, 0.f, true,
         "fmha_fwd_sm90_bf16_hd128_varlen"},
        // Pages no box fits: `_gather` before the compact walk and the wide tile.
        {FMHA_DTYPE_BF16, 128, 2000, 1, FMHA_MASK_NONE, 0.f, true, "fmha_fwd_sm90_bf16_hd128_gather"},
        {FMHA_DTYPE_FP16, 128, 9000, 8, causal, 0.f, false, "fmha_fwd_sm90_fp16_hd128_gather"},
        {FMHA_DTYPE_BF16, 64, 2000, 24, causal, 0.f, false, "fmha_fwd_sm90_bf16_hd64_gather"}};
    for (const Row &r : rows) {
        Fake &f = fresh_fake(90);
        const int64_t batch = 3, seqlen_q = 1000;
        fmha_descriptor d = make_desc(r.dtype, r.hd, Layout::BSHD, seqlen_q, r.seqlen_k);
        d.batch = batch;
        d.num_q_heads = 8;
        d.num_kv_heads = 2;
        d.q_strides = d.o_strides = make_layout(Layout::BSHD, batch, seqlen_q, 8, r.hd).strides;
        if (r.varlen_q) {
            d.flags |= FMHA_FLAG_VARLEN_Q;
            d.total_q = batch * seqlen_q;
            d.q_strides.batch = d.o_strides.batch = 0;
        }
        d.flags |= FMHA_FLAG_PAGED_KV | FMHA_FLAG_SEQUSED_K;
        d.page_size = r.page_size;
        d.max_pages_per_seq = (r.seqlen_k + r.page_size - 1) / r.page_size;
        d.num_pages = batch * d.max_pages_per_seq;
        REQUIRE(fmha_strides_bshd(&d.k_strides, r.page_size, 2, r.hd) == FMHA_STATUS_SUCCESS);
        d.v_strides = d.k_strides;
        d.mask = r.mask;
        d.softcap = r.softcap;
        d.kernel = FMHA_KERNEL_HOPPER;
        Plan plan;
        INFO("hd " << r.hd << " keys " << r.seqlen_k << " page " << r.page_size << " mask "
                   << int(r.mask) << " softcap " << r.softcap << " varlen " << r.varlen_q);
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
        const fmha_plan_info i = info_of(plan.p);
        CHECK(std::string(i.kernel_name) == r.kernel);
        fmha_tensors t = fake_tensors();
        t.block_table = reinterpret_cast<const int32_t *>(g_fake_memory + 1536);
        t.seqused_k = reinterpret_cast<const int32_t *>(g_fake_memory + 1792);
        if (r.varlen_q) t.cu_seqlens_q = reinterpret_cast<const int32_t *>(g_fake_memory + 2048);
        const int before = f.stats().tensor_maps;
        REQUIRE(fmha_run(plan.p, &t, fake_workspace(), i.workspace_bytes, nullptr) ==
                FMHA_STATUS_SUCCESS);
        fake_cuda_launch l;
        REQUIRE(f.last_launch(&l) == 1);
        CHECK(std::string(l.kernel) == r.kernel);
        if (std::string(r.kernel).find("_gather") != std::string::npos) {
            CHECK(f.stats().tensor_maps == before + 2);  // Q and O: K/V rows copied, no maps
            continue;
        }
        const bool chunk_major = std::string(r.kernel).find("_paged16") != std::string::npos;
        const fake_cuda_tensor_map &v = f.stats().maps[(before + 2) % FAKE_CUDA_MAP_RING];
        CHECK(v.rank == (chunk_major ? 5u : 4u));
    }
}

TEST_CASE("fake driver: packed Q with no rows runs nothing", "[cpu][fake-driver][run][decode]") {
    Fake &f = fresh_fake(90);
    fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, 128, Layout::BSHD, 1, 2048);
    d.flags |= FMHA_FLAG_VARLEN_Q;
    d.total_q = 0;
    d.num_splits = 4;
    d.q_strides.batch = d.o_strides.batch = 0;
    Plan plan;
    REQUIRE(create(plan, d) == FMHA_STATUS_SUCCESS);
    const fmha_plan_info i = info_of(plan.p);
    fmha_tensors t = fake_tensors();
    t.cu_seqlens_q = reinterpret_cast<const int32_t *>(g_fake_memory + 1536);
    const int launches = f.stats().launches;
    CHECK(fmha_run(plan.p, &t, fake_workspace(), i.workspace_bytes, nullptr) ==
          FMHA_STATUS_SUCCESS);
    CHECK(f.stats().launches == launches);
}

// Without the Hopper kernel (other devices, and pages of under 16 rows on
// sm_90), AUTO picks between the decode and portable kernels by the K/V
// reads of each: the decode kernel while its 16-row tiles are at most 1.5
// times the portable kernel's query heads x 128-position blocks, and up to
// 32 query positions over pages or at head_dim 64 (launch_decode.cpp,
// prefers_decode; kernel notes d55, p13). The portable kernel splits the
// keys of grids under one CTA per SM slot (two per SM).
TEST_CASE("fake driver: AUTO between the decode and portable kernels", "[cpu][fake-driver][plan][decode]") {
    struct Row {
        int32_t page_size;  // 0: contiguous cache
        int64_t batch, q_heads, kv_heads, seqlen_q;
        fmha_kernel_family sm90, sm80;  // the family AUTO picks
    };
    const fmha_kernel_family kDecode = FMHA_KERNEL_DECODE, kPortable = FMHA_KERNEL_PORTABLE,
                             kHopper = FMHA_KERNEL_HOPPER;
    const Row rows[] = {
        // sm_90: pages of under 16 rows go to the Hopper kernel's `_gather`
        // entry points past one 16-row tile per KV head, as pages of 16 do.
        {1, 3, 32, 8, 16, kHopper, kDecode},        // 4 decode tiles against 4 portable reads
        {1, 3, 32, 8, 32, kHopper, kDecode},        // 8 against 4, but 32 positions over pages
        {1, 3, 32, 8, 128, kHopper, kPortable},     // 32 against 4
        {1, 3, 32, 32, 64, kHopper, kPortable},     // 4 against 1
        {1, 3, 32, 8, 1024, kHopper, kPortable},    // chunked prefill: 256 against 32
        {2, 3, 32, 8, 24, kHopper, kDecode},        // 6 against 4: at the bound
        {2, 3, 32, 8, 32, kHopper, kDecode},        // 32 positions over pages
        {4, 3, 32, 8, 64, kHopper, kPortable},
        {8, 3, 32, 8, 4, kDecode, kDecode},         // one 16-row tile
        {8, 3, 32, 8, 128, kHopper, kPortable},
        {8, 3, 32, 32, 32, kHopper, kDecode},       // 2 against 1, 32 positions over pages
        {8, 3, 32, 32, 128, kHopper, kPortable},
        {12, 3, 32, 32, 64, kHopper, kPortable},
        {1, 1, 32, 32, 32, kHopper, kDecode},
        {1, 1, 32, 8, 64, kHopper, kPortable},      // 32 portable CTAs, split 8 ways
        {1, 1, 32, 8, 128, kHopper, kPortable},
        {16, 1, 16, 2, 128, kHopper, kPortable},    // 16 CTAs, split 16 ways (was decode, d56)
        {16, 3, 32, 8, 32, kHopper, kDecode},       // the Hopper kernel's pages; sm_80: 32 positions
        {0, 3, 32, 8, 16, kHopper, kDecode},        // contiguous: 4 against 4
        {0, 3, 32, 8, 32, kHopper, kPortable},      // contiguous hd128 at 32 positions
        {0, 3, 32, 32, 64, kHopper, kPortable},     // 4 against 1 (64 rows took the decode kernel before d55)
        {0, 1, 32, 32, 128, kHopper, kPortable},    // small grids split (took the decode kernel in d56)
        {0, 1, 32, 8, 128, kHopper, kPortable},
        {0, 1, 16, 2, 64, kHopper, kPortable},
        {0, 1, 32, 32, 256, kHopper, kPortable},
        {0, 1, 16, 2, 512, kHopper, kPortable},
        {0, 2, 32, 8, 64, kHopper, kPortable},
    };
    for (const int sm : {80, 90})
        for (const Row &r : rows) {
            if (!embeds(sm)) continue;
            fresh_fake(sm);
            const int64_t hd = 128, seqlen_k = 4096;
            fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, hd, Layout::BSHD, r.seqlen_q, seqlen_k);
            d.num_splits = 0;  // automatic
            d.batch = r.batch;
            d.num_q_heads = r.q_heads;
            d.num_kv_heads = r.kv_heads;
            d.q_strides = d.o_strides = make_layout(Layout::BSHD, r.batch, r.seqlen_q, r.q_heads, hd).strides;
            d.k_strides = d.v_strides = make_layout(Layout::BSHD, r.batch, seqlen_k, r.kv_heads, hd).strides;
            d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
            if (r.page_size > 0) {
                d.flags |= FMHA_FLAG_PAGED_KV | FMHA_FLAG_SEQUSED_K;
                d.page_size = r.page_size;
                d.max_pages_per_seq = (seqlen_k + r.page_size - 1) / r.page_size;
                d.num_pages = r.batch * d.max_pages_per_seq;
                REQUIRE(fmha_strides_bshd(&d.k_strides, r.page_size, r.kv_heads, hd) == FMHA_STATUS_SUCCESS);
                d.v_strides = d.k_strides;
            }
            Plan plan;
            INFO("sm_" << sm << " page " << r.page_size << " B" << r.batch << " H" << r.q_heads << "/"
                       << r.kv_heads << " T" << r.seqlen_q);
            FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
            const fmha_plan_info i = info_of(plan.p);
            CHECK(i.kernel_family == (sm == 90 ? r.sm90 : r.sm80));
            // Paged problems take the portable kernel's `_paged` entry points.
            // Up to 64 query rows, the `_short` ones (the 64-row query block);
            // grids under 264 CTAs (132 SMs, two slots each) the `_split` ones,
            // as many splits as fill the slots, each of >= 256 of the 4096 keys.
            if (i.kernel_family == FMHA_KERNEL_PORTABLE) {
                const int64_t block = r.seqlen_q <= 64 ? 64 : 128;
                const int64_t ctas = (r.seqlen_q + block - 1) / block * r.q_heads * r.batch;
                const int64_t splits = std::max<int64_t>(1, std::min<int64_t>(264 / ctas, 16));
                CHECK(i.num_splits == splits);
                CHECK(std::string(i.kernel_name) ==
                      std::string("fmha_fwd_portable") + (r.page_size > 0 ? "_paged" : "") +
                          (r.seqlen_q <= 64 ? "_short" : "") + "_bf16_hd128" +
                          (splits > 1 ? "_split" : ""));
            }
        }
}

// hd512 on sm_90: the Hopper kernel, but over pages it gathers (no 32-row
// box fits) the decode kernel keeps one 16-row tile per KV head (h39, h40).
TEST_CASE("fake driver: AUTO at head_dim 512 over gathered pages", "[cpu][fake-driver][plan][decode]") {
    if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
    struct Row {
        int32_t page_size;  // 0: contiguous
        int64_t q_heads, seqlen_q;
        fmha_kernel_family family;
        const char *kernel;
        float softcap = 0.0f;  // score modifiers choose the same kernel (h41)
    };
    const Row rows[] = {
        {1, 16, 1, FMHA_KERNEL_DECODE, "fmha_decode_paged_bf16_hd512"},
        {1, 16, 1, FMHA_KERNEL_DECODE, "fmha_decode_paged_bf16_hd512", 30.0f},
        {3, 32, 1, FMHA_KERNEL_HOPPER, "fmha_fwd_sm90_bf16_hd512_gather_scoremod", 30.0f},
        {1, 128, 1, FMHA_KERNEL_HOPPER, "fmha_fwd_sm90_bf16_hd512_shared_s_gather_scoremod", 30.0f},
        {1, 16, 4, FMHA_KERNEL_HOPPER, "fmha_fwd_sm90_bf16_hd512_shared_s_gather"},
        {1, 128, 1, FMHA_KERNEL_HOPPER, "fmha_fwd_sm90_bf16_hd512_shared_s_gather"},
        {3, 8, 1, FMHA_KERNEL_DECODE, "fmha_decode_paged_bf16_hd512"},
        {3, 32, 1, FMHA_KERNEL_HOPPER, "fmha_fwd_sm90_bf16_hd512_gather"},
        // pages of 16 and 48 are gathered at hd512 too (h40); of 32 and 64: TMA boxes
        {16, 16, 1, FMHA_KERNEL_DECODE, "fmha_decode_paged_bf16_hd512"},
        {48, 32, 1, FMHA_KERNEL_HOPPER, "fmha_fwd_sm90_bf16_hd512_gather"},
        {16, 16, 4, FMHA_KERNEL_HOPPER, "fmha_fwd_sm90_bf16_hd512_shared_s_gather"},
        {32, 16, 1, FMHA_KERNEL_HOPPER, "fmha_fwd_sm90_bf16_hd512"},
        {64, 16, 4, FMHA_KERNEL_HOPPER, "fmha_fwd_sm90_bf16_hd512_shared_s"},
        {0, 16, 1, FMHA_KERNEL_HOPPER, nullptr},
    };
    for (const Row &r : rows) {
        fresh_fake(90);
        const int64_t hd = 512, seqlen_k = 4096, batch = 8;
        fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, hd, Layout::BSHD, r.seqlen_q, seqlen_k);
        d.batch = batch;
        d.num_q_heads = r.q_heads;
        d.num_kv_heads = 1;
        d.q_strides = d.o_strides =
            make_layout(Layout::BSHD, batch, r.seqlen_q, r.q_heads, hd).strides;
        d.k_strides = d.v_strides = make_layout(Layout::BSHD, batch, seqlen_k, 1, hd).strides;
        d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
        d.softcap = r.softcap;
        if (r.page_size > 0) {
            d.flags |= FMHA_FLAG_PAGED_KV;
            d.page_size = r.page_size;
            d.max_pages_per_seq = (seqlen_k + r.page_size - 1) / r.page_size;
            d.num_pages = batch * d.max_pages_per_seq;
            REQUIRE(fmha_strides_bshd(&d.k_strides, r.page_size, 1, hd) == FMHA_STATUS_SUCCESS);
            d.v_strides = d.k_strides;
        }
        INFO("page " << r.page_size << " H" << r.q_heads << "/1 T" << r.seqlen_q << " softcap "
                     << r.softcap);
        Plan plan;
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
        const fmha_plan_info i = info_of(plan.p);
        CHECK(i.kernel_family == r.family);
        if (r.kernel != nullptr) CHECK(std::string(i.kernel_name) == r.kernel);
    }
}

TEST_CASE("fake driver: on 99 KB devices hd128 and hd256 decode on smaller tiles, hd512 has "
          "no kernel",
          "[cpu][fake-driver][decode]") {
    if (!embeds(80)) FMHA_SKIP("this build has no image for sm_80");
    Fake &f = fresh_fake(86);
    f.configure("smem_optin", 99 * 1024);  // sm_86/89/120-class shared memory
    // hd128 over a contiguous cache: the usual tile (102,656 bytes) does not
    // fit, the narrow one (53,504) does; GQA heads stay packed.
    fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, 128, Layout::BSHD, 1, 4096);
    Plan plan;
    REQUIRE(create(plan, d) == FMHA_STATUS_SUCCESS);
    fmha_plan_info i = info_of(plan.p);
    CHECK(i.kernel_family == FMHA_KERNEL_DECODE);
    CHECK(std::string(i.kernel_name) == "fmha_decode_narrow_bf16_hd128");
    CHECK(i.shared_memory_bytes == 53504);
    const fmha_tensors t = fake_tensors();
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                        fmha_run(plan.p, &t, fake_workspace(), i.workspace_bytes, nullptr));
    fake_cuda_launch l;  // the decode launch, before the combine when split
    REQUIRE((i.num_splits > 1 ? f.previous_launch(&l) : f.last_launch(&l)) == 1);
    CHECK(std::string(l.kernel) == i.kernel_name);
    CHECK(l.shared_bytes == 53504u);
    // hd256 (205,056 bytes on the usual tile): the compact tile (73,984).
    d = make_desc(FMHA_DTYPE_BF16, 256, Layout::BSHD, 1, 4096);
    Plan compact;
    REQUIRE(create(compact, d) == FMHA_STATUS_SUCCESS);
    i = info_of(compact.p);
    CHECK(i.kernel_family == FMHA_KERNEL_DECODE);
    CHECK(std::string(i.kernel_name) == "fmha_decode_compact_bf16_hd256");
    CHECK(i.shared_memory_bytes == 73984);
    // hd512: even the compact tile (147,712 bytes) does not fit: a clear
    // NOT_SUPPORTED, forced or AUTO (no other kernel runs hd512 there).
    d = make_desc(FMHA_DTYPE_BF16, 512, Layout::BSHD, 1, 4096);
    for (int k : {FMHA_KERNEL_AUTO, FMHA_KERNEL_DECODE}) {
        d.kernel = k;
        Plan none;
        CHECK(create(none, d) == FMHA_STATUS_NOT_SUPPORTED);
        CHECK(std::string(fmha_last_error_message()).find("shared memory") != std::string::npos);
    }
}

// sm_80/87 (163 KB per block): hd256 and hd512 decode on the compact tile,
// dense and paged, where the usual tiles (205,056 and 213,248 bytes) do not
// fit; hd512 had no kernel there before.
TEST_CASE("fake driver: on 163 KB devices hd256 and hd512 decode on the compact tile",
          "[cpu][fake-driver][decode]") {
    if (!embeds(80)) FMHA_SKIP("this build has no image for sm_80");
    struct Row {
        int64_t hd, q_heads, kv_heads;
        bool paged;
        const char *kernel;
        int smem;
    } rows[] = {{256, 16, 4, false, "fmha_decode_compact_bf16_hd256", 73984},
                {256, 16, 4, true, "fmha_decode_paged_compact_bf16_hd256", 73984},
                {512, 16, 1, false, "fmha_decode_compact_bf16_hd512", 147712},
                {512, 16, 1, true, "fmha_decode_paged_compact_bf16_hd512", 147712}};
    for (const Row &r : rows) {
        Fake &f = fresh_fake(80);
        f.configure("smem_optin", 166912);
        const fmha_descriptor d = decode_row_desc(4, r.q_heads, r.kv_heads, 1, 4096, r.hd, r.paged);
        INFO(r.kernel);
        Plan plan;
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
        const fmha_plan_info i = info_of(plan.p);
        CHECK(i.kernel_family == FMHA_KERNEL_DECODE);
        CHECK(std::string(i.kernel_name) == r.kernel);
        CHECK(i.shared_memory_bytes == r.smem);
        CHECK(i.threads_per_cta == 128);
        fmha_tensors t = fake_tensors();
        if (r.paged) t.block_table = reinterpret_cast<const int32_t *>(g_fake_memory + 1536);
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                            fmha_run(plan.p, &t, fake_workspace(), i.workspace_bytes, nullptr));
        fake_cuda_launch l;
        REQUIRE((i.num_splits > 1 ? f.previous_launch(&l) : f.last_launch(&l)) == 1);
        CHECK(std::string(l.kernel) == r.kernel);
        CHECK(l.shared_bytes == static_cast<unsigned>(r.smem));
        CHECK(fmha_check_support(&d, 80) == FMHA_STATUS_SUCCESS);
    }
}

// FMHA_SHARED_MEMORY_LIMIT for a test's plans, unset again when it ends.
struct SharedMemoryLimit {
    void set(const char *bytes) const {
        if (bytes) setenv("FMHA_SHARED_MEMORY_LIMIT", bytes, 1);
        else unsetenv("FMHA_SHARED_MEMORY_LIMIT");
    }
    ~SharedMemoryLimit() { unsetenv("FMHA_SHARED_MEMORY_LIMIT"); }
};

// The cluster tiles need their inbox on top of the tile's shared memory: a
// device (here a cap) that fits the plain tile but not the inbox gets the
// next tile down, never a plan its shared memory cannot launch.
TEST_CASE("fake driver: the cluster tiles count their inbox against the device's shared memory",
          "[cpu][fake-driver][decode]") {
    if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
    const SharedMemoryLimit limit_guard;
    struct Row {
        const char *limit;  // bytes per block
        const char *kernel;
    };
    // B8 H32/8 S8192: 128 CTAs in 2 splits. The lone cluster tile takes
    // 139,776 bytes (135,424 without its inbox), the usual one 107,008
    // (102,656), the narrow one 53,504.
    const Row rows[] = {{nullptr, "fmha_decode_r8_cluster_lone_bf16_hd128"},
                        {"139776", "fmha_decode_r8_cluster_lone_bf16_hd128"},
                        {"137000", "fmha_decode_r8_cluster_bf16_hd128"},
                        {"107008", "fmha_decode_r8_cluster_bf16_hd128"},
                        {"104000", "fmha_decode_r8_bf16_hd128"},
                        {"101376", "fmha_decode_narrow_r8_bf16_hd128"}};
    for (const Row &r : rows) {
        INFO("FMHA_SHARED_MEMORY_LIMIT " << (r.limit ? r.limit : "unset"));
        Fake &f = fresh_fake(90);
        limit_guard.set(r.limit);
        fmha_descriptor d = decode_row_desc(8, 32, 8, 1, 8192, 128, false);
        d.kernel = FMHA_KERNEL_DECODE;
        d.num_splits = 2;
        Plan plan;
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
        const fmha_plan_info i = info_of(plan.p);
        CHECK(std::string(i.kernel_name) == r.kernel);
        CHECK(i.num_splits == 2);
        size_t workspace = 0;
        REQUIRE(fmha_plan_workspace_size(plan.p, &workspace) == FMHA_STATUS_SUCCESS);
        const fmha_tensors t = fake_tensors();
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                            fmha_run(plan.p, &t, workspace ? fake_workspace() : nullptr,
                                     workspace, nullptr));
        if (r.limit) {
            fake_cuda_launch decode;
            REQUIRE((workspace ? f.previous_launch(&decode) : f.last_launch(&decode)) == 1);
            CHECK(decode.shared_bytes <= unsigned(std::atoi(r.limit)));
        }
    }
}

// FMHA_SHARED_MEMORY_LIMIT lowers the shared memory per block plans assume
// (the GPU tests run the smaller devices' tiles on the H200 with it), never
// raises it, and a bad value is named.
TEST_CASE("fake driver: FMHA_SHARED_MEMORY_LIMIT caps the shared memory plans assume",
          "[cpu][fake-driver][decode]") {
    if (!embeds(80)) FMHA_SKIP("this build has no image for sm_80");
    const SharedMemoryLimit limit_guard;
    const fmha_descriptor d = decode_row_desc(4, 16, 1, 1, 4096, 512, false);
    auto kernel_with = [&](const char *limit) {
        fresh_fake(80).configure("smem_optin", 232448);  // sm_100-class
        limit_guard.set(limit);
        Plan plan;
        const fmha_status st = create(plan, d);
        const fmha_status support = fmha_check_support(&d, FMHA_SM_CURRENT_DEVICE);
        CHECK(support == st);  // the support query sees the same limit
        return st == FMHA_STATUS_SUCCESS ? std::string(info_of(plan.p).kernel_name)
                                         : std::string(fmha_status_string(st)) + ": " +
                                               fmha_last_error_message();
    };
    CHECK(kernel_with(nullptr) == "fmha_decode_bf16_hd512");
    CHECK(kernel_with("166912") == "fmha_decode_compact_bf16_hd512");
    CHECK(kernel_with("1000000") == "fmha_decode_bf16_hd512");  // never raised
    const std::string small = kernel_with("101376");
    CHECK(small.find("FMHA_STATUS_NOT_SUPPORTED") == 0);
    CHECK(small.find("shared memory") != std::string::npos);
    CHECK(small.find("as environment FMHA_SHARED_MEMORY_LIMIT sets") != std::string::npos);
    for (const char *bad : {"abc", "-5", "0", "12kb"}) {
        INFO(bad);
        const std::string got = kernel_with(bad);
        CHECK(got.find("FMHA_STATUS_INVALID_ARGUMENT") == 0);
        CHECK(got.find("FMHA_SHARED_MEMORY_LIMIT") != std::string::npos);
    }
}

// fmha_check_support must answer what fmha_create_plan does: for the current
// device from its attributes (sm, opt-in shared memory per block), and for an
// explicit sm from that architecture's opt-in maximum (sm_80: 166,912 bytes;
// sm_86: 101,376).
TEST_CASE("fake driver: support queries and plans agree on shared memory",
          "[cpu][fake-driver][decode]") {
    if (!embeds(80)) FMHA_SKIP("this build has no image for sm_80");
    struct Row {
        const char *what;
        int64_t hd;
        int kernel;
        int32_t splits;
        bool fits_sm80, fits_sm86;
    } rows[] = {
        {"hd512 AUTO (decode: 213,248 bytes; compact tile 147,712)", 512, FMHA_KERNEL_AUTO, 0,
         true, false},
        {"hd512 DECODE", 512, FMHA_KERNEL_DECODE, 0, true, false},
        {"hd256 DECODE (205,056 bytes; compact tile 73,984)", 256, FMHA_KERNEL_DECODE, 0, true,
         true},
        {"hd256 AUTO, 4 splits", 256, FMHA_KERNEL_AUTO, 4, true, true},
        {"hd256 DECODE, 4 splits", 256, FMHA_KERNEL_DECODE, 4, true, true},
        {"hd256 AUTO", 256, FMHA_KERNEL_AUTO, 0, true, true},
        {"hd128 DECODE (102,656 bytes; the narrow tile's 53,504 on sm_86)", 128,
         FMHA_KERNEL_DECODE, 0, true, true},
        {"hd128 DECODE, 4 splits", 128, FMHA_KERNEL_DECODE, 4, true, true},
        {"hd128 AUTO", 128, FMHA_KERNEL_AUTO, 0, true, true},
    };
    for (const int sm : {80, 86}) {
        const int optin = sm == 80 ? 166912 : 101376;
        for (const Row &r : rows) {
            Fake &f = fresh_fake(sm);
            f.configure("smem_optin", optin);
            fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, r.hd, Layout::BSHD, 1, 4096);
            d.kernel = r.kernel;
            d.num_splits = r.splits;
            const fmha_status expected = (sm == 80 ? r.fits_sm80 : r.fits_sm86)
                                             ? FMHA_STATUS_SUCCESS
                                             : FMHA_STATUS_NOT_SUPPORTED;
            INFO("sm_" << sm << " with " << optin << " bytes: " << r.what);
            const fmha_status current = fmha_check_support(&d, FMHA_SM_CURRENT_DEVICE);
            INFO("current device: " << fmha_status_string(current) << ": "
                                    << fmha_last_error_message());
            const fmha_status by_sm = fmha_check_support(&d, sm);
            INFO("sm " << sm << ": " << fmha_status_string(by_sm) << ": "
                       << fmha_last_error_message());
            Plan plan;
            const fmha_status created = create(plan, d);
            const std::string msg = fmha_last_error_message();
            INFO("plan: " << fmha_status_string(created) << ": " << msg);
            CHECK(current == expected);
            CHECK(by_sm == expected);
            CHECK(created == expected);
            if (expected == FMHA_STATUS_SUCCESS) {
                const fmha_plan_info i = info_of(plan.p);
                CHECK(i.shared_memory_bytes <= optin);
                if (r.kernel == FMHA_KERNEL_DECODE) CHECK(i.kernel_family == FMHA_KERNEL_DECODE);
                if (r.hd == 256)  // the compact tile (73,984 bytes) fits both
                    CHECK(std::string(i.kernel_name) == "fmha_decode_compact_bf16_hd256");
                if (r.splits > 0) CHECK(i.num_splits == r.splits);
            } else {
                CHECK(msg.find("shared memory") != std::string::npos);
                CHECK(msg.find(std::to_string(optin)) != std::string::npos);
            }
        }
    }
}

TEST_CASE("fake driver: a launch in a destroyed context gives CONTEXT_MISMATCH",
          "[cpu][fake-driver]") {
    const int kContextIsDestroyed = 709;  // CUDA_ERROR_CONTEXT_IS_DESTROYED (driver 580)
    Fake &f = fresh_fake(80);
    const fmha_tensors t = fake_tensors();
    SECTION("fmha_run") {
        Plan plan;
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, make_desc()));
        f.fail("cuLaunchKernel", kContextIsDestroyed);
        FMHA_CHECK_STATUS(FMHA_STATUS_CONTEXT_MISMATCH, fmha_run(plan.p, &t, nullptr, 0, nullptr));
        CHECK(std::string(fmha_last_error_message()).find("CUDA_ERROR_CONTEXT_IS_DESTROYED") !=
              std::string::npos);
    }
    SECTION("fmha_run of a split decode plan") {
        fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, 128, Layout::BSHD, 1, 4096);
        d.kernel = FMHA_KERNEL_DECODE;
        d.num_splits = 4;
        Plan plan;
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, d));
        const fmha_plan_info i = info_of(plan.p);
        f.fail("cuLaunchKernel", kContextIsDestroyed);
        FMHA_CHECK_STATUS(FMHA_STATUS_CONTEXT_MISMATCH,
                          fmha_run(plan.p, &t, fake_workspace(), i.workspace_bytes, nullptr));
    }
    SECTION("fmha_run_merge") {
        fmha_merge_descriptor m = make_merge_desc();
        Plan plan;
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_create_merge_plan(&plan.p, &m));
        const void *o_parts[] = {g_fake_memory, g_fake_memory + 256};
        const float *lse_parts[] = {reinterpret_cast<const float *>(g_fake_memory + 512),
                                    reinterpret_cast<const float *>(g_fake_memory + 768)};
        f.fail("cuLaunchKernel", kContextIsDestroyed);
        FMHA_CHECK_STATUS(FMHA_STATUS_CONTEXT_MISMATCH,
                          fmha_run_merge(plan.p, o_parts, lse_parts, g_fake_memory + 1024,
                                         nullptr, nullptr));
    }
    SECTION("making the plan's context current") {
        Plan plan;
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, create(plan, make_desc()));
        f.fail("cuCtxPushCurrent", kContextIsDestroyed);  // no context is current here
        FMHA_CHECK_STATUS(FMHA_STATUS_CONTEXT_MISMATCH, fmha_run(plan.p, &t, nullptr, 0, nullptr));
    }
    f.fail(nullptr, 0);
    const fake_cuda_stats s = f.stats();
    CHECK(s.context_pushes == s.context_pops);
}

// fmha_run_merge launches the combine kernel in teams of threads per (row,
// head), on the entry point of that team size: with 2 parts of 128 columns,
// four teams of 32 per CTA; with 16 parts of 64 columns, two teams of 64
// (each thread sums at most 4 parts); at 512 columns one team of 128. At 264
// to 384 columns (66-96 chunks, a team of 96 threads) more than 4 parts once
// doubled the team to 192 and divided by zero 128 / 192 teams per CTA: they
// take one team of 128.
TEST_CASE("fake driver: the merge packs (row, head) pairs into CTAs by team",
          "[cpu][fake-driver][run][merge]") {
    Fake &f = fresh_fake(80);
    struct Row {
        int64_t head_dim;
        int32_t parts;
        unsigned ctas;
        const char *team_suffix;  // the entry point's
    };
    for (const Row r : {Row{128, 2, 2, "_team32"}, Row{64, 16, 4, "_team64"}, Row{512, 2, 8, ""},
                        Row{384, 4, 8, ""}, Row{384, 5, 8, ""}, Row{264, 64, 8, ""}}) {
        fmha_merge_descriptor m = make_merge_desc();  // 4 rows x 2 heads
        m.head_dim = r.head_dim;
        m.num_parts = r.parts;
        REQUIRE(fmha_strides_bshd(&m.part_strides, 4, 2, r.head_dim) == FMHA_STATUS_SUCCESS);
        m.o_strides = m.part_strides;
        Plan plan;
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_create_merge_plan(&plan.p, &m));
        std::vector<const void *> o_parts(size_t(r.parts), g_fake_memory);
        std::vector<const float *> lse_parts(size_t(r.parts),
                                             reinterpret_cast<const float *>(g_fake_memory + 512));
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                            fmha_run_merge(plan.p, o_parts.data(), lse_parts.data(),
                                           g_fake_memory + 1024, nullptr, nullptr));
        fake_cuda_launch l;
        REQUIRE(f.last_launch(&l) == 1);
        INFO("head_dim " << r.head_dim << ", " << r.parts << " parts");
        CHECK(l.grid[0] == r.ctas);
        CHECK(l.grid[0] == expected_combine_ctas(8, r.head_dim, r.parts));
        CHECK(l.block[0] == 128u);
        CHECK(std::string(l.kernel) ==
              std::string(m.dtype == FMHA_DTYPE_BF16 ? "fmha_merge_bf16" : "fmha_merge_fp16") +
                  r.team_suffix);
    }
}

TEST_CASE("fake driver: errors name the struct and field they come from",
          "[cpu][fake-driver]") {
    SECTION("merge_descriptor.device") {
        Fake &f = fresh_fake(80);
        f.configure("devices", 2);
        fmha_merge_descriptor m = make_merge_desc();
        m.device = 3;
        Plan plan;
        FMHA_CHECK_STATUS(FMHA_STATUS_NO_DEVICE, fmha_create_merge_plan(&plan.p, &m));
        CHECK(std::string(fmha_last_error_message()).find("merge_descriptor.device is 3") !=
              std::string::npos);
    }
    SECTION("a zero stride the Hopper kernel cannot read") {
        if (!embeds(90)) FMHA_SKIP("this build has no image for sm_90");
        fresh_fake(90);
        fmha_descriptor d = make_desc();
        d.kernel = FMHA_KERNEL_HOPPER;
        d.v_strides.batch = 0;
        Plan plan;
        FMHA_CHECK_STATUS(FMHA_STATUS_NOT_SUPPORTED, create(plan, d));
        CHECK(std::string(fmha_last_error_message()).find("descriptor.v_strides.batch is 0") !=
              std::string::npos);
    }
}

// How many decode CTAs an SM holds comes from the shared memory per SM the
// driver reports (else the architecture's): the split model counts waves
// with it. hd96, 4 query positions of 8 heads per KV head (two 16-row tiles
// per KV head, where waves decide), on a 16-SM sm_87 device (Orin: 164 KB
// per SM, two of these 77 KB CTAs).
TEST_CASE("fake driver: decode split counts follow the shared memory per SM the driver reports",
          "[cpu][fake-driver][decode]") {
    if (!embeds(80)) FMHA_SKIP("this build has no image for sm_80");
    auto splits_with = [](int smem_per_sm) {
        Fake &f = fresh_fake(87);
        f.configure("smem_optin", 166912);
        f.configure("sms", 16);
        f.configure("smem_per_sm", smem_per_sm);
        fmha_descriptor d = make_desc(FMHA_DTYPE_BF16, 96, Layout::BSHD, 4, 8192);
        d.batch = 1;
        d.num_q_heads = 16;
        d.num_kv_heads = 2;
        d.q_strides = d.o_strides = make_layout(Layout::BSHD, 1, 4, 16, 96).strides;
        d.k_strides = d.v_strides = make_layout(Layout::BSHD, 1, 8192, 2, 96).strides;
        d.num_splits = 0;
        d.kernel = FMHA_KERNEL_DECODE;
        Plan plan;
        REQUIRE(create(plan, d) == FMHA_STATUS_SUCCESS);
        const fmha_plan_info i = info_of(plan.p);
        CHECK(std::string(i.kernel_name) == "fmha_decode_bf16_hd96");
        return i.num_splits;
    };
    const int reported = splits_with(164 * 1024);  // two CTAs per SM
    INFO("splits: 164 KB per SM reported " << reported << ", none reported "
                                             << splits_with(0) << ", 100 KB reported "
                                             << splits_with(100 * 1024));
    CHECK(reported == 8);
    CHECK(splits_with(0) == reported);          // sm_87's own figure: 164 KB
    CHECK(splits_with(100 * 1024) == 4);        // one CTA per SM: half the splits
}
