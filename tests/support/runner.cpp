#include "fmha_test/runner.h"

#include "fmha_test/gpu.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>

#include "device_inputs.h"
#include "output_checks.h"
#include "run_once.h"
#include "fmha_test/half.h"
#include "fmha_test/random.h"

namespace fmha_test {

const char *mask_name(fmha_mask mask) {
    switch (mask) {
    case FMHA_MASK_NONE: return "none";
    case FMHA_MASK_CAUSAL_TOP_LEFT: return "top-left";
    case FMHA_MASK_CAUSAL_BOTTOM_RIGHT: return "bottom-right";
    }
    return "mask?";
}

std::string Case::name() const {
    char scale[32] = "";
    if (softmax_scale != 0) std::snprintf(scale, sizeof scale, " scale=%g", (double)softmax_scale);
    char features[96] = "";
    if (window_left >= 0 || window_right >= 0)
        std::snprintf(features, sizeof features, " window=%d:%d", window_left, window_right);
    if (softcap > 0)
        std::snprintf(features + std::strlen(features), sizeof features - std::strlen(features),
                      " softcap=%g", (double)softcap);
    if (sinks)
        std::snprintf(features + std::strlen(features), sizeof features - std::strlen(features),
                      " sinks");
    if (key_growth > 0)
        std::snprintf(features + std::strlen(features), sizeof features - std::strlen(features),
                      " key-growth=%g", (double)key_growth);
    char buf[420];
    std::snprintf(buf, sizeof buf,
                  "%s hd%lld b%lld Hq%lld/Hkv%lld sq%lld sk%lld mask=%s %s%s%s%s%s kernel=%s "
                  "seed=0x%016llx",
                  dtype_name(dtype), (long long)head_dim, (long long)batch,
                  (long long)num_q_heads, (long long)num_kv_heads, (long long)seqlen_q,
                  (long long)seqlen_k, mask_name(mask), layout_name(layout),
                  write_lse ? " lse" : "", scale, broadcast_kv ? " kv-batch-stride-0" : "",
                  features,
                  kernel_family_name(kernel),
                  (unsigned long long)seed);
    return buf;
}

Case dense_case(fmha_dtype dtype, int64_t head_dim, int64_t batch, int64_t num_q_heads,
                int64_t num_kv_heads, int64_t seqlen_q, int64_t seqlen_k) {
    Case c;
    c.dtype = dtype;
    c.head_dim = head_dim;
    c.batch = batch;
    c.num_q_heads = num_q_heads;
    c.num_kv_heads = num_kv_heads;
    c.seqlen_q = seqlen_q;
    c.seqlen_k = seqlen_k;
    return c;
}

bool Outputs::operator==(const Outputs &other) const {
    return o.size() == other.o.size() && lse.size() == other.lse.size() &&
           std::memcmp(o.data(), other.o.data(), o.size() * sizeof(uint16_t)) == 0 &&
           std::memcmp(lse.data(), other.lse.data(), lse.size() * sizeof(float)) == 0;
}

HostCase::HostCase(const Case &c) : case_(c) {
    if (c.num_kv_heads < 1 || c.num_q_heads % c.num_kv_heads != 0)
        throw std::invalid_argument("Case: num_q_heads must be a multiple of num_kv_heads");
    q_layout = make_layout(c.layout, c.batch, c.seqlen_q, c.num_q_heads, c.head_dim);
    const int64_t kv_batch = c.broadcast_kv ? 1 : c.batch;
    k_layout = make_layout(c.layout, kv_batch, c.seqlen_k, c.num_kv_heads, c.head_dim);
    if (c.broadcast_kv) k_layout.strides.batch = 0;
    v_layout = k_layout;
    o_layout = q_layout;
    std::mt19937_64 rng(c.seed);
    hq_ = random_tensor(q_layout, c.batch, c.seqlen_q, c.num_q_heads, c.head_dim, c.dtype, rng);
    hk_ = random_tensor(k_layout, kv_batch, c.seqlen_k, c.num_kv_heads, c.head_dim, c.dtype, rng,
                        c.key_growth);
    hv_ = random_tensor(v_layout, kv_batch, c.seqlen_k, c.num_kv_heads, c.head_dim, c.dtype, rng);
    if (c.sinks) {
        // Sinks comparable to the scores (some above, some below a row's max).
        std::normal_distribution<float> normal(0.0f, 2.0f);
        sinks_.resize(size_t(c.num_q_heads));
        for (float &x : sinks_) x = normal(rng);
    }
}

size_t HostCase::lse_elems() const {
    return case_.write_lse ? size_t(case_.batch * case_.num_q_heads * case_.seqlen_q) : 0;
}

CaseData::CaseData(const Case &c) : HostCase(c) {
    allocate_attention_buffers(*this, v_layout.alloc_elems);
    prefill_outputs();
}

fmha_descriptor HostCase::descriptor() const {
    fmha_descriptor d;
    if (fmha_descriptor_init(&d, FMHA_DESCRIPTOR_VERSION) != FMHA_STATUS_SUCCESS)
        throw std::runtime_error(std::string("fmha_descriptor_init: ") +
                                 fmha_last_error_message());
    d.dtype = case_.dtype;
    d.batch = case_.batch;
    d.num_q_heads = case_.num_q_heads;
    d.num_kv_heads = case_.num_kv_heads;
    d.seqlen_q = case_.seqlen_q;
    d.seqlen_k = case_.seqlen_k;
    d.head_dim = case_.head_dim;
    d.q_strides = q_layout.strides;
    d.k_strides = k_layout.strides;
    d.v_strides = v_layout.strides;
    d.o_strides = o_layout.strides;
    d.softmax_scale = case_.softmax_scale;
    d.mask = case_.mask;
    d.flags = (case_.write_lse ? FMHA_FLAG_WRITE_LSE : 0u) | (case_.sinks ? FMHA_FLAG_SINKS : 0u);
    d.kernel = case_.kernel;
    d.window_left = case_.window_left;
    d.window_right = case_.window_right;
    d.softcap = case_.softcap;
    return d;
}

fmha_tensors CaseData::tensors() const { return attention_tensors(*this, v_layout.offset); }

void CaseData::prefill_outputs() {
    o.fill(kOutputPrefill16);
    if (config().write_lse) lse.fill(kOutputPrefill32);
}

Outputs Outputs::download(const DeviceBuffer &o, const DeviceBuffer &lse, bool with_lse) {
    Outputs out;
    out.o.resize(o.elems());
    o.download(out.o.data());
    if (with_lse) {
        out.lse.resize(lse.elems());
        lse.download(out.lse.data());
    }
    return out;
}

Outputs CaseData::download() const { return Outputs::download(o, lse, config().write_lse); }

bool CaseData::guards_intact(std::string *why) const {
    return all_guards_intact(
        {{"q", &q}, {"k", &k}, {"v", &v}, {"o", &o}, {"lse", &lse}, {"sinks", &sinks}}, why);
}

RefProblem HostCase::ref_problem() const {
    RefProblem p;
    p.dtype = case_.dtype;
    p.batch = case_.batch;
    p.num_q_heads = case_.num_q_heads;
    p.num_kv_heads = case_.num_kv_heads;
    p.seqlen_q = case_.seqlen_q;
    p.seqlen_k = case_.seqlen_k;
    p.head_dim = case_.head_dim;
    p.mask = case_.mask;
    // The kernel multiplies by the float scale, so the reference uses that value.
    p.softmax_scale = case_.softmax_scale != 0
                          ? double(case_.softmax_scale)
                          : double(1.0f / std::sqrt(float(case_.head_dim)));
    p.q = q_layout.strides;
    p.k = k_layout.strides;
    p.v = v_layout.strides;
    p.o = o_layout.strides;
    p.window_left = case_.window_left;
    p.window_right = case_.window_right;
    p.softcap = case_.softcap;
    for (float x : sinks_) p.sinks.push_back(double(x));
    return p;
}

const RefResult &HostCase::ref64() {
    if (!ref64_)
        ref64_.reset(new RefResult(reference_fp64(ref_problem(), hq_.data() + q_layout.offset,
                                                  hk_.data() + k_layout.offset,
                                                  hv_.data() + v_layout.offset)));
    return *ref64_;
}

const RefResult &HostCase::ref_lowp() {
    if (!ref_lowp_)
        ref_lowp_.reset(new RefResult(reference_lowp(ref_problem(),
                                                     hq_.data() + q_layout.offset,
                                                     hk_.data() + k_layout.offset,
                                                     hv_.data() + v_layout.offset)));
    return *ref_lowp_;
}

namespace {

std::string where(int64_t b, int64_t h, int64_t i, int64_t d = -1) {
    return element_name("b", b, "h", h, "row", i, d);
}

}  // namespace

Comparison HostCase::compare(const Outputs &out) {
    const RefResult &r64 = ref64();
    const RefResult &rlp = ref_lowp();
    const Case &c = case_;
    const fmha_dtype dt = c.dtype;
    const int64_t D = c.head_dim;
    if (out.o.size() != o_layout.alloc_elems || out.lse.size() != lse_elems())
        throw std::invalid_argument("HostCase::compare: outputs of the wrong size");
    Comparison cmp;
    cmp.all_written = true;
    std::vector<char> logical(o_layout.alloc_elems, 0);
    int64_t worst_b = 0, worst_h = 0, worst_i = 0, worst_d = 0;
    for (int64_t b = 0; b < c.batch; ++b)
        for (int64_t h = 0; h < c.num_q_heads; ++h)
            for (int64_t i = 0; i < c.seqlen_q; ++i) {
                const size_t row = size_t((b * c.num_q_heads + h) * c.seqlen_q + i);
                const int row_class = magnitude_class(&r64.o[row * size_t(D)], D);
                // A row that sees no key: LSE -inf, or with sinks the sink's
                // logit and an O of exact zeros (a row that sees keys of
                // random V never sums to exactly 0).
                const bool masked = std::isinf(r64.lse[row]) || row_class < 0;
                if (masked) ++cmp.masked_rows;
                for (int64_t d = 0; d < D; ++d) {
                    const size_t at = size_t(o_layout.offset +
                                             element_offset(o_layout.strides, b, i, h, d));
                    logical[at] = 1;
                    const size_t ri = row * size_t(D) + size_t(d);
                    const double err =
                        check_o_element(cmp, out.o[at], dt, r64.o[ri], rlp.o[ri], row_class, masked,
                                        "a fully masked row", [&] { return where(b, h, i, d); });
                    if (err < 0) continue;
                    if (!(err <= cmp.max_err)) {
                        cmp.max_err = err;
                        worst_b = b, worst_h = h, worst_i = i, worst_d = d;
                    }
                }
            }
    judge_o(cmp, [&] { return where(worst_b, worst_h, worst_i, worst_d); });

    cmp.gaps_untouched = true;
    for (size_t at = 0; at < logical.size(); ++at)
        if (!logical[at] && out.o[at] != kOutputPrefill16) {
            note(cmp.detail, "O written outside the view, at allocation element " +
                                 std::to_string(at));
            cmp.gaps_untouched = false;
            break;
        }

    if (c.write_lse) {
        bool all_rows_within_tol = true;
        for (int64_t b = 0; b < c.batch; ++b)
            for (int64_t h = 0; h < c.num_q_heads; ++h)
                for (int64_t i = 0; i < c.seqlen_q; ++i) {
                    const size_t row = size_t((b * c.num_q_heads + h) * c.seqlen_q + i);
                    check_lse_entry(cmp, out.lse[row], r64.lse[row], rlp.lse[row],
                                    "a fully masked row", [&] { return where(b, h, i); },
                                    &all_rows_within_tol);
                }
        judge_lse(cmp, all_rows_within_tol);
    }
    return cmp;
}

Outputs HostCase::expected_outputs() {
    const RefResult &rlp = ref_lowp();
    const Case &c = case_;
    Outputs out;
    out.o.assign(o_layout.alloc_elems, kOutputPrefill16);
    for (int64_t b = 0; b < c.batch; ++b)
        for (int64_t h = 0; h < c.num_q_heads; ++h)
            for (int64_t i = 0; i < c.seqlen_q; ++i) {
                const size_t row = size_t((b * c.num_q_heads + h) * c.seqlen_q + i);
                for (int64_t d = 0; d < c.head_dim; ++d)
                    out.o[size_t(o_layout.offset + element_offset(o_layout.strides, b, i, h, d))] =
                        float_to_lowp(float(rlp.o[row * size_t(c.head_dim) + size_t(d)]), c.dtype);
            }
    if (c.write_lse) {
        out.lse.resize(lse_elems());
        for (size_t r = 0; r < out.lse.size(); ++r) out.lse[r] = float(rlp.lse[r]);
    }
    return out;
}

bool CaseResult::passed() const {
    return status == FMHA_STATUS_SUCCESS && error.empty() && guards_ok &&
           bitwise_identical_rerun && cmp.o_ok && cmp.lse_ok && cmp.all_written &&
           cmp.gaps_untouched && cmp.masked_rows_ok;
}

std::string CaseResult::summary(const Case &c) const {
    std::ostringstream s;
    s << (passed() ? "ok   " : "FAIL ") << c.name();
    if (append_run_failure(s, status, error)) return s.str();
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  " | kernel %s err %.3g lowp %.3g ratio %.2f lse_err %.3g lse_rel %.3g",
                  kernel_name.c_str(), cmp.max_err, cmp.lowp_err, cmp.ratio, cmp.lse_err,
                  cmp.lse_rel_err);
    s << buf;
    append_defects(s, guards_ok, bitwise_identical_rerun, cmp, "wrote outside the view",
                   "masked rows wrong");
    return s.str();
}


CaseResult run_case(const Case &c) {
    CaseResult r;
    try {
        CaseData data(c);
        fmha_descriptor desc = data.descriptor();
        PlanHolder ph;
        r.error = create_plan(ph, desc, &r.status);
        if (!r.error.empty()) return r;
        fmha_plan_info info;
        fmha_plan_info_init(&info, FMHA_PLAN_INFO_VERSION);
        if (fmha_plan_get_info(ph.plan, &info) == FMHA_STATUS_SUCCESS) {
            r.kernel_name = info.kernel_name ? info.kernel_name : "(null)";
            r.kernel_family = info.kernel_family;
        }
        size_t ws_bytes = 0;
        r.error = workspace_size(ph.plan, &ws_bytes, &r.status);
        if (!r.error.empty()) return r;
        r.workspace_bytes = ws_bytes;
        // Workspace starts as NaN garbage: a kernel must not rely on its contents.
        DeviceBuffer ws;
        if (ws_bytes > 0) ws = DeviceBuffer((ws_bytes + 3) / 4, 4, kGuard32);

        Outputs first, second;
        r.error = run_once(data, ph.plan, ws_bytes ? ws.data() : nullptr, ws_bytes, &r.status,
                           &first);
        if (r.error.empty())
            r.error = run_once(data, ph.plan, ws_bytes ? ws.data() : nullptr, ws_bytes,
                               &r.status, &second);
        if (!r.error.empty()) return r;
        r.bitwise_identical_rerun = first == second;
        std::string why;
        r.guards_ok = data.guards_intact(&why) && (ws_bytes == 0 || ws.guards_intact(&why));
        r.cmp = data.compare(first);
        if (!r.guards_ok) r.cmp.detail = why + (r.cmp.detail.empty() ? "" : "; " + r.cmp.detail);
        r.max_err = r.cmp.max_err;
        r.lowp_err = r.cmp.lowp_err;
        r.ratio = r.cmp.ratio;
        r.lse_err = r.cmp.lse_err;
        r.all_written = r.cmp.all_written;
    } catch (const std::exception &e) {
        if (r.error.empty()) r.error = std::string("test harness: ") + e.what();
    }
    return r;
}

}  // namespace fmha_test
