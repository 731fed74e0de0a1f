#include "fmha_test/reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include "fmha_test/half.h"

namespace fmha_test {

double RefProblem::scale() const {
    return softmax_scale != 0 ? softmax_scale : 1.0 / std::sqrt(double(head_dim));
}

// The diagonal of row i: i under top-left alignment, else bottom-right.
static int64_t diagonal(const RefProblem &p, int64_t i) {
    return p.mask == FMHA_MASK_CAUSAL_TOP_LEFT ? i : i + p.seqlen_k - p.seqlen_q;
}

int64_t RefProblem::last_visible_key(int64_t i) const {
    int64_t last = seqlen_k - 1;
    if (mask != FMHA_MASK_NONE) last = std::min(last, diagonal(*this, i));
    else if (window_right >= 0) last = std::min(last, diagonal(*this, i) + window_right);
    return last;
}

int64_t RefProblem::first_visible_key(int64_t i) const {
    return window_left >= 0 ? std::max<int64_t>(0, diagonal(*this, i) - window_left) : 0;
}

double RefProblem::score(double dot) const {
    const double s = dot * scale();
    return softcap > 0 ? softcap * std::tanh(s / softcap) : s;
}

namespace {

// Runs fn(b, h) for every (batch, q head) on a pool of threads.
template <typename Fn>
void for_each_head(const RefProblem &p, int threads, Fn fn) {
    const int64_t jobs = p.batch * p.num_q_heads;
    if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
    threads = int(std::min<int64_t>(threads, jobs));
    std::atomic<int64_t> next{0};
    auto worker = [&] {
        for (int64_t j; (j = next.fetch_add(1)) < jobs;) fn(j / p.num_q_heads, j % p.num_q_heads);
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (auto &t : pool) t.join();
}

// Gathers the [rows, D] matrix of one head of a strided tensor as T.
template <typename T>
std::vector<T> gather(const uint16_t *base, const fmha_strides &s, int64_t b, int64_t h,
                      int64_t rows, int64_t dim, fmha_dtype dtype) {
    std::vector<T> out(size_t(rows * dim));
    for (int64_t r = 0; r < rows; ++r) {
        const uint16_t *row = base + b * s.batch + r * s.seq + h * s.head;
        for (int64_t d = 0; d < dim; ++d)
            out[size_t(r * dim + d)] = T(lowp_to_float(row[d * s.dim], dtype));
    }
    return out;
}

// Dot product with four independent partial sums (head dims are multiples
// of 8), so the loop is not bound by the latency of one long add chain.
template <typename T>
T dot(const T *a, const T *b, int64_t n) {
    T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t d = 0;
    for (; d + 4 <= n; d += 4) {
        s0 += a[d] * b[d];
        s1 += a[d + 1] * b[d + 1];
        s2 += a[d + 2] * b[d + 2];
        s3 += a[d + 3] * b[d + 3];
    }
    for (; d < n; ++d) s0 += a[d] * b[d];
    return (s0 + s1) + (s2 + s3);
}

RefResult allocate(const RefProblem &p) {
    RefResult r;
    r.o.assign(size_t(p.batch * p.num_q_heads * p.seqlen_q * p.head_dim), 0.0);
    r.lse.assign(size_t(p.batch * p.num_q_heads * p.seqlen_q), 0.0);
    return r;
}

}  // namespace

RefResult reference_fp64(const RefProblem &p, const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, int threads) {
    RefResult r = allocate(p);
    const int64_t D = p.head_dim, Sq = p.seqlen_q, Sk = p.seqlen_k;
    const int64_t group = p.num_q_heads / p.num_kv_heads;
    for_each_head(p, threads, [&](int64_t b, int64_t h) {
        const int64_t hk = h / group;
        std::vector<double> Q = gather<double>(q, p.q, b, h, Sq, D, p.dtype);
        std::vector<double> K = gather<double>(k, p.k, b, hk, Sk, D, p.dtype);
        std::vector<double> V = gather<double>(v, p.v, b, hk, Sk, D, p.dtype);
        std::vector<double> s(static_cast<size_t>(Sk)), acc(static_cast<size_t>(D));
        for (int64_t i = 0; i < Sq; ++i) {
            double *o = &r.o[size_t(((b * p.num_q_heads + h) * Sq + i) * D)];
            double &lse = r.lse[size_t((b * p.num_q_heads + h) * Sq + i)];
            const int64_t first = p.first_visible_key(i), last = p.last_visible_key(i);
            const bool has_sink = !p.sinks.empty();
            const double sink = has_sink ? p.sinks[size_t(h)] : 0.0;
            if (last < first) {  // sees no key: O = 0 (already), LSE = -inf or the sink
                lse = has_sink ? sink : -std::numeric_limits<double>::infinity();
                continue;
            }
            double m = has_sink ? sink : -std::numeric_limits<double>::infinity();
            const double *qi = &Q[size_t(i * D)];
            for (int64_t j = first; j <= last; ++j) {
                s[size_t(j)] = p.score(dot(qi, &K[size_t(j * D)], D));
                m = std::max(m, s[size_t(j)]);
            }
            std::fill(acc.begin(), acc.end(), 0.0);
            double l = has_sink ? std::exp(sink - m) : 0.0;
            for (int64_t j = first; j <= last; ++j) {
                const double pj = std::exp(s[size_t(j)] - m);
                l += pj;
                const double *vj = &V[size_t(j * D)];
                for (int64_t d = 0; d < D; ++d) acc[size_t(d)] += pj * vj[d];
            }
            for (int64_t d = 0; d < D; ++d) o[d] = acc[size_t(d)] / l;
            lse = m + std::log(l);
        }
    });
    return r;
}

RefResult reference_lowp(const RefProblem &p, const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, int threads) {
    RefResult r = allocate(p);
    const int64_t D = p.head_dim, Sq = p.seqlen_q, Sk = p.seqlen_k;
    const int64_t group = p.num_q_heads / p.num_kv_heads;
    const float scale = float(p.scale());
    for_each_head(p, threads, [&](int64_t b, int64_t h) {
        const int64_t hk = h / group;
        std::vector<float> Q = gather<float>(q, p.q, b, h, Sq, D, p.dtype);
        std::vector<float> K = gather<float>(k, p.k, b, hk, Sk, D, p.dtype);
        std::vector<float> V = gather<float>(v, p.v, b, hk, Sk, D, p.dtype);
        std::vector<float> s(static_cast<size_t>(Sk)), acc(static_cast<size_t>(D));
        for (int64_t i = 0; i < Sq; ++i) {
            double *o = &r.o[size_t(((b * p.num_q_heads + h) * Sq + i) * D)];
            double &lse = r.lse[size_t((b * p.num_q_heads + h) * Sq + i)];
            const int64_t first = p.first_visible_key(i), last = p.last_visible_key(i);
            const bool has_sink = !p.sinks.empty();
            const float sink = has_sink ? float(p.sinks[size_t(h)]) : 0.0f;
            if (last < first) {
                lse = has_sink ? double(sink) : -std::numeric_limits<double>::infinity();
                continue;
            }
            float m = has_sink ? sink : -std::numeric_limits<float>::infinity();
            const float *qi = &Q[size_t(i * D)];
            for (int64_t j = first; j <= last; ++j) {
                float sj = dot(qi, &K[size_t(j * D)], D) * scale;
                if (p.softcap > 0) sj = float(p.softcap) * std::tanh(sj / float(p.softcap));
                s[size_t(j)] = sj;
                m = std::max(m, sj);
            }
            // P = exp(s - max) in float, summed unrounded for the denominator,
            // rounded to the dtype for P.V (as a kernel feeding tensor cores does).
            float l = has_sink ? std::exp(sink - m) : 0.0f;
            std::fill(acc.begin(), acc.end(), 0.0f);
            for (int64_t j = first; j <= last; ++j) {
                const float pj = std::exp(s[size_t(j)] - m);
                l += pj;
                const float pr = round_to_lowp(pj, p.dtype);
                const float *vj = &V[size_t(j * D)];
                for (int64_t d = 0; d < D; ++d) acc[size_t(d)] += pr * vj[d];
            }
            for (int64_t d = 0; d < D; ++d) o[d] = round_to_lowp(acc[size_t(d)] / l, p.dtype);
            lse = double(m + std::log(l));
        }
    });
    return r;
}

}  // namespace fmha_test
