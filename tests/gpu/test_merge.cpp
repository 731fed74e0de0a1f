// fmha_create_merge_plan / fmha_run_merge on the GPU: attention over a key
// set computed in disjoint parts (each an fmha_run over a view of K and V)
// and merged must equal attention over all keys: checked against the float64
// reference of the whole problem with the 2x rule, where the same-precision
// reference is the same pipeline done on the CPU (parts by reference_lowp,
// merged in float32, rounded to the dtype), and against fmha_run over all
// keys. Parts that saw no key (LSE -inf, O garbage) contribute nothing;
// in-place merges; the merged LSE; merges of host-made parts up to
// FMHA_MERGE_MAX_PARTS; and the argument errors.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fmha_test/far_placement.h"
#include "fmha_test/half.h"
#include "fmha_test/random.h"
#include "fmha_test/reference.h"
#include "fmha_test/serving.h"
#include "gpu_common.h"

using namespace fmha_test;

namespace {

PlanPtr make_merge_plan(const fmha_merge_descriptor &m) {
    fmha_plan *p = nullptr;
    fmha_status st = fmha_create_merge_plan(&p, &m);
    INFO("fmha_create_merge_plan -> " << fmha_status_string(st) << ": "
                                      << fmha_last_error_message());
    REQUIRE(st == FMHA_STATUS_SUCCESS);
    REQUIRE(p != nullptr);
    return PlanPtr(p);
}

// The reference's input for [B, H, Sq] rows of D values, before the parts.
MergeInput merge_input(fmha_dtype dt, int64_t B, int64_t Sq, int64_t H, int64_t D) {
    MergeInput in;
    in.dtype = dt;
    in.batch = B;
    in.seqlen_q = Sq;
    in.num_heads = H;
    in.head_dim = D;
    return in;
}

// A merge descriptor (of `version`, LSE written) of the reference input's
// dtype and shape; the strides and part count are the caller's.
fmha_merge_descriptor merge_desc(uint32_t version, const MergeInput &in) {
    fmha_merge_descriptor md;
    REQUIRE(fmha_merge_descriptor_init(&md, version) == FMHA_STATUS_SUCCESS);
    md.dtype = in.dtype;
    md.batch = in.batch;
    md.seqlen_q = in.seqlen_q;
    md.num_heads = in.num_heads;
    md.head_dim = in.head_dim;
    md.flags = FMHA_FLAG_WRITE_LSE;
    return md;
}

template <typename T>
std::vector<T> download_all(const DeviceBuffer &b) {
    std::vector<T> v(b.elems());
    b.download(v.data());
    return v;
}

// Error statistics of a merged output against the references.
struct MergeCheck {
    double max_err = 0, lowp_err = 0;      // O vs fp64; same-precision pipeline vs fp64
    double lse_err = 0, lse_lowp_err = 0;  // over finite rows
    bool lse_rows_within_tol = true;
    bool all_written = true, gaps_untouched = true, empty_rows_ok = true;
    int64_t empty_rows = 0;  // rows no part saw
    std::string detail;

    bool o_ok() const { return all_written && max_err <= 2 * lowp_err + 1e-6; }
    bool lse_ok() const { return lse_rows_within_tol || lse_err <= 2 * lse_lowp_err + 1e-6; }
    bool ok() const { return o_ok() && lse_ok() && gaps_untouched && empty_rows_ok; }
};

// Compares a merged O (the whole allocation of `layout`) and LSE ([B, H, Sq])
// with the references (RefResult order). Elements outside the view must
// still hold `gaps` (the NaN prefill when NULL).
MergeCheck check_merged(fmha_dtype dt, int64_t B, int64_t H, int64_t Sq, int64_t D,
                        const TensorLayout &layout, const std::vector<uint16_t> &o,
                        const std::vector<float> *lse, const RefResult &r64,
                        const RefResult &rlp, const std::vector<uint16_t> *gaps = nullptr) {
    MergeCheck m;
    std::vector<char> logical(o.size(), 0);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < Sq; ++i) {
                const size_t row = size_t((b * H + h) * Sq + i);
                const bool empty = std::isinf(r64.lse[row]) && r64.lse[row] < 0;
                m.empty_rows += empty;
                for (int64_t d = 0; d < D; ++d) {
                    const size_t at = size_t(layout.offset + element_offset(layout.strides, b, i, h, d));
                    logical[at] = 1;
                    const double ref = r64.o[row * size_t(D) + size_t(d)];
                    m.lowp_err = std::max(m.lowp_err, std::fabs(rlp.o[row * size_t(D) + size_t(d)] - ref));
                    if (is_nan_lowp(o[at], dt)) {
                        if (m.all_written)
                            m.detail = "merged O is NaN at b=" + std::to_string(b) + " h=" +
                                       std::to_string(h) + " row=" + std::to_string(i);
                        m.all_written = false;
                        continue;
                    }
                    if (empty && (o[at] & 0x7FFFu) != 0) m.empty_rows_ok = false;
                    m.max_err = std::max(m.max_err, std::fabs(double(lowp_to_float(o[at], dt)) - ref));
                }
                if (lse == nullptr) continue;
                const float got = (*lse)[row];
                const double ref = r64.lse[row];
                if (std::isnan(got)) {
                    m.all_written = false;
                    continue;
                }
                if (empty) {
                    if (!(std::isinf(got) && got < 0)) m.empty_rows_ok = false;
                    continue;
                }
                const double err = std::fabs(double(got) - ref);
                m.lse_lowp_err = std::max(m.lse_lowp_err, std::fabs(rlp.lse[row] - ref));
                m.lse_err = std::max(m.lse_err, err);
                if (!(err <= kLseRelTol * (1 + std::fabs(ref)))) m.lse_rows_within_tol = false;
            }
    for (size_t at = 0; at < o.size(); ++at)
        if (!logical[at] && o[at] != (gaps ? (*gaps)[at] : kOutputPrefill16)) {
            m.gaps_untouched = false;
            if (m.detail.empty()) m.detail = "merged O written outside the view at " + std::to_string(at);
            break;
        }
    return m;
}

std::string describe(const MergeCheck &m) {
    char buf[300];
    std::snprintf(buf, sizeof buf,
                  "O err %.3g vs same-precision %.3g (ratio %.2f), LSE err %.3g vs %.3g, %lld "
                  "rows no part saw%s%s%s",
                  m.max_err, m.lowp_err, m.max_err / std::max(m.lowp_err, 5e-7), m.lse_err,
                  m.lse_lowp_err, (long long)m.empty_rows, m.all_written ? "" : ", NaN left",
                  m.gaps_untouched ? "" : ", wrote outside the view",
                  m.empty_rows_ok ? "" : ", rows no part saw are not O = 0 / LSE = -inf");
    return std::string(buf) + (m.detail.empty() ? "" : "; " + m.detail);
}

// The checks every merge makes of its result (the caller's INFO describes it).
void check_verdicts(const MergeCheck &m) {
    CHECK(m.o_ok());
    CHECK(m.lse_ok());
    CHECK(m.all_written);
    CHECK(m.gaps_untouched);
    CHECK(m.empty_rows_ok);
}

// ---- merging parts that fmha_run computed ----------------------------------

struct PartsCase {
    Case full;                  // dense, mask NONE, LSE written
    std::vector<int64_t> cuts;  // part p covers keys [cuts[p], cuts[p+1])
    int empty_at = -1;          // where a part that saw no key is inserted (-1: none)
    Layout part_layout = Layout::BSHD, out_layout = Layout::BHSD;
    bool in_place = false;      // the output is part 0 (same tensor, same strides)

    std::string name() const {
        std::string s = full.name() + " parts=[";
        for (size_t i = 0; i < cuts.size(); ++i) s += (i ? "," : "") + std::to_string(cuts[i]);
        s += "]";
        if (empty_at >= 0) s += " empty-part@" + std::to_string(empty_at);
        s += std::string(" parts ") + layout_name(part_layout);
        s += in_place ? " in-place" : std::string(" out ") + layout_name(out_layout);
        return s;
    }
};

struct Part {
    DeviceBuffer o, lse;
    std::vector<uint16_t> host_o;  // after its run (or as made, for the empty part)
    std::vector<float> host_lse;
};

void run_parts_case(const PartsCase &unseeded, uint64_t seed) {
    PartsCase pc = unseeded;
    pc.full.seed = seed;  // the printed name then shows the seed of these inputs
    Case c = pc.full;
    c.mask = FMHA_MASK_NONE;
    c.write_lse = true;
    c.kernel = FMHA_KERNEL_AUTO;
    INFO(pc.name() << " seed " << seed);
    CaseData full(c);
    const int64_t B = c.batch, H = c.num_q_heads, Sq = c.seqlen_q, D = c.head_dim;
    const size_t lse_elems = size_t(B * H * Sq);

    // Attention over all keys.
    const fmha_descriptor fd = full.descriptor();
    PlanPtr full_plan = make_plan(fd);
    size_t ws_bytes = 0;
    REQUIRE(fmha_plan_workspace_size(full_plan.get(), &ws_bytes) == FMHA_STATUS_SUCCESS);
    DeviceBuffer ws;
    if (ws_bytes) ws = DeviceBuffer((ws_bytes + 1) / 2, 2, kGuard16);
    const fmha_tensors ft = full.tensors();
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                        fmha_run(full_plan.get(), &ft, ws_bytes ? ws.data() : nullptr, ws_bytes, nullptr));
    sync_or_fail();
    const Outputs full_out = full.download();
    {
        const Comparison fc = full.compare(full_out);
        INFO("attention over all keys");
        check_whole_run(full, fc, &ws);
        REQUIRE(fc.o_ok);
        REQUIRE(fc.lse_ok);
    }

    // The parts: views of K and V, their own O (part layout) and LSE.
    const TensorLayout pl = make_layout(pc.part_layout, B, Sq, H, D);
    const size_t num_parts = pc.cuts.size() - 1 + (pc.empty_at >= 0 ? 1 : 0);
    std::vector<Part> parts(num_parts);
    MergeInput in = merge_input(c.dtype, B, Sq, H, D);
    std::mt19937_64 rng(seed ^ 0x3E46E);
    size_t next_range = 0;
    for (size_t p = 0; p < num_parts; ++p) {
        Part &part = parts[p];
        part.o = DeviceBuffer(pl.alloc_elems, 2, kGuard16);
        part.lse = DeviceBuffer(lse_elems, 4, kGuard32);
        std::vector<double> lo(lse_elems * size_t(D)), ll(lse_elems);
        if (int(p) == pc.empty_at) {
            // Saw no key: LSE -inf, O garbage that must be ignored.
            std::uniform_real_distribution<float> garbage(-1000.0f, 1000.0f);
            part.host_o.assign(pl.alloc_elems, kGuard16);
            for (int64_t b = 0; b < B; ++b)
                for (int64_t i = 0; i < Sq; ++i)
                    for (int64_t h = 0; h < H; ++h)
                        for (int64_t d = 0; d < D; ++d) {
                            const uint16_t x = float_to_lowp(garbage(rng), c.dtype);
                            part.host_o[size_t(pl.offset + element_offset(pl.strides, b, i, h, d))] = x;
                            lo[size_t(((b * H + h) * Sq + i) * D + d)] = lowp_to_float(x, c.dtype);
                        }
            part.host_lse.assign(lse_elems, -std::numeric_limits<float>::infinity());
            std::fill(ll.begin(), ll.end(), -std::numeric_limits<double>::infinity());
            part.o.upload(part.host_o.data());
            part.lse.upload(part.host_lse.data());
        } else {
            const int64_t k0 = pc.cuts[next_range], k1 = pc.cuts[next_range + 1];
            ++next_range;
            fmha_descriptor d = fd;
            d.seqlen_k = k1 - k0;
            d.o_strides = pl.strides;
            PlanPtr plan = make_plan(d);
            size_t pws = 0;
            REQUIRE(fmha_plan_workspace_size(plan.get(), &pws) == FMHA_STATUS_SUCCESS);
            DeviceBuffer pwsb;
            if (pws) pwsb = DeviceBuffer((pws + 1) / 2, 2, kGuard16);
            fmha_tensors t = ft;
            t.k = static_cast<const uint16_t *>(ft.k) + k0 * full.k_layout.strides.seq;
            t.v = static_cast<const uint16_t *>(ft.v) + k0 * full.v_layout.strides.seq;
            t.o = static_cast<uint16_t *>(part.o.data()) + pl.offset;
            t.lse = static_cast<float *>(part.lse.data());
            part.o.fill(kOutputPrefill16);
            part.lse.fill(kOutputPrefill32);
            FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                                fmha_run(plan.get(), &t, pws ? pwsb.data() : nullptr, pws, nullptr));
            sync_or_fail();
            part.host_o = download_all<uint16_t>(part.o);
            part.host_lse = download_all<float>(part.lse);
            // The same-precision reference of this part.
            RefProblem rp = full.ref_problem();
            rp.seqlen_k = k1 - k0;
            const RefResult r = reference_lowp(
                rp, full.host_q().data() + full.q_layout.offset,
                full.host_k().data() + full.k_layout.offset + k0 * full.k_layout.strides.seq,
                full.host_v().data() + full.v_layout.offset + k0 * full.v_layout.strides.seq);
            lo = r.o;
            for (size_t i = 0; i < lse_elems; ++i) ll[i] = double(float(r.lse[i]));
        }
        in.o.push_back(lo);
        in.lse.push_back(ll);
    }
    const RefResult pipeline = merge_reference_lowp(in);

    // The merge.
    fmha_merge_descriptor md = merge_desc(FMHA_MERGE_DESCRIPTOR_VERSION, in);
    md.part_strides = pl.strides;
    const TensorLayout ol = pc.in_place ? pl : make_layout(pc.out_layout, B, Sq, H, D);
    md.o_strides = ol.strides;
    md.num_parts = int32_t(num_parts);
    PlanPtr mplan = make_merge_plan(md);
    DeviceBuffer out_o, out_lse(lse_elems, 4, kGuard32);
    if (!pc.in_place) out_o = DeviceBuffer(ol.alloc_elems, 2, kGuard16);
    std::vector<const void *> o_parts;
    std::vector<const float *> lse_parts;
    for (Part &p : parts) {
        o_parts.push_back(static_cast<const uint16_t *>(p.o.data()) + pl.offset);
        lse_parts.push_back(static_cast<const float *>(p.lse.data()));
    }
    DeviceBuffer &o_buf = pc.in_place ? parts[0].o : out_o;
    void *o_ptr = static_cast<uint16_t *>(o_buf.data()) + ol.offset;
    auto merge_once = [&](std::vector<uint16_t> *o, std::vector<float> *lse) {
        if (pc.in_place) parts[0].o.upload(parts[0].host_o.data());  // part 0 as it was
        else out_o.fill(kOutputPrefill16);
        out_lse.fill(kOutputPrefill32);
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                            fmha_run_merge(mplan.get(), o_parts.data(), lse_parts.data(), o_ptr,
                                           static_cast<float *>(out_lse.data()), nullptr));
        sync_or_fail();
        *o = download_all<uint16_t>(o_buf);
        *lse = download_all<float>(out_lse);
    };
    std::vector<uint16_t> merged_o, merged_o2;
    std::vector<float> merged_lse, merged_lse2;
    merge_once(&merged_o, &merged_lse);
    merge_once(&merged_o2, &merged_lse2);
    CHECK(merged_o == merged_o2);  // bitwise identical rerun
    CHECK(std::memcmp(merged_lse.data(), merged_lse2.data(), merged_lse.size() * 4) == 0);

    // Against the float64 reference of the whole problem (2x rule).
    // (In place, the gaps of part 0's allocation keep what they held.)
    const MergeCheck m = check_merged(c.dtype, B, H, Sq, D, ol, merged_o, &merged_lse, full.ref64(),
                                      pipeline, pc.in_place ? &parts[0].host_o : nullptr);
    std::printf("merge: %s: %s\n", pc.name().c_str(), describe(m).c_str());
    INFO(describe(m));
    check_verdicts(m);
    CHECK(m.empty_rows == 0);  // every row saw keys in some part

    // Against fmha_run over all keys.
    double diff = 0, lse_diff = 0;
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < Sq; ++i) {
                for (int64_t d = 0; d < D; ++d) {
                    const uint16_t x = merged_o[size_t(ol.offset + element_offset(ol.strides, b, i, h, d))];
                    const uint16_t y = full_out.o[size_t(full.o_layout.offset +
                                                         element_offset(full.o_layout.strides, b, i, h, d))];
                    // Written so that a NaN is kept (std::max would drop it).
                    const double e = std::fabs(double(lowp_to_float(x, c.dtype)) -
                                               double(lowp_to_float(y, c.dtype)));
                    if (!(e <= diff)) diff = e;
                }
                const size_t row = size_t((b * H + h) * Sq + i);
                const double full_lse = double(full_out.lse[row]);
                const double e = std::isinf(full_lse) && double(merged_lse[row]) == full_lse
                                     ? 0.0  // both -inf: a row no key is visible to
                                     : std::fabs(double(merged_lse[row]) - full_lse) /
                                           (1 + std::fabs(full_lse));
                if (!(e <= lse_diff)) lse_diff = e;
            }
    const Comparison fc = full.compare(full_out);
    INFO("merged vs fmha_run over all keys: O differs by " << diff << ", LSE by " << lse_diff);
    CHECK(diff <= 2 * m.lowp_err + fc.lowp_err + 1e-6);
    CHECK(lse_diff <= 2e-3);

    // The inputs are untouched (except part 0 of an in-place merge), and
    // every guard band holds.
    for (size_t p = pc.in_place ? 1 : 0; p < parts.size(); ++p) {
        INFO("part " << p);
        CHECK(download_all<uint16_t>(parts[p].o) == parts[p].host_o);
        const std::vector<float> l = download_all<float>(parts[p].lse);
        CHECK(std::memcmp(l.data(), parts[p].host_lse.data(), l.size() * 4) == 0);
    }
    for (size_t p = 0; p < parts.size(); ++p) {
        check_guards(parts[p].o, "o_parts[" + std::to_string(p) + "]");
        check_guards(parts[p].lse, "lse_parts[" + std::to_string(p) + "]");
    }
    if (!pc.in_place) check_guards(out_o, "o");
    check_guards(out_lse, "lse");
    {
        std::string why;
        const bool ok = full.guards_intact(&why);
        INFO("attention over all keys: " << why);
        CHECK(ok);
    }

    // Without FMHA_FLAG_WRITE_LSE: the same O, and the lse pointer ignored.
    if (!pc.in_place) {
        fmha_merge_descriptor nd = md;
        nd.flags = 0;
        PlanPtr nplan = make_merge_plan(nd);
        out_o.fill(kOutputPrefill16);
        FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                            fmha_run_merge(nplan.get(), o_parts.data(), lse_parts.data(), o_ptr,
                                           reinterpret_cast<float *>(uintptr_t(0x3)), nullptr));
        sync_or_fail();
        CHECK(download_all<uint16_t>(out_o) == merged_o);
    }
}

std::vector<PartsCase> parts_cases() {
    std::vector<PartsCase> v;
    auto base = [](fmha_dtype dt, int64_t hd, int64_t b, int64_t hq, int64_t hkv, int64_t sq,
                   int64_t sk, Layout layout) {
        Case c = dense_case(dt, hd, b, hq, hkv, sq, sk);
        c.layout = layout;
        return c;
    };
    {
        PartsCase p;
        p.full = base(FMHA_DTYPE_BF16, 128, 2, 8, 2, 33, 1000, Layout::BSHD);
        p.cuts = {0, 400, 1000};
        p.empty_at = 1;
        v.push_back(p);
    }
    {
        PartsCase p;
        p.full = base(FMHA_DTYPE_FP16, 64, 1, 4, 4, 1, 4097, Layout::BHSD);
        p.cuts = {0, 1, 1000, 2048, 4000, 4097};
        p.part_layout = Layout::SLICED;
        p.out_layout = Layout::SLICED;
        v.push_back(p);
    }
    {
        PartsCase p;
        p.full = base(FMHA_DTYPE_BF16, 256, 2, 4, 1, 128, 777, Layout::SLICED);
        p.cuts = {0, 300, 301, 777};
        p.empty_at = 2;
        p.part_layout = Layout::BHSD;
        p.in_place = true;
        v.push_back(p);
    }
    {
        PartsCase p;
        p.full = base(FMHA_DTYPE_FP16, 512, 1, 8, 1, 4, 600, Layout::BSHD);
        p.cuts = {0, 150, 300, 450, 600};
        p.empty_at = 4;
        p.out_layout = Layout::BSHD;
        v.push_back(p);
    }
    {
        PartsCase p;
        p.full = base(FMHA_DTYPE_BF16, 96, 3, 6, 3, 17, 300, Layout::BSHD);
        p.cuts = {0, 17, 300};
        p.empty_at = 0;
        p.part_layout = Layout::SLICED;
        p.in_place = true;
        v.push_back(p);
    }
    return v;
}

// ---- merging parts made on the host ------------------------------------------

struct HostParts {
    fmha_dtype dtype;
    int64_t head_dim;
    int32_t num_parts;
    int64_t batch, seqlen_q, heads;
    Layout part_layout, out_layout;
};

// With `far`, every part and the output are placed with their batches 68 GiB
// apart (FarTensor: only the batches have memory), for 64-bit offsets.
void run_host_parts(const HostParts &hp, uint64_t seed, bool far = false) {
    INFO(dtype_name(hp.dtype) << " hd" << hp.head_dim << " parts " << hp.num_parts << " b"
                              << hp.batch << " sq" << hp.seqlen_q << " H" << hp.heads << " parts "
                              << layout_name(hp.part_layout) << " out " << layout_name(hp.out_layout)
                              << (far ? " far" : "") << " seed " << seed);
    const uint64_t far_batch = uint64_t(68) << 30;
    const int64_t B = hp.batch, Sq = hp.seqlen_q, H = hp.heads, D = hp.head_dim;
    const size_t rows = size_t(B * H * Sq);
    const TensorLayout pl = make_layout(hp.part_layout, B, Sq, H, D);
    const TensorLayout ol = make_layout(hp.out_layout, B, Sq, H, D);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f), lse_dist(0.0f, 5.0f);
    std::uniform_real_distribution<float> garbage(-1000.0f, 1000.0f);
    MergeInput in = merge_input(hp.dtype, B, Sq, H, D);
    std::vector<DeviceBuffer> po, plse;
    std::vector<FarTensor> po_far;
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int32_t p = 0; p < hp.num_parts; ++p) {
        std::vector<uint16_t> host_o(pl.alloc_elems, kGuard16);
        std::vector<float> host_lse(rows);
        std::vector<double> lo(rows * size_t(D)), ll(rows);
        for (int64_t b = 0; b < B; ++b)
            for (int64_t h = 0; h < H; ++h)
                for (int64_t i = 0; i < Sq; ++i) {
                    const size_t row = size_t((b * H + h) * Sq + i);
                    // Row i % 7 == 3: no part saw a key. Else each part missed
                    // keys with probability 1/4 (but part 0 of row i % 5 == 1
                    // always saw some, far above the others).
                    bool empty = i % 7 == 3 || rng() % 4 == 0;
                    float l = lse_dist(rng);
                    if (i % 5 == 1 && p == 0) {
                        empty = i % 7 == 3;
                        l = 40.0f;
                    }
                    host_lse[row] = empty ? ninf : l;
                    ll[row] = host_lse[row];
                    for (int64_t d = 0; d < D; ++d) {
                        const uint16_t x = float_to_lowp(empty ? garbage(rng) : normal(rng), hp.dtype);
                        host_o[size_t(pl.offset + element_offset(pl.strides, b, i, h, d))] = x;
                        lo[row * size_t(D) + size_t(d)] = lowp_to_float(x, hp.dtype);
                    }
                }
        if (far) {
            po_far.push_back(FarTensor::batches("o_parts", pl, B, far_batch));
            po_far.back().back(&host_o, kGuard16);
        } else {
            po.emplace_back(pl.alloc_elems, 2, kGuard16);
            po.back().upload(host_o.data());
        }
        plse.emplace_back(rows, 4, kGuard32);
        plse.back().upload(host_lse.data());
        in.o.push_back(std::move(lo));
        in.lse.push_back(std::move(ll));
    }
    fmha_merge_descriptor md = merge_desc(1, in);
    FarTensor out_far;
    if (far) {
        out_far = FarTensor::batches("o", ol, B, far_batch + (uint64_t(2) << 20));
        out_far.back(nullptr, kOutputPrefill16);
    }
    md.part_strides = far ? po_far[0].strides : pl.strides;
    md.o_strides = far ? out_far.strides : ol.strides;
    md.num_parts = hp.num_parts;
    PlanPtr plan = make_merge_plan(md);
    size_t ws = 1;
    if (fmha_plan_workspace_size(plan.get(), &ws) == FMHA_STATUS_SUCCESS)
        CHECK(ws == 0u);  // fmha_run_merge takes no workspace
    DeviceBuffer out(far ? 0 : ol.alloc_elems, 2, kGuard16), out_lse(rows, 4, kGuard32);
    if (!far) out.fill(kOutputPrefill16);
    out_lse.fill(kOutputPrefill32);
    std::vector<const void *> o_parts;
    std::vector<const float *> lse_parts;
    for (int32_t p = 0; p < hp.num_parts; ++p) {
        o_parts.push_back(far ? po_far[size_t(p)].data()
                              : static_cast<const uint16_t *>(po[size_t(p)].data()) + pl.offset);
        lse_parts.push_back(static_cast<const float *>(plse[size_t(p)].data()));
    }
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                        fmha_run_merge(plan.get(), o_parts.data(), lse_parts.data(),
                                       far ? out_far.data()
                                           : static_cast<uint16_t *>(out.data()) + ol.offset,
                                       static_cast<float *>(out_lse.data()), nullptr));
    sync_or_fail();
    std::vector<uint16_t> got(ol.alloc_elems, kOutputPrefill16);
    if (far) out_far.download(got);
    else out.download(got.data());
    const std::vector<float> got_lse = download_all<float>(out_lse);
    const MergeCheck m = check_merged(hp.dtype, B, H, Sq, D, ol, got, &got_lse,
                                      merge_reference_fp64(in), merge_reference_lowp(in));
    std::printf("merge (host parts%s): %s hd%lld %d parts seed=0x%016llx: %s\n",
                far ? ", batches 68 GiB apart" : "", dtype_name(hp.dtype), (long long)D,
                hp.num_parts, (unsigned long long)seed, describe(m).c_str());
    INFO(describe(m));
    check_verdicts(m);
    CHECK(m.empty_rows > 0);  // rows i % 7 == 3 exist in every case here
    if (far) {
        std::string why;
        const bool untouched = out_far.outside_untouched(kOutputPrefill16, &why);
        INFO(why);
        CHECK(untouched);
    } else {
        check_guards(out, "o");
    }
    check_guards(out_lse, "lse");
    for (size_t p = 0; p < po.size(); ++p) {
        check_guards(po[p], "o_parts[" + std::to_string(p) + "]");
        check_guards(plse[p], "lse_parts[" + std::to_string(p) + "]");
    }
}

}  // namespace

TEST_CASE("merge: parts computed by fmha_run equal attention over all keys", "[gpu][merge]") {
    FMHA_REQUIRE_GPU();
    uint64_t i = 27000;
    for (const PartsCase &pc : parts_cases()) {
        SECTION(pc.name()) { run_parts_case(pc, case_seed(base_seed(), i)); }
        ++i;
    }
}

TEST_CASE("merge: host-made parts, rows no part saw, up to 64 parts", "[gpu][merge]") {
    FMHA_REQUIRE_GPU();
    const HostParts cases[] = {
        {FMHA_DTYPE_BF16, 8, 1, 2, 37, 3, Layout::BSHD, Layout::BSHD},
        {FMHA_DTYPE_FP16, 72, 2, 1, 37, 5, Layout::BHSD, Layout::BSHD},
        {FMHA_DTYPE_BF16, 128, 5, 2, 37, 3, Layout::SLICED, Layout::BHSD},
        {FMHA_DTYPE_FP16, 512, 3, 1, 20, 4, Layout::BSHD, Layout::SLICED},
        {FMHA_DTYPE_BF16, 64, 64, 2, 15, 2, Layout::BSHD, Layout::BHSD},
        {FMHA_DTYPE_FP16, 256, 7, 3, 9, 2, Layout::SLICED, Layout::SLICED},
        // 66-96 chunks with more than 4 parts: the team of 96 stops at 128.
        {FMHA_DTYPE_BF16, 384, 5, 2, 11, 3, Layout::BSHD, Layout::BHSD},
        {FMHA_DTYPE_FP16, 264, 64, 1, 7, 2, Layout::BHSD, Layout::BSHD},
    };
    uint64_t i = 27100;
    for (const HostParts &hp : cases) run_host_parts(hp, case_seed(base_seed(), i++));
}

TEST_CASE("merge: parts and output with batches 68 GiB apart", "[gpu][merge][large-offsets]") {
    FMHA_REQUIRE_GPU();
    // seqlen_q 5: row 3 of each head is one no part saw (run_host_parts).
    const HostParts cases[] = {
        {FMHA_DTYPE_BF16, 128, 3, 3, 5, 4, Layout::BSHD, Layout::BHSD},
        {FMHA_DTYPE_FP16, 512, 2, 2, 5, 2, Layout::BHSD, Layout::BSHD},
    };
    uint64_t i = 27200;
    for (const HostParts &hp : cases) run_host_parts(hp, case_seed(base_seed(), i++), true);
}

TEST_CASE("merge: a NaN or +inf LSE in any part makes its row NaN", "[gpu][merge]") {
    FMHA_REQUIRE_GPU();
    // Query i of each head: 0 every part finite; 1 part 1 NaN; 2 part 0
    // +inf; 3 parts 0 and 2 saw no key (-inf) and part 1 is NaN.
    const int64_t B = 1, Sq = 4, H = 2, D = 64;
    const int P = 3;
    const fmha_dtype dt = FMHA_DTYPE_BF16;
    const size_t rows = size_t(B * H * Sq);
    const TensorLayout l = make_layout(Layout::BSHD, B, Sq, H, D);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    std::mt19937_64 rng(case_seed(base_seed(), 27300));
    std::normal_distribution<float> normal(0.0f, 1.0f), lse_dist(0.0f, 3.0f);
    std::vector<std::vector<uint16_t>> host_o(P, std::vector<uint16_t>(l.alloc_elems, kGuard16));
    std::vector<std::vector<float>> host_lse(P, std::vector<float>(rows));
    std::vector<DeviceBuffer> po, plse;
    for (int p = 0; p < P; ++p) {
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < Sq; ++i) {
                float lse = lse_dist(rng);
                if (i == 1 && p == 1) lse = nan;
                if (i == 2 && p == 0) lse = inf;
                if (i == 3) lse = p == 1 ? nan : -inf;
                host_lse[size_t(p)][size_t(h * Sq + i)] = lse;
                for (int64_t d = 0; d < D; ++d)
                    host_o[size_t(p)][size_t(l.offset + element_offset(l.strides, 0, i, h, d))] =
                        float_to_lowp(normal(rng), dt);
            }
        po.emplace_back(l.alloc_elems, 2, kGuard16);
        po.back().upload(host_o[size_t(p)].data());
        plse.emplace_back(rows, 4, kGuard32);
        plse.back().upload(host_lse[size_t(p)].data());
    }
    fmha_merge_descriptor md;
    REQUIRE(fmha_merge_descriptor_init(&md, FMHA_MERGE_DESCRIPTOR_VERSION) == FMHA_STATUS_SUCCESS);
    md.dtype = dt;
    md.batch = B;
    md.seqlen_q = Sq;
    md.num_heads = H;
    md.head_dim = D;
    md.part_strides = md.o_strides = l.strides;
    md.num_parts = P;
    md.flags = FMHA_FLAG_WRITE_LSE;
    PlanPtr plan = make_merge_plan(md);
    // Prefilled with finite values (bf16 1.0, LSE 1234.5), not the usual NaN,
    // so that a NaN row in the output was written by the merge.
    DeviceBuffer out(l.alloc_elems, 2, kGuard16), out_lse(rows, 4, kGuard32);
    out.fill(0x3F80);
    float lse_prefill = 1234.5f;
    uint32_t lse_bits;
    std::memcpy(&lse_bits, &lse_prefill, 4);
    out_lse.fill(lse_bits);
    std::vector<const void *> o_parts;
    std::vector<const float *> lse_parts;
    for (int p = 0; p < P; ++p) {
        o_parts.push_back(static_cast<const uint16_t *>(po[size_t(p)].data()) + l.offset);
        lse_parts.push_back(static_cast<const float *>(plse[size_t(p)].data()));
    }
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS,
                        fmha_run_merge(plan.get(), o_parts.data(), lse_parts.data(),
                                       static_cast<uint16_t *>(out.data()) + l.offset,
                                       static_cast<float *>(out_lse.data()), nullptr));
    sync_or_fail();
    const std::vector<uint16_t> got = download_all<uint16_t>(out);
    const std::vector<float> got_lse = download_all<float>(out_lse);
    for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < Sq; ++i) {
            const size_t row = size_t(h * Sq + i);
            INFO("head " << h << ", query " << i);
            if (i == 0) {  // finite: the exact merge, in float64
                double mx = -INFINITY, sum = 0;
                for (int p = 0; p < P; ++p) mx = std::max(mx, double(host_lse[size_t(p)][row]));
                for (int p = 0; p < P; ++p) sum += std::exp(double(host_lse[size_t(p)][row]) - mx);
                const double lse = mx + std::log(sum);
                CHECK(std::fabs(double(got_lse[row]) - lse) <= 1e-4 * (1 + std::fabs(lse)));
                double err = 0;
                for (int64_t d = 0; d < D; ++d) {
                    const size_t at = size_t(l.offset + element_offset(l.strides, 0, i, h, d));
                    double ref = 0;
                    for (int p = 0; p < P; ++p)
                        ref += std::exp(double(host_lse[size_t(p)][row]) - lse) *
                               double(lowp_to_float(host_o[size_t(p)][at], dt));
                    const double e = std::fabs(double(lowp_to_float(got[at], dt)) - ref);
                    if (!(e <= err)) err = e;  // a NaN is kept
                }
                CHECK(err <= 0.02);  // bf16 rounding of values of magnitude <= ~4
            } else {
                CHECK(std::isnan(got_lse[row]));
                int64_t not_nan = 0;
                for (int64_t d = 0; d < D; ++d)
                    not_nan += !is_nan_lowp(got[size_t(l.offset + element_offset(l.strides, 0, i, h, d))], dt);
                CHECK(not_nan == 0);
            }
        }
    check_guards(out, "o");
    check_guards(out_lse, "lse");
}

TEST_CASE("merge: argument errors enqueue nothing", "[gpu][merge]") {
    FMHA_REQUIRE_GPU();
    const int64_t B = 2, Sq = 5, H = 3, D = 64;
    const size_t rows = size_t(B * H * Sq);
    const TensorLayout l = make_layout(Layout::BSHD, B, Sq, H, D);
    fmha_merge_descriptor md = merge_desc(1, merge_input(FMHA_DTYPE_BF16, B, Sq, H, D));
    md.part_strides = md.o_strides = l.strides;
    md.num_parts = 3;
    PlanPtr plan = make_merge_plan(md);
    std::vector<DeviceBuffer> po, plse;
    std::vector<FarTensor> po_far;
    // Part p: O = 2^p everywhere (bf16 1, 2, 4) with LSE = log 2^p, so the
    // weights are 1/7, 2/7, 4/7 and the exact merge is O = 3, LSE = log 7;
    // a weight paired with the wrong part would give another value (12/7).
    const uint16_t part_value[3] = {0x3F80, 0x4000, 0x4080};
    for (int p = 0; p < 3; ++p) {
        po.emplace_back(l.alloc_elems, 2, kGuard16);
        po.back().fill(part_value[p]);
        plse.emplace_back(rows, 4, kGuard32);
        const std::vector<float> part_lse(rows, std::log(float(1 << p)));
        plse.back().upload(part_lse.data());
    }
    DeviceBuffer out(l.alloc_elems, 2, kGuard16), out_lse(rows, 4, kGuard32);
    out.fill(kOutputPrefill16);
    out_lse.fill(kOutputPrefill32);
    std::vector<const void *> op = {po[0].data(), po[1].data(), po[2].data()};
    std::vector<const float *> lp = {static_cast<const float *>(plse[0].data()),
                                     static_cast<const float *>(plse[1].data()),
                                     static_cast<const float *>(plse[2].data())};
    void *o = out.data();
    float *lse = static_cast<float *>(out_lse.data());
    auto expect = [&](fmha_status expected, const std::string &needle, const fmha_plan *pl,
                      const void *const *o_parts, const float *const *lse_parts, void *oo,
                      float *ll) {
        fmha_status st = fmha_run_merge(pl, o_parts, lse_parts, oo, ll, nullptr);
        const std::string msg = fmha_last_error_message();
        INFO("fmha_run_merge -> " << fmha_status_string(st) << ": \"" << msg << "\"; expected "
                                  << fmha_status_string(expected) << " naming " << needle);
        CHECK(st == expected);
        CHECK(msg.find(needle) != std::string::npos);
    };
    expect(FMHA_STATUS_INVALID_ARGUMENT, "plan", nullptr, op.data(), lp.data(), o, lse);
    expect(FMHA_STATUS_INVALID_ARGUMENT, "o_parts", plan.get(), nullptr, lp.data(), o, lse);
    expect(FMHA_STATUS_INVALID_ARGUMENT, "lse_parts", plan.get(), op.data(), nullptr, o, lse);
    for (int p = 0; p < 3; ++p) {
        INFO("part " << p);
        const std::string on = "o_parts[" + std::to_string(p) + "]";
        const std::string ln = "lse_parts[" + std::to_string(p) + "]";
        std::vector<const void *> bo = op;
        std::vector<const float *> bl = lp;
        bo[size_t(p)] = nullptr;
        expect(FMHA_STATUS_INVALID_ARGUMENT, on, plan.get(), bo.data(), lp.data(), o, lse);
        bo[size_t(p)] = static_cast<const char *>(op[size_t(p)]) + 2;
        expect(FMHA_STATUS_MISALIGNED, on, plan.get(), bo.data(), lp.data(), o, lse);
        bo[size_t(p)] = static_cast<const char *>(op[size_t(p)]) + 8;
        expect(FMHA_STATUS_MISALIGNED, on, plan.get(), bo.data(), lp.data(), o, lse);
        bl[size_t(p)] = nullptr;
        expect(FMHA_STATUS_INVALID_ARGUMENT, ln, plan.get(), op.data(), bl.data(), o, lse);
        bl[size_t(p)] = reinterpret_cast<const float *>(
            reinterpret_cast<const char *>(lp[size_t(p)]) + 2);
        expect(FMHA_STATUS_MISALIGNED, ln, plan.get(), op.data(), bl.data(), o, lse);
    }
    // ("o is ..." / "lse is ...": the output arguments, not o_parts / lse_parts.)
    expect(FMHA_STATUS_INVALID_ARGUMENT, "o is", plan.get(), op.data(), lp.data(), nullptr, lse);
    expect(FMHA_STATUS_MISALIGNED, "o is", plan.get(), op.data(), lp.data(),
           static_cast<char *>(o) + 8, lse);
    expect(FMHA_STATUS_INVALID_ARGUMENT, "lse is", plan.get(), op.data(), lp.data(), o, nullptr);
    expect(FMHA_STATUS_MISALIGNED, "lse is", plan.get(), op.data(), lp.data(), o,
           reinterpret_cast<float *>(reinterpret_cast<char *>(lse) + 2));

    // The wrong kind of plan for the call.
    {
        fmha_tensors t;
        REQUIRE(fmha_tensors_init(&t, FMHA_TENSORS_VERSION) == FMHA_STATUS_SUCCESS);
        t.q = t.k = t.v = po[0].data();
        t.o = out.data();
        t.lse = lse;
        fmha_status st = fmha_run(plan.get(), &t, nullptr, 0, nullptr);
        INFO("fmha_run on a merge plan -> " << fmha_status_string(st) << ": "
                                            << fmha_last_error_message());
        CHECK(st == FMHA_STATUS_INVALID_ARGUMENT);
        CHECK(std::string(fmha_last_error_message()).find("merge") != std::string::npos);
    }
    {
        Case c = dense_case(FMHA_DTYPE_BF16, D, B, H, H, Sq, 40);
        c.seed = case_seed(base_seed(), 27200);
        CaseData data(c);
        PlanPtr attn = make_plan(data.descriptor());
        fmha_status st = fmha_run_merge(attn.get(), op.data(), lp.data(), o, lse, nullptr);
        INFO("fmha_run_merge on an attention plan -> " << fmha_status_string(st) << ": "
                                                       << fmha_last_error_message());
        CHECK(st == FMHA_STATUS_INVALID_ARGUMENT);
        CHECK(std::string(fmha_last_error_message()).find("plan") != std::string::npos);
    }
    // num_parts out of range (also checked without a GPU in tests/cpu).
    for (int32_t parts : {0, 65}) {
        fmha_merge_descriptor bad = md;
        bad.num_parts = parts;
        fmha_plan *p = reinterpret_cast<fmha_plan *>(0x10);
        FMHA_CHECK_STATUS(FMHA_STATUS_INVALID_ARGUMENT, fmha_create_merge_plan(&p, &bad));
        CHECK(p == nullptr);
        CHECK(std::string(fmha_last_error_message()).find("num_parts") != std::string::npos);
    }

    sync_or_fail();
    INFO("a rejected call must not enqueue anything");
    for (uint16_t x : download_all<uint16_t>(out)) {
        if (x != kOutputPrefill16) {
            FAIL("the output was written by a rejected fmha_run_merge");
            break;
        }
    }
    for (float f : download_all<float>(out_lse)) {
        uint32_t u;
        std::memcpy(&u, &f, 4);
        if (u != kOutputPrefill32) {
            FAIL("the LSE was written by a rejected fmha_run_merge");
            break;
        }
    }
    // The good call, for contrast: the parts above merge to O = 3 (bf16
    // 0x4040, exact) and LSE = log 7.
    FMHA_REQUIRE_STATUS(FMHA_STATUS_SUCCESS, fmha_run_merge(plan.get(), op.data(), lp.data(), o, lse, nullptr));
    sync_or_fail();
    const std::vector<uint16_t> got = download_all<uint16_t>(out);
    const std::vector<float> got_lse = download_all<float>(out_lse);
    int wrong = 0;
    for (uint16_t x : got) wrong += x != 0x4040;
    CHECK(wrong == 0);
    int wrong_lse = 0;
    for (float f : got_lse) wrong_lse += !(std::fabs(f - std::log(7.0f)) < 1e-5f);
    CHECK(wrong_lse == 0);
    check_guards(out, "o");
    check_guards(out_lse, "lse");
}

TEST_CASE("merge sanitizer subset", "[gpu][serving-sanitize]") {
    FMHA_REQUIRE_GPU();
    PartsCase p;
    p.full = dense_case(FMHA_DTYPE_FP16, 64, 2, 4, 2, 9, 150);
    p.cuts = {0, 70, 150};
    p.empty_at = 1;
    p.part_layout = Layout::SLICED;
    run_parts_case(p, case_seed(base_seed(), 27300));
    run_host_parts({FMHA_DTYPE_BF16, 128, 4, 1, 7, 3, Layout::BSHD, Layout::BHSD},
                   case_seed(base_seed(), 27301));
}
