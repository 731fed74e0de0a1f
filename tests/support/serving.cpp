#include "fmha_test/serving.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "device_inputs.h"
#include "reference_math.h"
#include "output_checks.h"
#include "run_once.h"
#include "serving_run.h"
#include "fmha_test/half.h"
#include "fmha_test/random.h"

namespace fmha_test {

const char *key_layout_name(KeyLayout k) {
    switch (k) {
    case KeyLayout::DENSE: return "dense";
    case KeyLayout::PACKED: return "packed";
    case KeyLayout::PAGED: return "paged";
    }
    return "keys?";
}

const char *family_name(int family) {
    switch (family) {
    case FMHA_KERNEL_AUTO: return "auto";
    case FMHA_KERNEL_PORTABLE: return "portable";
    case FMHA_KERNEL_HOPPER: return "hopper";
    case FMHA_KERNEL_DECODE: return "decode";
    }
    return "family?";
}

std::vector<fmha_kernel_family> serving_families() {
    const char *env = std::getenv("FMHA_TEST_KERNEL");
    if (env == nullptr || env[0] == '\0' || std::strcmp(env, "auto") == 0)
        return {FMHA_KERNEL_AUTO, FMHA_KERNEL_PORTABLE, FMHA_KERNEL_DECODE};
    if (std::strcmp(env, "portable") == 0) return {FMHA_KERNEL_PORTABLE};
    if (std::strcmp(env, "hopper") == 0) return {FMHA_KERNEL_HOPPER};
    if (std::strcmp(env, "decode") == 0) return {FMHA_KERNEL_DECODE};
    throw std::invalid_argument(std::string("FMHA_TEST_KERNEL is \"") + env +
                                "\": must be auto, portable, hopper or decode");
}

// ---- ServingCase ---------------------------------------------------------

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A per-sequence problem for RefProblem's mask, window and score rules.
RefProblem sequence_problem(const ServingCase &c, int64_t len_q, int64_t len_k) {
    RefProblem p;
    p.dtype = c.dtype;
    p.batch = 1;
    p.num_q_heads = p.num_kv_heads = 1;
    p.seqlen_q = len_q;
    p.seqlen_k = len_k;
    p.head_dim = c.head_dim;
    p.mask = c.mask;
    // The kernel multiplies by the float scale, so the reference uses that value.
    p.softmax_scale = c.softmax_scale != 0 ? double(c.softmax_scale)
                                           : double(1.0f / std::sqrt(float(c.head_dim)));
    p.window_left = c.window_left;
    p.window_right = c.window_right;
    p.softcap = c.softcap;
    return p;
}

std::string lengths(const std::vector<int32_t> &v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) {
        if (i == 10) {
            s += ",...(" + std::to_string(v.size()) + ")";
            break;
        }
        if (i) s += ",";
        s += std::to_string(v[i]);
    }
    return s + "]";
}

}  // namespace

int64_t ServingCase::max_q() const {
    if (seqlen_q > 0) return seqlen_q;
    int64_t m = 1;
    for (int32_t x : q_lens) m = std::max<int64_t>(m, x);
    return m;
}

int64_t ServingCase::max_k() const {
    if (seqlen_k > 0) return seqlen_k;
    int64_t m = 1;
    for (int32_t x : k_lens) m = std::max<int64_t>(m, x);
    return m;
}

int64_t ServingCase::eff_q(int64_t b) const {
    return varlen_q ? std::min<int64_t>(q_lens[size_t(b)], max_q()) : max_q();
}

int64_t ServingCase::eff_k(int64_t b) const {
    int64_t len = (keys == KeyLayout::DENSE || (keys == KeyLayout::PAGED && !cu_seqlens_k))
                      ? max_k()
                      : int64_t(k_lens[size_t(b)]);
    if (!seqused.empty()) len = seqused[size_t(b)];
    return std::max<int64_t>(0, std::min(len, max_k()));
}

double ServingCase::reference_work() const {
    double work = 0;
    for (int64_t b = 0; b < batch(); ++b) {
        const RefProblem p = sequence_problem(*this, eff_q(b), eff_k(b));
        for (int64_t i = 0; i < eff_q(b); ++i) {
            const int64_t n = p.last_visible_key(i) - p.first_visible_key(i) + 1;
            if (n > 0) work += double(n);
        }
    }
    return work * double(num_q_heads) * double(head_dim);
}

void ServingCase::check() const {
    auto bad = [](const std::string &why) { throw std::invalid_argument("ServingCase: " + why); };
    if (q_lens.empty()) bad("no sequences");
    if (k_lens.size() != q_lens.size()) bad("k_lens and q_lens differ in length");
    if (!seqused.empty() && seqused.size() != q_lens.size()) bad("seqused has the wrong length");
    if (num_kv_heads < 1 || num_q_heads % num_kv_heads != 0) bad("heads");
    for (int32_t x : q_lens)
        if (x < 0 || (!varlen_q && x != max_q())) bad("q_lens must equal seqlen_q without varlen_q");
    for (int32_t x : k_lens)
        if (x < 0) bad("negative k_lens");
    if (keys == KeyLayout::DENSE && cu_seqlens_k) bad("DENSE keys with cu_seqlens_k");
    if (keys == KeyLayout::PACKED && !cu_seqlens_k) bad("PACKED keys need cu_seqlens_k");
    if (keys == KeyLayout::PAGED && page_size < 1) bad("page_size");
    for (int64_t b = 0; b < batch(); ++b) {
        if (keys == KeyLayout::DENSE && k_lens[size_t(b)] != max_k())
            bad("DENSE keys: every k_lens entry must equal seqlen_k");
        if (keys != KeyLayout::DENSE && k_lens[size_t(b)] < eff_k(b))
            bad("a sequence uses more keys than it stores");
    }
}

std::string ServingCase::name() const {
    std::ostringstream s;
    s << dtype_name(dtype) << " hd" << head_dim << " Hq" << num_q_heads << "/Hkv" << num_kv_heads
      << " b" << batch() << " sq" << max_q() << " sk" << max_k() << " q=";
    if (varlen_q) s << "varlen" << lengths(q_lens);
    else s << "dense";
    if (extra_q_rows) s << "+" << extra_q_rows << "rows";
    s << " k=" << key_layout_name(keys);
    if (keys == KeyLayout::PAGED) s << page_size;
    if (declared_pages > 0) s << " of " << declared_pages << " pages";
    if (keys != KeyLayout::DENSE) s << lengths(k_lens);
    if (cu_seqlens_k && keys == KeyLayout::PAGED) s << "+cu";
    if (!seqused.empty()) s << " seqused" << lengths(seqused);
    s << " mask=" << mask_name(mask);
    if (window_left >= 0 || window_right >= 0) s << " window=" << window_left << ":" << window_right;
    if (softcap > 0) s << " softcap=" << softcap;
    if (sinks) s << " sinks";
    if (softmax_scale != 0) s << " scale=" << softmax_scale;
    s << " " << layout_name(layout) << (write_lse ? " lse" : "") << " splits=" << num_splits
      << " kernel=" << family_name(kernel);
    char seed_hex[32];
    std::snprintf(seed_hex, sizeof seed_hex, " seed=0x%016llx", (unsigned long long)seed);
    return s.str() + seed_hex;
}

// ---- ServingHost -------------------------------------------------------------

ServingHost::ServingHost(const ServingCase &c, bool with_inputs)
    : case_(c), with_inputs_(with_inputs) {
    c.check();
    const int64_t B = c.batch(), Hq = c.num_q_heads, Hkv = c.num_kv_heads, D = c.head_dim;
    // Q and O.
    if (c.varlen_q) {
        cu_q_.assign(size_t(B + 1), 0);
        for (int64_t b = 0; b < B; ++b) cu_q_[size_t(b + 1)] = cu_q_[size_t(b)] + c.q_lens[size_t(b)];
        total_q_ = cu_q_[size_t(B)] + c.extra_q_rows;
        q_layout = make_layout(c.layout, 1, total_q_, Hq, D);
        q_layout.strides.batch = 8;  // packed tensors have no batch: fmha.h says it is not used
    } else {
        q_layout = make_layout(c.layout, B, c.max_q(), Hq, D);
    }
    o_layout = q_layout;
    // K and V.
    if (c.cu_seqlens_k) {
        cu_k_.assign(size_t(B + 1), 0);
        for (int64_t b = 0; b < B; ++b) cu_k_[size_t(b + 1)] = cu_k_[size_t(b)] + c.k_lens[size_t(b)];
    }
    std::mt19937_64 rng(c.seed);
    switch (c.keys) {
    case KeyLayout::DENSE: k_layout = make_layout(c.layout, B, c.max_k(), Hkv, D); break;
    case KeyLayout::PACKED:
        total_k_ = cu_k_[size_t(B)] + c.extra_k_rows;
        k_layout = make_layout(c.layout, 1, total_k_, Hkv, D);
        k_layout.strides.batch = 8;  // not used either
        break;
    case KeyLayout::PAGED: {
        const int64_t ps = c.page_size;
        int64_t held = 0;  // pages the sequences hold
        max_pages_ = ceil_div(c.max_k(), ps);
        for (int64_t b = 0; b < B; ++b) {
            held += ceil_div(c.k_lens[size_t(b)], ps);
            max_pages_ = std::max(max_pages_, ceil_div(c.k_lens[size_t(b)], ps));
        }
        max_pages_ += 1;  // a spare column, never read
        num_pages_ = held + c.extra_pages;
        if (num_pages_ < 1) num_pages_ = 1;
        k_layout = make_layout(c.layout, num_pages_, ps, Hkv, D);
        // Pages in a random order: sequence b's k-th page is perm[next++].
        std::vector<int32_t> perm(static_cast<size_t>(num_pages_));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        // Entries past a sequence's pages are never read: make them invalid.
        const int32_t junk[] = {-1, int32_t(num_pages_), INT32_MIN, int32_t(num_pages_ + 1000),
                                INT32_MAX, -77};
        block_table_.assign(size_t(B * max_pages_), 0);
        size_t next = 0, j = 0;
        for (int64_t b = 0; b < B; ++b) {
            const int64_t held_b = ceil_div(c.k_lens[size_t(b)], ps);
            for (int64_t i = 0; i < max_pages_; ++i)
                block_table_[size_t(b * max_pages_ + i)] =
                    i < held_b ? perm[next++] : junk[j++ % (sizeof junk / sizeof junk[0])];
        }
        break;
    }
    }
    if (!with_inputs) return;
    // Inputs: NaN everywhere, random values at the elements a run reads.
    std::normal_distribution<float> normal(0.0f, 1.0f);
    hq_.assign(q_layout.alloc_elems, kGuard16);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < c.eff_q(b); ++i)
            for (int64_t h = 0; h < Hq; ++h)
                for (int64_t d = 0; d < D; ++d)
                    hq_[size_t(o_element(b, i, h, d))] = float_to_lowp(normal(rng), c.dtype);
    hk_.assign(k_layout.alloc_elems, kGuard16);
    hv_.assign(k_layout.alloc_elems, kGuard16);
    for (std::vector<uint16_t> *t : {&hk_, &hv_})
        for (int64_t b = 0; b < B; ++b)
            for (int64_t j = 0; j < c.eff_k(b); ++j)
                for (int64_t h = 0; h < Hkv; ++h)
                    for (int64_t d = 0; d < D; ++d)
                        (*t)[size_t(k_element(b, j, h, d))] = float_to_lowp(normal(rng), c.dtype);
    if (c.sinks) {
        std::normal_distribution<float> sink(0.0f, 2.0f);
        sinks_.resize(size_t(Hq));
        for (float &x : sinks_) x = sink(rng);
    }
}

int64_t ServingHost::q_rows() const {
    return case_.varlen_q ? total_q_ : case_.batch() * case_.max_q();
}

size_t ServingHost::lse_elems() const {
    return case_.write_lse ? size_t(q_rows() * case_.num_q_heads) : 0;
}

int64_t ServingHost::row_index(int64_t b, int64_t i) const {
    return case_.varlen_q ? cu_q_[size_t(b)] + i : b * case_.max_q() + i;
}

int64_t ServingHost::o_element(int64_t b, int64_t i, int64_t h, int64_t d) const {
    return case_.varlen_q ? o_layout.offset + element_offset(o_layout.strides, 0, cu_q_[size_t(b)] + i, h, d)
                          : o_layout.offset + element_offset(o_layout.strides, b, i, h, d);
}

int64_t ServingHost::lse_entry(int64_t b, int64_t i, int64_t h) const {
    return case_.varlen_q ? h * total_q_ + cu_q_[size_t(b)] + i
                          : (b * case_.num_q_heads + h) * case_.max_q() + i;
}

int64_t ServingHost::k_element(int64_t b, int64_t j, int64_t h, int64_t d) const {
    switch (case_.keys) {
    case KeyLayout::DENSE: return k_layout.offset + element_offset(k_layout.strides, b, j, h, d);
    case KeyLayout::PACKED:
        return k_layout.offset + element_offset(k_layout.strides, 0, cu_k_[size_t(b)] + j, h, d);
    case KeyLayout::PAGED: {
        const int64_t page = block_table_[size_t(b * max_pages_ + j / case_.page_size)];
        return k_layout.offset + element_offset(k_layout.strides, page, j % case_.page_size, h, d);
    }
    }
    return 0;
}

int64_t ServingHost::pages_used(int64_t b) const {
    return case_.keys == KeyLayout::PAGED ? ceil_div(case_.eff_k(b), case_.page_size) : 0;
}

fmha_descriptor ServingHost::descriptor(fmha_kernel_family kernel, int32_t num_splits) const {
    const ServingCase &c = case_;
    fmha_descriptor d;
    if (fmha_descriptor_init(&d, FMHA_DESCRIPTOR_VERSION) != FMHA_STATUS_SUCCESS)
        throw std::runtime_error(std::string("fmha_descriptor_init: ") + fmha_last_error_message());
    d.dtype = c.dtype;
    d.batch = c.batch();
    d.num_q_heads = c.num_q_heads;
    d.num_kv_heads = c.num_kv_heads;
    d.seqlen_q = c.max_q();
    d.seqlen_k = c.max_k();
    d.head_dim = c.head_dim;
    d.q_strides = q_layout.strides;
    d.o_strides = o_layout.strides;
    d.k_strides = k_layout.strides;
    d.v_strides = k_layout.strides;
    d.softmax_scale = c.softmax_scale;
    d.mask = c.mask;
    d.flags = (c.write_lse ? FMHA_FLAG_WRITE_LSE : 0u) | (c.sinks ? FMHA_FLAG_SINKS : 0u) |
              (c.varlen_q ? FMHA_FLAG_VARLEN_Q : 0u) |
              (c.cu_seqlens_k ? FMHA_FLAG_VARLEN_K : 0u) |
              (c.seqused.empty() ? 0u : FMHA_FLAG_SEQUSED_K) |
              (c.keys == KeyLayout::PAGED ? FMHA_FLAG_PAGED_KV : 0u);
    d.kernel = kernel;
    d.window_left = c.window_left;
    d.window_right = c.window_right;
    d.softcap = c.softcap;
    d.total_q = c.varlen_q ? total_q_ : 0;
    d.total_k = c.keys == KeyLayout::PACKED ? total_k_ : 0;
    if (c.keys == KeyLayout::PAGED) {
        d.num_pages = std::max(num_pages_, c.declared_pages);
        d.max_pages_per_seq = max_pages_;
        d.page_size = c.page_size;
    }
    d.num_splits = num_splits;
    return d;
}

namespace {

template <typename Fn>
void parallel_for(int64_t jobs, Fn fn) {
    int threads = int(std::max(1u, std::thread::hardware_concurrency()));
    threads = int(std::min<int64_t>(threads, jobs));
    std::atomic<int64_t> next{0};
    auto worker = [&] {
        for (int64_t j; (j = next.fetch_add(1)) < jobs;) fn(j);
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (auto &t : pool) t.join();
}

}  // namespace

void ServingHost::compute_references() {
    if (!with_inputs_) throw std::logic_error("ServingHost: references of a case built without inputs");
    const ServingCase &c = case_;
    const int64_t B = c.batch(), Hq = c.num_q_heads, Hkv = c.num_kv_heads, D = c.head_dim;
    const int64_t group = Hq / Hkv, rows = q_rows();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double ninf = -std::numeric_limits<double>::infinity();
    std::unique_ptr<ServingRef> r64(new ServingRef), rlp(new ServingRef);
    r64->o.assign(size_t(rows * Hq * D), 0.0);
    rlp->o.assign(size_t(rows * Hq * D), 0.0);
    r64->lse.assign(size_t(rows * Hq), nan);
    rlp->lse.assign(size_t(rows * Hq), nan);

    // Each (sequence, kv head)'s keys and values, gathered once.
    std::vector<std::vector<double>> K(size_t(B * Hkv)), V(size_t(B * Hkv));
    std::vector<std::vector<float>> Kf(size_t(B * Hkv)), Vf(size_t(B * Hkv));
    parallel_for(B * Hkv, [&](int64_t job) {
        const int64_t b = job / Hkv, hk = job % Hkv, n = c.eff_k(b);
        for (int which = 0; which < 2; ++which) {
            const std::vector<uint16_t> &src = which ? hv_ : hk_;
            std::vector<double> &dd = which ? V[size_t(job)] : K[size_t(job)];
            std::vector<float> &ff = which ? Vf[size_t(job)] : Kf[size_t(job)];
            dd.resize(size_t(n * D));
            ff.resize(size_t(n * D));
            for (int64_t j = 0; j < n; ++j)
                for (int64_t d = 0; d < D; ++d) {
                    const float x = lowp_to_float(src[size_t(k_element(b, j, hk, d))], c.dtype);
                    dd[size_t(j * D + d)] = x;
                    ff[size_t(j * D + d)] = x;
                }
        }
    });

    // Rows in blocks of 16 per (sequence, q head).
    struct Job {
        int64_t b, h, i0, i1;
    };
    std::vector<Job> jobs;
    const int64_t kBlock = 16;
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < Hq; ++h)
            for (int64_t i0 = 0; i0 < c.eff_q(b); i0 += kBlock)
                jobs.push_back({b, h, i0, std::min(c.eff_q(b), i0 + kBlock)});
    parallel_for(int64_t(jobs.size()), [&](int64_t jn) {
        const Job &job = jobs[size_t(jn)];
        const int64_t b = job.b, h = job.h, hk = h / group, nk = c.eff_k(b);
        const RefProblem p = sequence_problem(c, c.eff_q(b), nk);
        const bool has_sink = c.sinks;
        const double *Kd = K[size_t(b * Hkv + hk)].data(), *Vd = V[size_t(b * Hkv + hk)].data();
        const float *Kl = Kf[size_t(b * Hkv + hk)].data(), *Vl = Vf[size_t(b * Hkv + hk)].data();
        std::vector<double> qd(static_cast<size_t>(D)), acc(static_cast<size_t>(D));
        std::vector<double> s(static_cast<size_t>(std::max<int64_t>(nk, 1)));
        std::vector<float> qf(static_cast<size_t>(D)), accf(static_cast<size_t>(D));
        std::vector<float> sf(static_cast<size_t>(std::max<int64_t>(nk, 1)));
        const float scale = float(p.scale());
        for (int64_t i = job.i0; i < job.i1; ++i) {
            const int64_t row = row_index(b, i);
            for (int64_t d = 0; d < D; ++d) {
                const float x = lowp_to_float(hq_[size_t(o_element(b, i, h, d))], c.dtype);
                qd[size_t(d)] = x;
                qf[size_t(d)] = x;
            }
            double *o64 = &r64->o[size_t((row * Hq + h) * D)];
            double *olp = &rlp->o[size_t((row * Hq + h) * D)];
            double &lse64 = r64->lse[size_t(row * Hq + h)];
            double &lselp = rlp->lse[size_t(row * Hq + h)];
            const int64_t first = p.first_visible_key(i), last = p.last_visible_key(i);
            if (last < first) {  // sees no key: O = 0, LSE = -inf or the sink
                lse64 = has_sink ? double(sinks_[size_t(h)]) : ninf;
                lselp = lse64;
                continue;
            }
            // The arithmetic of reference_fp64 and reference_lowp.
            const float sink = has_sink ? sinks_[size_t(h)] : 0.0f;
            lse64 = attend_row_fp64(p, qd.data(), Kd, Vd, D, first, last, has_sink, double(sink),
                                    s.data(), acc.data(), o64);
            lselp = attend_row_lowp(p, qf.data(), Kl, Vl, D, first, last, has_sink, sink, scale,
                                    sf.data(), accf.data(), olp);
        }
    });
    ref64_ = std::move(r64);
    ref_lowp_ = std::move(rlp);
}

const ServingRef &ServingHost::ref64() {
    if (!ref64_) compute_references();
    return *ref64_;
}

const ServingRef &ServingHost::ref_lowp() {
    if (!ref_lowp_) compute_references();
    return *ref_lowp_;
}

namespace {

std::string where(int64_t b, int64_t i, int64_t h, int64_t d = -1) {
    return element_name("seq", b, "row", i, "h", h, d);
}

uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

}  // namespace

Comparison ServingHost::compare(const Outputs &out) {
    const ServingRef &r64 = ref64();
    const ServingRef &rlp = ref_lowp();
    const ServingCase &c = case_;
    const fmha_dtype dt = c.dtype;
    const int64_t Hq = c.num_q_heads, D = c.head_dim;
    if (out.o.size() != o_layout.alloc_elems || out.lse.size() != lse_elems())
        throw std::invalid_argument("ServingHost::compare: outputs of the wrong size");
    Comparison cmp;
    cmp.all_written = true;
    // 0: must keep the prefill; 1: compared; 2: a row past seqlen_q of a
    // longer sequence, which fmha.h leaves unspecified.
    std::vector<char> o_role(o_layout.alloc_elems, 0), lse_role(out.lse.size(), 0);
    int64_t wb = 0, wi = 0, wh = 0, wd = 0;
    bool all_rows_within_tol = true;
    for (int64_t b = 0; b < c.batch(); ++b) {
        const int64_t rows = c.varlen_q ? c.q_lens[size_t(b)] : c.max_q();
        const RefProblem p = sequence_problem(c, c.eff_q(b), c.eff_k(b));
        for (int64_t i = 0; i < rows; ++i) {
            const bool computed = i < c.eff_q(b);
            const bool sees_none = computed && p.last_visible_key(i) < p.first_visible_key(i);
            if (sees_none) cmp.masked_rows += Hq;
            const int64_t row = row_index(b, i);
            for (int64_t h = 0; h < Hq; ++h) {
                const int row_class =
                    computed ? magnitude_class(&r64.o[size_t((row * Hq + h) * D)], D) : -1;
                for (int64_t d = 0; d < D; ++d) {
                    const size_t at = size_t(o_element(b, i, h, d));
                    o_role[at] = computed ? 1 : 2;
                    if (!computed) continue;
                    const size_t ri = size_t((row * Hq + h) * D + d);
                    const double err = check_o_element(cmp, out.o[at], dt, r64.o[ri], rlp.o[ri],
                                                       row_class, sees_none, "a row that sees no key",
                                                       [&] { return where(b, i, h, d); });
                    if (err < 0) continue;
                    if (!(err <= cmp.max_err)) {
                        cmp.max_err = err;
                        wb = b, wi = i, wh = h, wd = d;
                    }
                }
                if (!c.write_lse) continue;
                const size_t le = size_t(lse_entry(b, i, h));
                lse_role[le] = computed ? 1 : 2;
                if (!computed) continue;
                check_lse_entry(cmp, out.lse[le], r64.lse[size_t(row * Hq + h)],
                                rlp.lse[size_t(row * Hq + h)], "a row that sees no key",
                                [&] { return where(b, i, h); }, &all_rows_within_tol);
            }
        }
    }
    judge_o(cmp, [&] { return where(wb, wi, wh, wd); });
    cmp.gaps_untouched = true;
    for (size_t at = 0; at < o_role.size(); ++at)
        if (o_role[at] == 0 && out.o[at] != kOutputPrefill16) {
            note(cmp.detail, "O written outside the sequences' rows, at allocation element " +
                                 std::to_string(at));
            cmp.gaps_untouched = false;
            break;
        }
    for (size_t at = 0; at < lse_role.size(); ++at)
        if (lse_role[at] == 0 && bits_of(out.lse[at]) != kOutputPrefill32) {
            note(cmp.detail, "LSE written outside the sequences' rows, at entry " +
                                 std::to_string(at));
            cmp.gaps_untouched = false;
            break;
        }
    if (c.write_lse) judge_lse(cmp, all_rows_within_tol);
    return cmp;
}

Outputs ServingHost::expected_outputs() {
    const ServingRef &rlp = ref_lowp();
    const ServingCase &c = case_;
    const int64_t Hq = c.num_q_heads, D = c.head_dim;
    Outputs out;
    out.o.assign(o_layout.alloc_elems, kOutputPrefill16);
    float prefill;
    std::memcpy(&prefill, &kOutputPrefill32, 4);
    out.lse.assign(lse_elems(), prefill);
    for (int64_t b = 0; b < c.batch(); ++b)
        for (int64_t i = 0; i < c.eff_q(b); ++i)
            for (int64_t h = 0; h < Hq; ++h) {
                const int64_t row = row_index(b, i);
                for (int64_t d = 0; d < D; ++d)
                    out.o[size_t(o_element(b, i, h, d))] =
                        float_to_lowp(float(rlp.o[size_t((row * Hq + h) * D + d)]), c.dtype);
                if (c.write_lse)
                    out.lse[size_t(lse_entry(b, i, h))] = float(rlp.lse[size_t(row * Hq + h)]);
            }
    return out;
}

// ---- ServingData ---------------------------------------------------------------

ServingData::ServingData(const ServingCase &c) : ServingHost(c) {
    allocate_attention_buffers(*this, k_layout.alloc_elems);  // V shares K's layout
    if (c.varlen_q) cu_q = int32_buffer(host_cu_q(), kGuard32);
    if (c.cu_seqlens_k) cu_k = int32_buffer(host_cu_k(), kGuard32);
    if (!c.seqused.empty()) seqused = int32_buffer(c.seqused, kGuard32);
    if (c.keys == KeyLayout::PAGED) block_table = int32_buffer(host_block_table(), kGuard32);
    prefill_outputs();
}

fmha_tensors ServingData::tensors() const {
    const ServingCase &c = config();
    fmha_tensors t = attention_tensors(*this, k_layout.offset);  // V shares K's layout
    t.cu_seqlens_q = c.varlen_q ? static_cast<const int32_t *>(cu_q.data()) : nullptr;
    t.cu_seqlens_k = c.cu_seqlens_k ? static_cast<const int32_t *>(cu_k.data()) : nullptr;
    t.seqused_k = c.seqused.empty() ? nullptr : static_cast<const int32_t *>(seqused.data());
    t.block_table =
        c.keys == KeyLayout::PAGED ? static_cast<const int32_t *>(block_table.data()) : nullptr;
    return t;
}

void ServingData::upload_inputs(const ServingHost &from) {
    const ServingCase &a = config(), &b = from.config();
    const struct {
        DeviceBuffer *buf;
        size_t elems;
        const void *host;
        const char *name;
    } arrays[] = {
        {&q, from.host_q().size(), from.host_q().data(), "q"},
        {&k, from.host_k().size(), from.host_k().data(), "k"},
        {&v, from.host_v().size(), from.host_v().data(), "v"},
        {&sinks, from.host_sinks().size(), from.host_sinks().data(), "sinks"},
        {&cu_q, b.varlen_q ? from.host_cu_q().size() : 0, from.host_cu_q().data(), "cu_seqlens_q"},
        {&cu_k, b.cu_seqlens_k ? from.host_cu_k().size() : 0, from.host_cu_k().data(),
         "cu_seqlens_k"},
        {&seqused, b.seqused.size(), b.seqused.data(), "seqused_k"},
        {&block_table, b.keys == KeyLayout::PAGED ? from.host_block_table().size() : 0,
         from.host_block_table().data(), "block_table"},
    };
    if (a.dtype != b.dtype || a.layout != b.layout || a.keys != b.keys ||
        o_layout.alloc_elems != from.o_layout.alloc_elems)
        throw std::invalid_argument("ServingData::upload_inputs: another dtype, layout or O size");
    for (const auto &x : arrays) {
        if (x.buf->elems() != x.elems)
            throw std::invalid_argument(std::string("ServingData::upload_inputs: ") + x.name +
                                        " has " + std::to_string(x.elems) +
                                        " elements, the buffer " + std::to_string(x.buf->elems()));
        if (x.elems > 0) x.buf->upload(x.host);
    }
}

void ServingData::prefill_outputs() {
    o.fill(kOutputPrefill16);
    if (config().write_lse) lse.fill(kOutputPrefill32);
}

Outputs ServingData::download() const { return Outputs::download(o, lse, config().write_lse); }

bool ServingData::guards_intact(std::string *why) const {
    return all_guards_intact({{"q", &q},
                              {"k", &k},
                              {"v", &v},
                              {"o", &o},
                              {"lse", &lse},
                              {"sinks", &sinks},
                              {"cu_seqlens_q", &cu_q},
                              {"cu_seqlens_k", &cu_k},
                              {"seqused_k", &seqused},
                              {"block_table", &block_table}},
                             why);
}

// ---- running -------------------------------------------------------------------

const char *documented_unsupported(const fmha_descriptor &d, const std::string &error) {
    // fmha.h gives each kernel's shared memory per head_dim; a device with
    // less (sm_80 166 KB, sm_86/89/120 99 KB) declines it.
    if (error.find("bytes of shared memory per block") != std::string::npos)
        return "fmha.h: the kernel needs more shared memory than this device offers";
    if (d.kernel == FMHA_KERNEL_PORTABLE && d.head_dim == 512)
        return "fmha.h: head_dim 512 runs on the decode and Hopper kernels";
    if (d.kernel == FMHA_KERNEL_HOPPER)
        return "an explicitly requested Hopper kernel may decline a problem";
    return nullptr;
}

bool ServingRun::passed() const {
    return status == FMHA_STATUS_SUCCESS && error.empty() && unsupported == nullptr &&
           plan_problem.empty() && guards_ok && rerun_identical && cmp.o_ok && cmp.lse_ok &&
           cmp.all_written && cmp.gaps_untouched && cmp.masked_rows_ok;
}

std::string ServingRun::summary(const ServingCase &c) const {
    std::ostringstream s;
    ServingCase shown = c;
    shown.kernel = kernel;
    shown.num_splits = requested_splits;
    if (unsupported) s << "UNSUPPORTED ";
    else s << (passed() ? "ok   " : "FAIL ");
    s << shown.name();
    if (unsupported) {
        s << " | " << fmha_status_string(status) << " (" << unsupported << "): " << error;
        return s.str();
    }
    if (append_run_failure(s, status, error)) return s.str();
    char buf[240];
    std::snprintf(buf, sizeof buf,
                  " | kernel %s (%s) splits %d ws %llu err %.3g lowp %.3g ratio %.2f lse_err %.3g"
                  " lse_rel %.3g",
                  kernel_name.c_str(), family_name(kernel_family), num_splits,
                  (unsigned long long)workspace_bytes, cmp.max_err, cmp.lowp_err, cmp.ratio,
                  cmp.lse_err, cmp.lse_rel_err);
    s << buf;
    if (!plan_problem.empty()) s << " | plan info: " << plan_problem;
    append_defects(s, guards_ok, rerun_identical, cmp, "wrote outside the sequences",
                   "rows that see no key wrong");
    return s.str();
}


ServingRun run_serving(ServingData &data, fmha_kernel_family kernel, int32_t num_splits) {
    return run_serving_on(data, kernel, num_splits);
}

// ---- the GPU suites' cases ---------------------------------------------------

namespace {

const fmha_dtype kDtypes[] = {FMHA_DTYPE_BF16, FMHA_DTYPE_FP16};
const Layout kLayouts[] = {Layout::BSHD, Layout::BHSD, Layout::SLICED};

std::vector<int32_t> rotated(std::vector<int32_t> v, size_t by) {
    std::rotate(v.begin(), v.begin() + long(by % v.size()), v.end());
    return v;
}

// Seeds each case from base_seed() and its suite's first index.
std::vector<ServingCase> seeded(std::vector<ServingCase> v, uint64_t first) {
    for (size_t i = 0; i < v.size(); ++i) v[i].seed = case_seed(base_seed(), first + i);
    return v;
}

// `n` sequences of `len` rows or keys each.
std::vector<int32_t> repeated(size_t n, int32_t len) { return std::vector<int32_t>(n, len); }

const fmha_mask kBottomRight = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;

// Windows, softcap and sinks, alone and combined, for the feature suites:
// `local` is the left window of causal local attention, `combined` that of
// the case with every feature at once.
struct ServingFeature {
    int32_t left, right;
    float softcap;
    bool sinks;
    fmha_mask mask;
};

std::vector<ServingFeature> serving_features(int32_t local, int32_t combined) {
    return {
        {local, -1, 0, false, FMHA_MASK_CAUSAL_BOTTOM_RIGHT},     // causal local attention
        {37, 50, 0, false, FMHA_MASK_NONE},                       // two-sided window
        {0, 0, 0, false, FMHA_MASK_NONE},                         // the diagonal only
        {-1, 10, 0, false, FMHA_MASK_CAUSAL_TOP_LEFT},            // causal ignores the right window
        {-1, 5, 0, false, FMHA_MASK_NONE},                        // right window only
        {-1, -1, 30.0f, false, FMHA_MASK_NONE},                   // Gemma-style softcap
        {-1, -1, 2.0f, false, FMHA_MASK_CAUSAL_BOTTOM_RIGHT},     // hard capping
        {-1, -1, 0, true, FMHA_MASK_NONE},                        // sinks
        {-1, -1, 0, true, FMHA_MASK_CAUSAL_BOTTOM_RIGHT},         // sinks, rows that see nothing
        {combined, -1, 20.0f, true, FMHA_MASK_CAUSAL_BOTTOM_RIGHT},  // everything at once
    };
}

// Sets a feature's mask, windows, softcap and sinks on c.
ServingCase with_feature(ServingCase c, const ServingFeature &f) {
    c.mask = f.mask;
    c.window_left = f.left;
    c.window_right = f.right;
    c.softcap = f.softcap;
    c.sinks = f.sinks;
    return c;
}

// Every feature on `variants` shapes each: make(dtype, variant, n) gives the
// head dim, heads, lengths and kernel options of case n (never a feature
// field), whose dtype and layout rotate with n.
std::vector<ServingCase> feature_cases(
    const std::vector<ServingFeature> &features, int variants,
    const std::function<ServingCase(fmha_dtype, int, int)> &make) {
    std::vector<ServingCase> v;
    int n = 0;
    for (const ServingFeature &f : features)
        for (int variant = 0; variant < variants; ++variant) {
            ServingCase c = with_feature(make(kDtypes[n % 2], variant, n), f);
            c.layout = kLayouts[n % 3];
            v.push_back(c);
            ++n;
        }
    return v;
}

}  // namespace

std::vector<ServingCase> varlen_suite() {
    std::vector<ServingCase> v;
    // Pairs (rows, keys) mixing every length of {0, 1, 2, 17, 1000, 4097}:
    // empty sequences, rows without keys, one key, more keys than rows and fewer.
    const std::vector<int32_t> aq = {17, 0, 1000, 1, 2, 17, 1, 2, 0, 17, 1000};
    const std::vector<int32_t> ak = {17, 1000, 1000, 4097, 2, 0, 1, 17, 0, 1000, 17};
    // One 4097 x 4097 sequence: causal in two cases, full in one (hd64 and one
    // head, to keep the reference affordable).
    const std::vector<int32_t> bq = {4097, 2, 17, 0, 1};
    const std::vector<int32_t> bk = {4097, 1, 4097, 17, 1000};
    struct V {
        fmha_dtype dt;
        int64_t hd, hq, hkv;
        fmha_mask mask;
        Layout layout;
        std::vector<int32_t> q, k;
        int64_t extra_rows;
        float scale;
    } packed[] = {
        {FMHA_DTYPE_BF16, 128, 4, 2, FMHA_MASK_NONE, Layout::BSHD, aq, ak, 7, 0},
        {FMHA_DTYPE_FP16, 128, 4, 1, FMHA_MASK_CAUSAL_TOP_LEFT, Layout::BHSD, rotated(aq, 3),
         rotated(ak, 3), 1, 0},
        {FMHA_DTYPE_BF16, 64, 4, 4, FMHA_MASK_CAUSAL_BOTTOM_RIGHT, Layout::SLICED,
         rotated(aq, 5), rotated(ak, 5), 0, 0},
        {FMHA_DTYPE_FP16, 64, 4, 2, FMHA_MASK_CAUSAL_BOTTOM_RIGHT, Layout::BSHD, rotated(aq, 8),
         rotated(ak, 8), 16, 0.3f},
        {FMHA_DTYPE_FP16, 64, 2, 1, FMHA_MASK_CAUSAL_TOP_LEFT, Layout::BSHD, bq, bk, 3, 0},
        {FMHA_DTYPE_BF16, 64, 2, 2, FMHA_MASK_CAUSAL_BOTTOM_RIGHT, Layout::BHSD, rotated(bq, 2),
         rotated(bk, 2), 0, 0},
        {FMHA_DTYPE_BF16, 64, 1, 1, FMHA_MASK_NONE, Layout::BSHD, rotated(bq, 1), rotated(bk, 1),
         5, 0},
    };
    for (const V &x : packed)
        v.push_back(serving_case(x.dt, x.hd, x.hq, x.hkv)
                        .varlen_q(x.q, x.extra_rows).packed_k(x.k)
                        .mask(x.mask).layout(x.layout).scale(x.scale));
    // varlen Q over a dense K [6, 1000]
    v.push_back(serving_case(FMHA_DTYPE_FP16, 128, 4, 2)
                    .varlen_q({0, 1, 2, 17, 1000, 17}, 5).k(repeated(6, 1000)).mask(kBottomRight));
    for (fmha_mask m : {FMHA_MASK_NONE, FMHA_MASK_CAUSAL_BOTTOM_RIGHT})
        // dense Q [6, 17] over packed K (bottom-right: rows without keys)
        v.push_back(serving_case(FMHA_DTYPE_BF16, 64, 4, 1)
                        .q(repeated(6, 17)).packed_k({0, 1, 2, 17, 1000, 4097})
                        .mask(m).layout(Layout::SLICED).scale(0.3f));
    // Non-causal packed Q and K up to 2000 keys: the Hopper kernel's `_varlen`
    // entry points (walking only the real query blocks, kernel-notes h26),
    // with empty sequences, one-row sequences and ragged block counts.
    const std::vector<int32_t> cq = {300, 0, 1, 1000, 129, 17, 2000, 128};
    const std::vector<int32_t> ck = {300, 40, 1, 2000, 700, 0, 1500, 128};
    struct W {
        fmha_dtype dt;
        int64_t hd, hq, hkv;
        Layout layout;
    } walks[] = {{FMHA_DTYPE_BF16, 128, 8, 2, Layout::BSHD},
                 {FMHA_DTYPE_FP16, 96, 6, 3, Layout::BHSD},
                 {FMHA_DTYPE_BF16, 256, 4, 4, Layout::SLICED},
                 {FMHA_DTYPE_FP16, 64, 4, 1, Layout::BSHD}};
    int w = 0;
    for (const W &x : walks) {
        v.push_back(serving_case(x.dt, x.hd, x.hq, x.hkv)
                        .varlen_q(rotated(cq, w), 5).packed_k(rotated(ck, w))
                        .mask(FMHA_MASK_NONE).layout(x.layout));
        w += 3;
    }
    // Lengths past seqlen_q / seqlen_k: fmha.h computes only the first
    // seqlen_q rows and uses only the first seqlen_k keys. (Under
    // BOTTOM_RIGHT the alignment of a clamped sequence is not specified:
    // TOP_LEFT and NONE only.) Rows past seqlen_q are not checked.
    for (fmha_mask m : {FMHA_MASK_CAUSAL_TOP_LEFT, FMHA_MASK_NONE}) {
        ServingCase c = serving_case(FMHA_DTYPE_FP16, 64, 2, 2)
                            .varlen_q({20, 3, 16, 40}).packed_k({150, 40, 100, 7}).mask(m);
        c.seqlen_q = 16;
        c.seqlen_k = 100;
        v.push_back(c);
    }
    // seqused_k above seqlen_k is clamped to it
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 4, 2)
                    .q(repeated(3, 5)).k(repeated(3, 64)).seqused({70, 10, 64}));
    return seeded(v, 20000);
}

std::vector<ServingCase> paged_suite() {
    std::vector<ServingCase> v;
    // 3 and 48 are not powers of two: the kernels' general page division.
    const int32_t page_sizes[] = {1, 16, 32, 64, 128, 256, 3, 48};
    int n = 0;
    for (int32_t ps : page_sizes) {
        std::mt19937_64 rng(case_seed(base_seed(), 21500 + uint64_t(ps)));
        {  // decode-like rows, lengths from seqused_k, a few NaN keys past them
            ServingCase c = serving_case(kDtypes[n % 2], 128, 8, 2)
                                .varlen_q(rotated({1, 4, 17, 0, 33, 1}, size_t(n)))
                                .paged(ps, {})
                                .seqused(rotated({1500, 0, 777, 64, 2000, 1}, size_t(n)))
                                .mask(kBottomRight)
                                .layout(n % 2 ? Layout::BHSD : Layout::BSHD)  // BHSD: [page, head, row, dim]
                                .extra_pages(5);
            for (int32_t u : c.seqused) c.k_lens.push_back(u + int32_t(rng() % uint64_t(2 * ps + 1)));
            v.push_back(c);
        }
        // key counts from cu_seqlens_k (no seqused), a sliding window
        v.push_back(serving_case(kDtypes[(n + 1) % 2], 64, 4, 1)
                        .varlen_q(rotated({17, 1, 100, 1, 0}, size_t(n)), 2)
                        .paged(ps, rotated({300, 17, 1000, 1, 5}, size_t(n))).with_cu_seqlens_k()
                        .mask(n % 2 ? FMHA_MASK_CAUSAL_BOTTOM_RIGHT : FMHA_MASK_NONE)
                        .window(64, n % 2 ? -1 : 16)
                        .layout(kLayouts[n % 3]));
        ++n;
    }
    // chunked prefill over a paged cache
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 4, 1)
                    .varlen_q({1000, 64}).paged(16, {3010, 70}).seqused({3000, 64})
                    .mask(kBottomRight));
    // hd96 decode over 16-row pages (the paged tile traits, a non-power-of-2 dim)
    v.push_back(serving_case(FMHA_DTYPE_BF16, 96, 8, 2)
                    .q(repeated(3, 1)).paged(16, {710, 16, 340}).seqused({700, 1, 333})
                    .mask(kBottomRight));
    // dense Q, no seqused, no cu_seqlens_k: seqlen_k keys for every sequence
    v.push_back(serving_case(FMHA_DTYPE_FP16, 256, 8, 8)
                    .q(repeated(3, 4)).paged(32, repeated(3, 500)).mask(FMHA_MASK_CAUSAL_TOP_LEFT));
    return seeded(v, 21000);
}

std::vector<ServingCase> decode_suite() {
    std::vector<ServingCase> v;
    const int64_t Ts[] = {1, 4, 32, 128};
    const int64_t head_dims[] = {64, 128, 256, 512};
    const int ratios[] = {1, 4, 8, 0};  // 0: MQA
    const int64_t seqlens_k[] = {300, 517, 777, 1100, 1023, 640};
    const int32_t page_sizes[] = {16, 64, 1, 32, 256};
    int idx = 0, paged = 0;
    for (int ti = 0; ti < 4; ++ti)
        for (int hi = 0; hi < 4; ++hi)
            for (int ri = 0; ri < 4; ++ri) {
                const int64_t T = Ts[ti], hd = head_dims[hi];
                const int ratio = ratios[ri];
                // The key layout and the dtype turn with the sum of the indices,
                // so every ratio meets every layout, and each pairing both dtypes.
                const int key_kind = (ti + hi + ri) % 4;
                std::mt19937_64 rng(case_seed(base_seed(), 22500 + uint64_t(idx)));
                ServingCase c = serving_case(kDtypes[(hi + ri + ti / 2) % 2], hd, 0, 0);
                if (hd == 512) {  // MLA-style: one KV head
                    c.num_kv_heads = 1;
                    c.num_q_heads = ratio == 0 ? 16 : ratio;
                } else if (ratio == 0) {
                    c.num_kv_heads = 1;
                    c.num_q_heads = 8;
                } else {
                    c.num_kv_heads = 2;
                    c.num_q_heads = 2 * ratio;
                }
                c.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
                int64_t batch = 1 + idx % 3;
                int64_t sk = seqlens_k[idx % 6];
                auto cost = [&] { return double(T * c.num_q_heads * hd * sk * batch); };
                while (cost() > 1.5e8 && batch > 1) --batch;
                while (cost() > 1.5e8 && sk > 300) sk = std::max<int64_t>(300, sk * 3 / 4);
                // Queries: dense [batch, T], or varlen with one shorter sequence.
                c.q_lens.assign(size_t(batch), int32_t(T));
                if (idx % 5 == 0) {
                    c.varlen_q = true;
                    c.q_lens[0] = int32_t(std::max<int64_t>(1, T / 2));
                    c.extra_q_rows = 3;
                }
                // Keys: dense; dense + seqused; paged + seqused; packed.
                auto some_len = [&] {
                    return int32_t(sk / 3 + int64_t(rng() % uint64_t(sk - sk / 3 + 1)));
                };
                switch (key_kind) {
                case 0: c.k_lens.assign(size_t(batch), int32_t(sk)); break;
                case 1:
                    c.k_lens.assign(size_t(batch), int32_t(sk));
                    for (int64_t b = 0; b < batch; ++b) c.seqused.push_back(some_len());
                    c.seqused[0] = int32_t(sk);
                    break;
                case 2:
                    c.keys = KeyLayout::PAGED;
                    c.page_size = page_sizes[paged++ % 5];
                    for (int64_t b = 0; b < batch; ++b) c.seqused.push_back(some_len());
                    c.seqused[0] = int32_t(sk);
                    for (int32_t u : c.seqused) c.k_lens.push_back(u + c.page_size / 2);
                    c.seqlen_k = sk;
                    break;
                case 3:
                    c.keys = KeyLayout::PACKED;
                    c.cu_seqlens_k = true;
                    for (int64_t b = 0; b < batch; ++b) c.k_lens.push_back(some_len());
                    c.k_lens[0] = int32_t(sk);
                    break;
                }
                c.layout = kLayouts[(idx / 2) % 3];
                v.push_back(c);
                ++idx;
            }
    return seeded(v, 22000);
}

std::vector<ServingCase> packed_heads_suite() {
    std::vector<ServingCase> v;
    const int64_t Ts[] = {1, 3, 16, 32, 100, 256};
    const int64_t head_dims[] = {64, 128, 256};
    const int groups[] = {2, 4, 8, 16, 3, 5, 6, 7};  // 3-7: padded to 4 or 8 rows per position
    const fmha_mask masks[] = {FMHA_MASK_CAUSAL_BOTTOM_RIGHT, FMHA_MASK_NONE,
                               FMHA_MASK_CAUSAL_TOP_LEFT};
    // 4100 keys take hd128's wide key tile.
    const int64_t seqlens_k[] = {700, 4100, 257, 1500, 64};
    int idx = 0;
    for (int64_t T : Ts)
        for (int64_t hd : head_dims) {
            std::mt19937_64 rng(case_seed(base_seed(), 23500 + uint64_t(idx)));
            const int group = groups[idx % 8];
            const int64_t kv_heads = 1 + idx % 2;
            ServingCase c = serving_case(kDtypes[idx % 2], hd, group * kv_heads, kv_heads);
            c.mask = masks[idx % 3];
            int64_t batch = 1 + idx % 3;
            int64_t sk = seqlens_k[idx % 5];
            if (sk < T && c.mask == FMHA_MASK_CAUSAL_BOTTOM_RIGHT) sk = T + 5;
            auto cost = [&] { return double(T * c.num_q_heads * hd * sk * batch); };
            while (cost() > 1.5e8 && batch > 1) --batch;
            while (cost() > 1.5e8 && sk > 300) sk = std::max<int64_t>(300, sk * 3 / 4);
            c.q_lens.assign(size_t(batch), int32_t(T));
            c.k_lens.assign(size_t(batch), int32_t(sk));
            if (idx % 2 == 1) {  // a KV cache with fewer keys used than stored
                for (int64_t b = 0; b < batch; ++b)
                    c.seqused.push_back(int32_t(1 + int64_t(rng() % uint64_t(sk))));
                c.seqused[0] = int32_t(sk);
            }
            c.layout = kLayouts[idx % 3];
            v.push_back(c);
            ++idx;
        }
    // every query head of one KV head: 64 per tile (hd128 box of 2 positions)
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 64, 1)
                    .q({5, 5}).k({900, 900}).mask(kBottomRight));
    // packed (varlen) Q over a dense cache with seqused_k: 4 heads per tile
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 32, 8)
                    .varlen_q({32, 17, 0, 5}, 3).k(repeated(4, 2000)).seqused({2000, 40, 700, 1})
                    .mask(kBottomRight));
    // packed Q over packed K, 6 heads per KV head (padded to 8)
    v.push_back(serving_case(FMHA_DTYPE_FP16, 64, 12, 2)
                    .varlen_q({100, 1, 64}).packed_k({300, 4100, 64}).mask(kBottomRight));
    // 48 query heads per KV head, padded to 64 rows per position
    v.push_back(serving_case(FMHA_DTYPE_FP16, 64, 96, 2)
                    .q({3}).k({1300}).seqused({1001}).mask(kBottomRight));
    return seeded(v, 23000);
}

// Pages no TMA box of 16 rows fits (1-15 rows, 24, 40), which the Hopper
// kernel's `_gather` entry points copy row by row: every head dim they serve,
// prefill and decode shapes, packed heads, varlen Q, seqused_k tails inside a
// page, an empty sequence, splits, MQA, every layout, fp16 and bf16.
std::vector<ServingCase> gathered_pages_suite() {
    std::vector<ServingCase> v;
    // SGLang's pages of one row: chunked prefill of packed Q with a cached prefix
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 8, 2)
                    .varlen_q({700, 64, 0, 129}).paged(1, {2000, 70, 16, 320})
                    .seqused({1999, 64, 10, 301}).mask(kBottomRight));
    // multi-token decode (speculative): 32 positions x 4 heads per KV head packed, split
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 32, 8)
                    .q({32, 32}).paged(1, {3000, 1200}).seqused({2999, 1111}).mask(kBottomRight));
    // 8-row pages, hd64's three consumers, causal top-left, ragged
    v.push_back(serving_case(FMHA_DTYPE_FP16, 64, 4, 2)
                    .varlen_q({1000, 17, 450, 200}).paged(8, {1000, 17, 450, 200})
                    .seqused({1000, 17, 450, 199}).mask(FMHA_MASK_CAUSAL_TOP_LEFT));
    // hd96 (padded columns zero-filled) over 3-row pages, no mask, [page, head, row, dim]
    v.push_back(serving_case(FMHA_DTYPE_FP16, 96, 6, 3)
                    .q({100, 100}).paged(3, {700, 500}).seqused({700, 451}).layout(Layout::BHSD));
    // hd256's 80-key tile over 24-row pages, 2 heads per KV head, explicit splits
    v.push_back(serving_case(FMHA_DTYPE_BF16, 256, 4, 2)
                    .q({16, 16}).paged(24, {1500, 1500}).seqused({1500, 333}).mask(kBottomRight)
                    .splits(3));
    // MQA with key counts from cu_seqlens_k, varlen Q, 40-row pages, a sliced pool
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 8, 1)
                    .varlen_q({17, 200, 1}).paged(40, {1000, 2500, 129}).with_cu_seqlens_k()
                    .mask(kBottomRight).layout(Layout::SLICED));
    // a long prefill of one sequence on the persistent grid, pages of 2, MHA
    v.push_back(serving_case(FMHA_DTYPE_FP16, 128, 2, 2)
                    .q({1500}).paged(2, {1800}).extra_pages(7).mask(kBottomRight));
    // hd256 over pages of one row, decode of 4 positions, 8 heads per KV head
    v.push_back(serving_case(FMHA_DTYPE_FP16, 256, 16, 2)
                    .q({4, 4, 4}).paged(1, {900, 33, 2000}).seqused({899, 33, 1500}).mask(kBottomRight));
    // score modifiers over gathered pages (`_gather_scoremod`): a window with
    // chunked prefill, softcap and sinks with packed decode and a split, hd64's
    // three consumers under a narrow window, hd256 with all three
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 8, 2)
                    .varlen_q({700, 64, 0, 129}).paged(1, {2000, 70, 16, 320})
                    .seqused({1999, 64, 10, 301}).mask(kBottomRight).window(300));
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 32, 8)
                    .q({32, 32}).paged(3, {3000, 1200}).seqused({2999, 1111}).mask(kBottomRight)
                    .softcap(30.0f).sinks().splits(3));
    v.push_back(serving_case(FMHA_DTYPE_FP16, 64, 4, 2)
                    .varlen_q({1000, 17, 450}).paged(8, {1000, 17, 450}).seqused({1000, 17, 449})
                    .mask(FMHA_MASK_CAUSAL_TOP_LEFT).window(100).sinks());
    v.push_back(serving_case(FMHA_DTYPE_FP16, 256, 4, 2)
                    .q({16, 16}).paged(24, {1500, 1500}).seqused({1500, 333}).mask(kBottomRight)
                    .window(700).softcap(20.0f).sinks());
    // hd512 (MLA-style decode, one KV head): 64 heads x 2 positions on the
    // shared-S tile over pages of 1, split; 16 heads x 1 on the default tile
    // over pages of 3
    v.push_back(serving_case(FMHA_DTYPE_BF16, 512, 64, 1)
                    .q({2, 2, 2}).paged(1, {2000, 37, 900}).seqused({2000, 37, 850})
                    .mask(kBottomRight).splits(3));
    v.push_back(serving_case(FMHA_DTYPE_FP16, 512, 16, 1)
                    .q({1, 1}).paged(3, {700, 1500}).seqused({700, 1333}).mask(kBottomRight));
    // ... with score modifiers (`_gather_scoremod`, h41): a softcap with 16
    // heads x 4 positions on the shared-S tile over pages of 8, a window and
    // sinks with 16 heads x 1 on the default tile over pages of 1, split
    v.push_back(serving_case(FMHA_DTYPE_BF16, 512, 16, 1)
                    .q({4, 4}).paged(8, {304, 64}).seqused({300, 61}).mask(kBottomRight)
                    .softcap(20.0f));
    v.push_back(serving_case(FMHA_DTYPE_FP16, 512, 16, 1)
                    .q({1, 1, 1}).paged(1, {1500, 40, 900}).seqused({1500, 40, 777})
                    .mask(kBottomRight).window(400).sinks().splits(2));
    // a pool declared with 2^28 one-row pages of which the test allocates
    // those it uses: row offsets past 2^32 x 16 bytes, and nothing the plan
    // or the kernels do may grow with the declared pool
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 8, 2)
                    .varlen_q({300, 0, 77}).paged(1, {1100, 5, 640}).seqused({1100, 5, 600})
                    .mask(kBottomRight).declared_pages(int64_t(1) << 28));
    return seeded(v, 25000);
}

std::vector<ServingCase> paged_hopper_suite() {
    std::vector<ServingCase> v;
    // chunked prefill: packed Q against shuffled 16-row pages, seqused_k, an empty sequence
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 8, 2)
                    .varlen_q({1000, 64, 0, 300}, 2).paged(16, {3010, 70, 16, 320})
                    .seqused({3000, 64, 10, 301}).mask(kBottomRight));
    // dense prefill, 64-row pages laid out [page, head, row, dim], no mask
    v.push_back(serving_case(FMHA_DTYPE_FP16, 64, 4, 4)
                    .q({300, 300}).paged(64, {2000, 2000}).layout(Layout::BHSD));
    // decode of 32 tokens, 4 query heads per KV head packed, the wide 192-key tile
    // in 12 chunks of 16 rows, ragged seqused_k, automatic split
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 32, 8)
                    .q({32}).paged(16, {5000}).seqused({4133}).mask(kBottomRight));
    // 256-row pages under the wide tile (64-row chunks), varlen Q, 8 heads per KV head
    v.push_back(serving_case(FMHA_DTYPE_FP16, 128, 16, 2)
                    .varlen_q({4, 1, 7}).paged(256, {4600, 300, 4100}).seqused({4500, 257, 4100})
                    .mask(kBottomRight).layout(Layout::SLICED));
    // hd256's 80-key tile in 16-row chunks of 32-row pages, 2 heads per KV head
    v.push_back(serving_case(FMHA_DTYPE_BF16, 256, 4, 2)
                    .q({16, 16}).paged(32, {1500, 1500}).seqused({1500, 333}).mask(kBottomRight));
    // hd96 over 48-row pages (not a power of two: 16-row chunks), causal top-left
    v.push_back(serving_case(FMHA_DTYPE_FP16, 96, 6, 3)
                    .q({100, 100}).paged(48, {700, 700}).mask(FMHA_MASK_CAUSAL_TOP_LEFT));
    // 128-row pages with key counts from cu_seqlens_k (no seqused), varlen Q, MQA
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 8, 1)
                    .varlen_q({17, 200, 1}).paged(128, {1000, 2500, 129}).with_cu_seqlens_k()
                    .mask(kBottomRight));
    // a long prefill of one sequence: persistent grid, 32-row pages, hd64
    v.push_back(serving_case(FMHA_DTYPE_BF16, 64, 2, 1)
                    .q({1500}).paged(32, {1800}).extra_pages(7).mask(kBottomRight));
    // hd64's three consumers stop at their own rows' last key tile under a
    // causal mask; the last tile's V tail is zeroed by those that read it
    // (one of three at 1000 keys, two at 450, where the third's rows are past
    // the sequence)
    v.push_back(serving_case(FMHA_DTYPE_BF16, 64, 4, 2)
                    .varlen_q({1000, 17, 450, 200}).paged(16, {1000, 17, 450, 200})
                    .seqused({1000, 17, 450, 200}).mask(FMHA_MASK_CAUSAL_TOP_LEFT));
    // the same under bottom-right alignment with a cached prefix (chunked prefill)
    v.push_back(serving_case(FMHA_DTYPE_FP16, 64, 6, 3)
                    .varlen_q({300, 64, 1}, 3).paged(32, {1300, 100, 700}).seqused({1290, 100, 650})
                    .mask(kBottomRight));
    // 16-row chunks of the plain hd128/hd256 tiles: K staged group-major and V
    // chunk-major, one TMA box each per chunk (`_paged16`, kernel-notes h28,
    // h31), with seqused_k tails inside a chunk (zeroed V rows), an empty
    // sequence, a split, MQA, and pages laid out [page, head, row, dim] (K's
    // map folds the heads into its column pieces or, there, its 8-row
    // groups); a sliced pool (heads hd + 8 apart) keeps the plain kernel
    v.push_back(serving_case(FMHA_DTYPE_FP16, 256, 4, 2)
                    .varlen_q({700, 0, 129}).paged(16, {1500, 40, 300}).seqused({1499, 40, 131})
                    .mask(FMHA_MASK_CAUSAL_TOP_LEFT));
    v.push_back(serving_case(FMHA_DTYPE_FP16, 128, 4, 4)
                    .q({200, 200}).paged(16, {1000, 1000}).seqused({997, 203}).layout(Layout::BHSD));
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 16, 2)
                    .q({8}).paged(16, {3000}).seqused({2999}).mask(kBottomRight).splits(3));
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 8, 1)
                    .q({40, 40}).paged(16, {900, 1000}).seqused({900, 517}).mask(kBottomRight));
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 8, 2)
                    .q({64}).paged(16, {700}).seqused({650}).mask(kBottomRight)
                    .layout(Layout::SLICED));
    return seeded(v, 24000);
}

std::vector<ServingCase> hopper_feature_suite() {
    // Causal local windows of 256 keys and of 700 (with softcap and sinks), besides
    // the narrow two-sided and one-sided windows every feature list has.
    auto make = [](fmha_dtype dt, int variant, int n) -> ServingCase {
        switch (variant) {
        case 0:  // dense prefill over 4100 keys (hd128's wide tile)
            return serving_case(dt, 128, 4, 2).q({600}).k({4100});
        case 1:  // varlen Q over 64-row pages + seqused_k (a sequence without keys)
            return serving_case(dt, 64, 8, 1)
                .varlen_q({300, 17, 5}, 1).paged(64, {1500, 64, 64}).seqused({1500, 0, 40});
        default:  // 32 positions, 4 heads per KV head packed, seqused_k, 3 splits
            return serving_case(dt, n % 2 ? 256 : 96, 8, 2)
                .q({32, 32}).k({2000, 2000}).seqused({2000, 613}).splits(3);
        }
    };
    return seeded(feature_cases(serving_features(256, 700), 3, make), 25000);
}

std::vector<ServingCase> hd512_hopper_suite() {
    std::vector<ServingCase> v;
    // MLA-style decode: 128 query heads on one KV head, two 64-row blocks per position
    v.push_back(serving_case(FMHA_DTYPE_BF16, 512, 128, 1)
                    .q({1, 1}).k({4097, 4097}).seqused({4097, 1000}).mask(kBottomRight));
    // 96 heads padded to 128 rows per position (the padding heads clipped), 3 positions
    v.push_back(serving_case(FMHA_DTYPE_FP16, 512, 96, 1)
                    .q({3}).k({1500}).mask(kBottomRight).layout(Layout::BHSD));
    // packed (varlen) Q, an empty sequence, 128 heads, 3 splits
    v.push_back(serving_case(FMHA_DTYPE_BF16, 512, 128, 1)
                    .varlen_q({2, 0, 1}, 2).k({700, 700, 700}).seqused({700, 5, 333})
                    .mask(kBottomRight).splits(3));
    // 16 heads x 1 position (under 64 rows: each consumer computes the whole S),
    // pages of 32 (one TMA box per key tile; pages of 16 are gathered, h40)
    v.push_back(serving_case(FMHA_DTYPE_FP16, 512, 16, 1)
                    .q({1, 1, 1}).paged(32, {3000, 700, 33}).seqused({3000, 1, 33})
                    .mask(kBottomRight));
    // 16 heads x 4 positions over shuffled 64-row pages, seqused_k
    v.push_back(serving_case(FMHA_DTYPE_BF16, 512, 16, 1)
                    .q({4, 4}).paged(64, {2100, 2100}).seqused({2100, 90})
                    .mask(kBottomRight).layout(Layout::SLICED));
    // window + softcap + sinks over 16-row pages (gathered), 8 heads x 32 positions
    v.push_back(serving_case(FMHA_DTYPE_FP16, 512, 8, 1)
                    .q({32}).paged(16, {1200})
                    .mask(kBottomRight).window(300).softcap(30.0f).sinks());
    // 3 heads per KV head (padded to 4), packed Q, packed K, 2 splits
    v.push_back(serving_case(FMHA_DTYPE_BF16, 512, 6, 2)
                    .varlen_q({17, 5}).packed_k({400, 33}).mask(kBottomRight).splits(2));
    // prefill, MHA (no packing: 64-row blocks of one head), causal top-left
    v.push_back(serving_case(FMHA_DTYPE_FP16, 512, 2, 2)
                    .q({300, 300}).k({300, 300}).mask(FMHA_MASK_CAUSAL_TOP_LEFT));
    // prefill, GQA, no mask, keys not a multiple of the 32-key tile
    v.push_back(serving_case(FMHA_DTYPE_BF16, 512, 4, 1).q({257}).k({1001}));
    return seeded(v, 26000);
}

std::vector<int32_t> split_counts() { return {1, 2, 3, 7, 16, 128, 0}; }  // 128: the most a plan takes

std::vector<ServingCase> split_suite() {
    std::vector<ServingCase> v;
    // long single-token decode, GQA, ragged lengths through seqused_k
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 32, 8)
                    .q({1, 1}).k({4097, 4097}).seqused({4097, 1500}).mask(kBottomRight));
    // multi-token decode over a paged cache, varlen Q with an empty sequence
    v.push_back(serving_case(FMHA_DTYPE_FP16, 64, 8, 1)
                    .varlen_q({4, 1, 0, 4}, 2).paged(16, {2007, 340, 60, 1234})
                    .seqused({2000, 333, 50, 1234}).mask(kBottomRight).layout(Layout::BHSD));
    // paged hd64 over 64 (sequence, KV head) tiles: 7 splits (448 CTAs) fit one
    // wave of the 64-key paged tile but not of the 128-key one on sm_90, so the
    // decode runs cover both paged hd64 entry points (launch_decode.cpp)
    v.push_back(serving_case(FMHA_DTYPE_BF16, 64, 32, 8)
                    .q(repeated(8, 1)).paged(16, repeated(8, 1000)).mask(kBottomRight));
    // head_dim 512, MLA-style
    v.push_back(serving_case(FMHA_DTYPE_BF16, 512, 16, 1)
                    .q({1, 1}).k({2000, 2000}).mask(kBottomRight));
    // window, softcap and sinks, paged, 32 rows
    v.push_back(serving_case(FMHA_DTYPE_FP16, 256, 8, 2)
                    .q({32, 32}).paged(64, {1100, 1100}).seqused({1100, 700})
                    .mask(kBottomRight).window(200).softcap(30.0f).sinks().layout(Layout::SLICED));
    // few keys: more splits than key blocks; a sequence with no key at all
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 4, 4)
                    .varlen_q({1, 1, 3}).packed_k({70, 0, 5}).mask(kBottomRight));
    // packed keys, top-left alignment with a right window, hd96
    v.push_back(serving_case(FMHA_DTYPE_FP16, 96, 6, 3)
                    .varlen_q({16, 9}).packed_k({900, 1500})
                    .mask(FMHA_MASK_CAUSAL_TOP_LEFT).window(-1, 0));
    // the Hopper kernel's `_paged16` entry points under every split count:
    // hd128's wide tile over a [page, head, row, dim] pool (K's heads folded
    // into its 8-row groups) and hd256's tile over a [page, row, head, dim] one
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 32, 8)
                    .q({32, 32}).paged(16, {5000, 4200}).seqused({4999, 4100})
                    .mask(kBottomRight).layout(Layout::BHSD));
    v.push_back(serving_case(FMHA_DTYPE_FP16, 256, 16, 4)
                    .q({8, 8}).paged(16, {1500, 1500}).seqused({1500, 901}).mask(kBottomRight));
    // hd64 KV heads read in pairs (the decode kernel's `_paired` entry points on
    // sm_90): adjacent heads, 8 query rows per pair, with a window, softcap and sinks
    v.push_back(serving_case(FMHA_DTYPE_BF16, 64, 32, 8)
                    .q({1, 1, 1}).k({3000, 3000, 3000}).seqused({3000, 1777, 2})
                    .mask(kBottomRight).window(1000).softcap(30.0f).sinks());
    // ... and over packed queries (up to 2 per sequence, 16 rows per pair, one
    // sequence without queries) and packed keys
    v.push_back(serving_case(FMHA_DTYPE_FP16, 64, 16, 4)
                    .varlen_q({2, 1, 0, 2}, 3).packed_k({1500, 300, 40, 900}).mask(kBottomRight));
    // dense hd128 on the decode kernel's narrow tile (sm_90, grids of 192-528
    // CTAs: here 16 splits x 4 KV heads x 3 sequences), fp16, window, softcap, sinks
    v.push_back(serving_case(FMHA_DTYPE_FP16, 128, 16, 4)
                    .q({1, 1, 1}).k({3000, 3000, 3000}).seqused({3000, 1777, 40})
                    .mask(kBottomRight).window(1000).softcap(25.0f).sinks());
    // dense hd96 on the decode kernel's shallow tile (sm_90, grids of 265-396
    // CTAs: here 16 splits x 8 KV heads x 3 sequences), bf16, softcap
    v.push_back(serving_case(FMHA_DTYPE_BF16, 96, 16, 8)
                    .q({1, 1, 1}).k({3000, 3000, 3000}).seqused({3000, 1500, 7})
                    .mask(kBottomRight).softcap(30.0f));
    // hd96 KV heads read in pairs (sm_90): unsplit, 8 pairs x 24 sequences = 192
    // CTAs on the paired shallow tile (2 stages of 192-column rows); split, on
    // the unpaired tiles; fp16, sinks, ragged lengths
    {
        std::vector<int32_t> used(24);
        for (int i = 0; i < 24; ++i) used[i] = 1 + (i * 97) % 600;
        v.push_back(serving_case(FMHA_DTYPE_FP16, 96, 32, 16)
                        .q(std::vector<int32_t>(24, 1)).k(std::vector<int32_t>(24, 600))
                        .seqused(used).mask(kBottomRight).sinks());
    }
    // the two splits of a keys-on-M hd128 row block as one cluster of two CTAs
    // (sm_90: `_r8_cluster_lone`, 2 stages of 128 keys, for these grids of at
    // most one CTA per SM) on short rows: no key, or less than one tile (the
    // second CTA has none, the first zeroes the rows of its early tile past
    // the length), 2 to 4 tiles, so a CTA's half (1 or 2) is at most its
    // pipeline's depth, next to a long row; bf16, softcap, sinks.
    // Then a left window that starts the keys mid-cache, fp16
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 8, 2)
                    .q(std::vector<int32_t>(9, 1)).k(std::vector<int32_t>(9, 3000))
                    .seqused({0, 1, 100, 129, 256, 300, 383, 420, 3000})
                    .mask(kBottomRight).softcap(20.0f).sinks());
    v.push_back(serving_case(FMHA_DTYPE_FP16, 128, 8, 2)
                    .q({1, 1}).k({3000, 3000}).seqused({3000, 2222})
                    .mask(kBottomRight).window(900));
    // ... and on the usual 64-key tile (`_r8_cluster`), whose 2 CTAs per SM
    // keep a 2-split grid of 160 CTAs (80 row blocks) in one wave on 132 SMs;
    // fp16, softcap, ragged lengths down to one key
    v.push_back(serving_case(FMHA_DTYPE_FP16, 128, 32, 8)
                    .q(std::vector<int32_t>(10, 1)).k(std::vector<int32_t>(10, 700))
                    .seqused({700, 1, 64, 65, 129, 300, 500, 640, 699, 700})
                    .mask(kBottomRight).softcap(30.0f));
    return seeded(v, 23000);
}

std::vector<ServingCase> feature_suite() {
    auto make = [](fmha_dtype dt, int variant, int n) -> ServingCase {
        switch (variant) {
        case 0:  // single-token decode, dense cache, automatic splits
            return serving_case(dt, 128, 8, 2).q({1, 1, 1}).k(repeated(3, 1100)).splits(0);
        case 1:  // 16 rows, varlen Q, paged + seqused (one sequence without keys)
            return serving_case(dt, 64, 8, 1)
                .varlen_q({16, 3, 16}, 1).paged(32, {910, 32, 40}).seqused({900, 0, 20})
                .splits(0);
        default:  // 4 rows, dense + seqused, 3 splits (hd512 every other feature)
            return serving_case(dt, n % 2 ? 512 : 256, 8, n % 2 ? 1 : 4)
                .q({4, 4}).k({1000, 1000}).seqused({1000, 513}).splits(3);
        }
    };
    return seeded(feature_cases(serving_features(100, 64), 3, make), 24000);
}

std::vector<ServingCase> sanitize_suite() {
    std::vector<ServingCase> v;
    // hd64 KV heads read in pairs (decode `_paired`, sm_90): MHA, 2 splits
    v.push_back(serving_case(FMHA_DTYPE_FP16, 64, 4, 4)
                    .q({1, 1}).k({700, 700}).seqused({700, 41}).mask(kBottomRight).splits(2));
    // head_dim 512, 96 query heads on one KV head (split D, 128-row groups), 2 splits
    v.push_back(serving_case(FMHA_DTYPE_BF16, 512, 96, 1)
                    .q({1, 1}).k({150, 150}).seqused({150, 40}).mask(kBottomRight).splits(2));
    // varlen Q over packed K, causal, GQA, an empty sequence and one without keys
    v.push_back(serving_case(FMHA_DTYPE_BF16, 64, 4, 2)
                    .varlen_q({17, 0, 70, 3}, 2).packed_k({17, 5, 130, 0}).mask(kBottomRight));
    // paged (page 16, shuffled) + seqused + 3 splits + window + sinks
    v.push_back(serving_case(FMHA_DTYPE_FP16, 128, 8, 1)
                    .varlen_q({4, 1}).paged(16, {310, 40}).seqused({300, 33})
                    .mask(kBottomRight).window(100).sinks().splits(3));
    // head_dim 512, MQA, 2 splits, softcap
    v.push_back(serving_case(FMHA_DTYPE_BF16, 512, 8, 1)
                    .q({2, 2}).k({200, 200}).seqused({200, 77})
                    .mask(kBottomRight).softcap(20.0f).splits(2));
    // page size 1
    v.push_back(serving_case(FMHA_DTYPE_FP16, 64, 2, 2).q({1, 1}).paged(1, {100, 100}));
    // one token, 4 query heads per KV head, 2 splits: on sm_90 the decode
    // kernel's keys-on-M CTAs run as clusters of two that merge in shared
    // memory (`_r8_cluster`), with sinks in the merge
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 8, 2)
                    .q({1, 1}).k({900, 900}).seqused({900, 40}).mask(kBottomRight).sinks().splits(2));
    // short GQA queries (Hopper: 4 query heads per tile), seqused_k, 2 splits
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 8, 2)
                    .q({20, 20}).k({300, 300}).seqused({300, 61}).mask(kBottomRight).splits(2));
    // Hopper: a window, softcap and sinks over a paged cache, varlen Q, packed heads
    v.push_back(serving_case(FMHA_DTYPE_BF16, 64, 8, 2)
                    .varlen_q({40, 3}).paged(32, {512, 32}).seqused({500, 3})
                    .mask(kBottomRight).window(150).softcap(15.0f).sinks());
    // Hopper: a paged cache read in TMA page chunks (16 rows), varlen Q, packed heads
    v.push_back(serving_case(FMHA_DTYPE_FP16, 128, 8, 2)
                    .varlen_q({24, 0, 5}).paged(16, {410, 20, 48}).seqused({400, 20, 37})
                    .mask(kBottomRight));
    // Hopper: pages of 3 rows gathered by cp.async (`_gather`), the same shapes,
    // and hd64's three consumers over pages of 1
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 8, 2)
                    .varlen_q({24, 0, 5}).paged(3, {410, 20, 48}).seqused({400, 20, 37})
                    .mask(kBottomRight));
    v.push_back(serving_case(FMHA_DTYPE_FP16, 64, 4, 2)
                    .q({40, 40}).paged(1, {300, 300}).seqused({300, 121}).mask(kBottomRight));
    // ... with a window, softcap and sinks (`_gather_scoremod`)
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 8, 2)
                    .q({24, 24}).paged(2, {410, 200}).seqused({400, 197}).mask(kBottomRight)
                    .window(150).softcap(15.0f).sinks());
    // ... and hd512's shared-S tile over pages of 1
    v.push_back(serving_case(FMHA_DTYPE_BF16, 512, 64, 1)
                    .q({1, 1}).paged(1, {300, 77}).seqused({300, 70}).mask(kBottomRight));
    // ... and its default tile over pages of 16 (gathered at hd512, h40) with a
    // window, softcap and sinks
    v.push_back(serving_case(FMHA_DTYPE_FP16, 512, 16, 1)
                    .q({1, 1}).paged(16, {300, 77}).seqused({300, 70}).mask(kBottomRight)
                    .window(100).softcap(20.0f).sinks());
    // decode kernel on the narrow hd128 tile (sm_90: 8 splits x 8 KV heads x 3
    // sequences = 192 CTAs), seqused, window and sinks
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 16, 8)
                    .q({1, 1, 1}).k({400, 400, 400}).seqused({400, 250, 33})
                    .mask(kBottomRight).window(300).sinks().splits(8));
    // ... on the shallow hd96 tile (16 splits x 8 KV heads x 3 = 384 CTAs), softcap
    v.push_back(serving_case(FMHA_DTYPE_FP16, 96, 16, 8)
                    .q({1, 1, 1}).k({1100, 1100, 1100}).seqused({1100, 251, 18})
                    .mask(kBottomRight).softcap(20.0f).splits(16));
    // ... hd96 KV heads in pairs on the paired shallow tile (8 pairs x 24 = 192 CTAs)
    // and on the paired 3-stage one (8 pairs x 2 splits x 3 = 48), bf16, sinks
    {
        std::vector<int32_t> used(24);
        for (int i = 0; i < 24; ++i) used[i] = 1 + (i * 53) % 300;
        v.push_back(serving_case(FMHA_DTYPE_BF16, 96, 32, 16)
                        .q(std::vector<int32_t>(24, 1)).k(std::vector<int32_t>(24, 300))
                        .seqused(used).mask(kBottomRight).sinks().splits(1));
    }
    v.push_back(serving_case(FMHA_DTYPE_BF16, 96, 32, 16)
                    .q({1, 1, 1}).k({700, 700, 700}).seqused({700, 333, 5})
                    .mask(kBottomRight).softcap(20.0f).splits(2));
    // keys on M (at most 8 query rows per KV head, sm_90) over pages of 16:
    // paged hd128, GQA 4 with 2 positions, 2 splits, a window and softcap
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 8, 2)
                    .q({2, 2}).paged(16, {500, 200}).seqused({500, 131})
                    .mask(kBottomRight).window(300).softcap(20.0f).splits(2));
    return seeded(v, 26000);
}

// ---- merge references ------------------------------------------------------

namespace {

template <typename T>
RefResult merge_reference(const MergeInput &in, bool lowp) {
    const int64_t rows = in.batch * in.num_heads * in.seqlen_q, D = in.head_dim;
    const size_t P = in.o.size();
    if (in.lse.size() != P) throw std::invalid_argument("MergeInput: o and lse differ in parts");
    RefResult r;
    r.o.assign(size_t(rows * D), 0.0);
    r.lse.assign(size_t(rows), 0.0);
    const T ninf = -std::numeric_limits<T>::infinity();
    std::vector<T> acc(static_cast<size_t>(D));
    for (int64_t row = 0; row < rows; ++row) {
        T m = ninf;
        for (size_t p = 0; p < P; ++p) m = std::max(m, T(in.lse[p][size_t(row)]));
        if (m == ninf) {  // no part saw a key: O = 0, LSE = -inf
            r.lse[size_t(row)] = -std::numeric_limits<double>::infinity();
            continue;
        }
        T sum = 0;
        std::fill(acc.begin(), acc.end(), T(0));
        for (size_t p = 0; p < P; ++p) {
            const T lp = T(in.lse[p][size_t(row)]);
            if (lp == ninf) continue;
            const T w = std::exp(lp - m);
            sum += w;
            const double *op = &in.o[p][size_t(row * D)];
            for (int64_t d = 0; d < D; ++d) acc[size_t(d)] += w * T(op[d]);
        }
        for (int64_t d = 0; d < D; ++d) {
            const T x = acc[size_t(d)] / sum;
            r.o[size_t(row * D + d)] = lowp ? double(round_to_lowp(float(x), in.dtype)) : double(x);
        }
        r.lse[size_t(row)] = double(m + std::log(sum));
    }
    return r;
}

}  // namespace

RefResult merge_reference_fp64(const MergeInput &in) { return merge_reference<double>(in, false); }
RefResult merge_reference_lowp(const MergeInput &in) { return merge_reference<float>(in, true); }

}  // namespace fmha_test
