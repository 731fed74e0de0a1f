#include "fmha_test/reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include "reference_math.h"
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

RefResult allocate(const RefProblem &p) {
    RefResult r;
    r.o.assign(size_t(p.batch * p.num_q_heads * p.seqlen_q * p.head_dim), 0.0);
    r.lse.assign(size_t(p.batch * p.num_q_heads * p.seqlen_q), 0.0);
    return r;
}

// The loop both references share: every (batch, head) and query row, the
// rows that see no key answered here, the others by attend(Q row, K, V,
// first, last, has_sink, sink, scores, acc, O row), which returns the LSE.
template <typename T, typename Attend>
RefResult reference(const RefProblem &p, const uint16_t *q, const uint16_t *k,
                    const uint16_t *v, int threads, Attend attend) {
    RefResult r = allocate(p);
    const int64_t D = p.head_dim, Sq = p.seqlen_q, Sk = p.seqlen_k;
    const int64_t group = p.num_q_heads / p.num_kv_heads;
    for_each_head(p, threads, [&](int64_t b, int64_t h) {
        const int64_t hk = h / group;
        std::vector<T> Q = gather<T>(q, p.q, b, h, Sq, D, p.dtype);
        std::vector<T> K = gather<T>(k, p.k, b, hk, Sk, D, p.dtype);
        std::vector<T> V = gather<T>(v, p.v, b, hk, Sk, D, p.dtype);
        std::vector<T> s(static_cast<size_t>(Sk)), acc(static_cast<size_t>(D));
        for (int64_t i = 0; i < Sq; ++i) {
            double *o = &r.o[size_t(((b * p.num_q_heads + h) * Sq + i) * D)];
            double &lse = r.lse[size_t((b * p.num_q_heads + h) * Sq + i)];
            const int64_t first = p.first_visible_key(i), last = p.last_visible_key(i);
            const bool has_sink = !p.sinks.empty();
            const T sink = has_sink ? T(p.sinks[size_t(h)]) : T(0);
            if (last < first) {  // sees no key: O = 0 (already), LSE = -inf or the sink
                lse = has_sink ? double(sink) : -std::numeric_limits<double>::infinity();
                continue;
            }
            lse = attend(&Q[size_t(i * D)], K.data(), V.data(), first, last, has_sink, sink,
                         s.data(), acc.data(), o);
        }
    });
    return r;
}

}  // namespace

RefResult reference_fp64(const RefProblem &p, const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, int threads) {
    return reference<double>(p, q, k, v, threads,
                             [&](const double *qi, const double *K, const double *V, int64_t first,
                                 int64_t last, bool has_sink, double sink, double *s, double *acc,
                                 double *o) {
                                 return attend_row_fp64(p, qi, K, V, p.head_dim, first, last,
                                                        has_sink, sink, s, acc, o);
                             });
}

RefResult reference_lowp(const RefProblem &p, const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, int threads) {
    const float scale = float(p.scale());
    return reference<float>(p, q, k, v, threads,
                            [&](const float *qi, const float *K, const float *V, int64_t first,
                                int64_t last, bool has_sink, float sink, float *s, float *acc,
                                double *o) {
                                return attend_row_lowp(p, qi, K, V, p.head_dim, first, last,
                                                       has_sink, sink, scale, s, acc, o);
                            });
}

}  // namespace fmha_test
