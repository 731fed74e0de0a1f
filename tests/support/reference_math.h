// The arithmetic of the CPU references (private to tests/support): the dense
// references (reference.cpp) and the serving ones (serving.cpp) compute each
// query row with these same functions, so that their results agree bitwise.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "fmha_test/half.h"
#include "fmha_test/reference.h"

namespace fmha_test {

// Four independent partial sums (head dims are multiples of 8), so the loop
// is not bound by the latency of one long add chain.
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

// Both functions: query row q (D values) over keys first..last (first <= last)
// of K and V (rows of D values), with the head's sink logit when has_sink.
// They write the row's O to o[0, D) and return its LSE; s (indexed by key)
// and acc (D values) are scratch.

// float64, the truth.
inline double attend_row_fp64(const RefProblem &p, const double *q, const double *K,
                              const double *V, int64_t D, int64_t first, int64_t last,
                              bool has_sink, double sink, double *s, double *acc, double *o) {
    double m = has_sink ? sink : -std::numeric_limits<double>::infinity();
    for (int64_t j = first; j <= last; ++j) {
        s[j] = p.score(dot(q, K + j * D, D));
        m = std::max(m, s[j]);
    }
    std::fill(acc, acc + D, 0.0);
    double l = has_sink ? std::exp(sink - m) : 0.0;
    for (int64_t j = first; j <= last; ++j) {
        const double pj = std::exp(s[j] - m);
        l += pj;
        const double *vj = V + j * D;
        for (int64_t d = 0; d < D; ++d) acc[d] += pj * vj[d];
    }
    for (int64_t d = 0; d < D; ++d) o[d] = acc[d] / l;
    return m + std::log(l);
}

// float32 with `scale` the float softmax scale: P = exp(S - max) summed
// unrounded for the denominator, rounded to the dtype for P.V (as a kernel
// feeding tensor cores does), and O rounded to the dtype.
inline double attend_row_lowp(const RefProblem &p, const float *q, const float *K,
                              const float *V, int64_t D, int64_t first, int64_t last,
                              bool has_sink, float sink, float scale, float *s, float *acc,
                              double *o) {
    float m = has_sink ? sink : -std::numeric_limits<float>::infinity();
    for (int64_t j = first; j <= last; ++j) {
        float sj = dot(q, K + j * D, D) * scale;
        if (p.softcap > 0) sj = float(p.softcap) * std::tanh(sj / float(p.softcap));
        s[j] = sj;
        m = std::max(m, sj);
    }
    float l = has_sink ? std::exp(sink - m) : 0.0f;
    std::fill(acc, acc + D, 0.0f);
    for (int64_t j = first; j <= last; ++j) {
        const float pj = std::exp(s[j] - m);
        l += pj;
        const float pr = round_to_lowp(pj, p.dtype);
        const float *vj = V + j * D;
        for (int64_t d = 0; d < D; ++d) acc[d] += pr * vj[d];
    }
    for (int64_t d = 0; d < D; ++d) o[d] = round_to_lowp(acc[d] / l, p.dtype);
    return double(m + std::log(l));
}

}  // namespace fmha_test
