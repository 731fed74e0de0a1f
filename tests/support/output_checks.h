// Checks shared by the dense and the serving runners (private to
// tests/support): how a defect is recorded, how one O element and one LSE
// entry are judged, and the verdicts once all are.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>

#include "fmha_test/half.h"
#include "fmha_test/runner.h"

namespace fmha_test {

// "(n0=v0, n1=v1, n2=v2, d=d)" naming an element in a detail line; d < 0
// leaves the d out (an LSE entry).
inline std::string element_name(const char *n0, int64_t v0, const char *n1, int64_t v1,
                                const char *n2, int64_t v2, int64_t d) {
    std::string s = std::string("(") + n0 + "=" + std::to_string(v0) + ", " + n1 + "=" +
                    std::to_string(v1) + ", " + n2 + "=" + std::to_string(v2);
    if (d >= 0) s += ", d=" + std::to_string(d);
    return s + ")";
}

// The first defect found names the comparison's detail line.
inline void note(std::string &detail, const std::string &what) {
    if (detail.empty()) detail = what;
}

// The magnitude class (Comparison::class_err) of a row of `n` float64
// reference values: floor(log2(max |ref|)) + kClassBias, clamped to the
// classes; -1 for a row of zeros (one that sees no key).
inline int magnitude_class(const double *ref, int64_t n) {
    double mag = 0;
    for (int64_t i = 0; i < n; ++i) mag = std::max(mag, std::fabs(ref[i]));
    if (!(mag > 0)) return -1;
    const int k = std::ilogb(mag) + Comparison::kClassBias;
    return std::min(std::max(k, 0), Comparison::kClasses - 1);
}

// One O element (16-bit `bits` of dtype `dt`) against its float64 reference
// `ref` (`ref_lowp`: the same-precision reference's value, which counts
// toward cmp.lowp_err and its row's class, `row_class` from
// magnitude_class). NaN means never written (the prefill) or a NaN
// result; in a row that sees no key (`sees_no_key`, worded by `no_key_row`)
// the element must be +-0. Returns the element's error against `ref`, or -1
// when it is NaN. `where()` names the element and is called only for a
// defect or a new worst error of its class.
template <typename Where>
double check_o_element(Comparison &cmp, uint16_t bits, fmha_dtype dt, double ref,
                       double ref_lowp, int row_class, bool sees_no_key, const char *no_key_row,
                       Where where) {
    const double lowp_err = std::fabs(ref_lowp - ref);
    cmp.lowp_err = std::max(cmp.lowp_err, lowp_err);
    if (row_class >= 0)
        cmp.class_lowp[row_class] = std::max(cmp.class_lowp[row_class], lowp_err);
    if (is_nan_lowp(bits, dt)) {
        if (cmp.all_written)
            note(cmp.detail,
                 (bits == kOutputPrefill16 ? "O never written at " : "O is NaN at ") + where());
        cmp.all_written = false;
        return -1;
    }
    if (sees_no_key && (bits & 0x7FFFu) != 0) {
        if (cmp.masked_rows_ok)
            note(cmp.detail, std::string("O of ") + no_key_row + " is not 0 at " + where());
        cmp.masked_rows_ok = false;
    }
    const double err = std::fabs(double(lowp_to_float(bits, dt)) - ref);
    if (row_class >= 0 && err > cmp.class_err[row_class]) {
        cmp.class_err[row_class] = err;
        cmp.class_worst[row_class] = where();
    }
    return err;
}

// One LSE entry against its float64 reference `ref` (`ref_lowp`: the
// same-precision reference's value, for the error bound). NaN means never
// written, which counts as an infinite error (so the LSE verdict fails
// whatever order the O and LSE verdicts are taken in); a row that sees no
// key must give -inf; otherwise the error
// counts toward cmp.lse_err, and an entry beyond kLseRelTol (1 + |ref|) clears
// *within_tol. `where()` names the entry and is called only for a defect;
// `no_key_row` words that kind of row in the message.
template <typename Where>
void check_lse_entry(Comparison &cmp, float got, double ref, double ref_lowp,
                     const char *no_key_row, Where where, bool *within_tol) {
    if (std::isnan(got)) {
        if (cmp.all_written) note(cmp.detail, "LSE not written at " + where());
        cmp.all_written = false;
        cmp.lse_err = HUGE_VAL;
        *within_tol = false;
        return;
    }
    if (std::isinf(ref)) {
        if (!(std::isinf(got) && got < 0)) {
            if (cmp.masked_rows_ok)
                note(cmp.detail, std::string("LSE of ") + no_key_row + " is " +
                                     std::to_string(got) + ", not -inf, at " + where());
            cmp.masked_rows_ok = false;
        }
        return;
    }
    const double err = std::fabs(double(got) - ref);
    cmp.lse_lowp_err = std::max(cmp.lse_lowp_err, std::fabs(ref_lowp - ref));
    cmp.lse_rel_err = std::max(cmp.lse_rel_err, err / (1 + std::fabs(ref)));
    if (!(err <= kLseRelTol * (1 + std::fabs(ref)))) *within_tol = false;
    if (!(err <= cmp.lse_err)) cmp.lse_err = err;
}

// The O verdict once every element is checked: all written and the 2x
// rule, over the whole case and per magnitude class (each class against the
// same-precision error of itself and its two neighbours, so that rows a
// factor ~2 apart at a class edge share a bound). `worst()` names the
// element with the largest error (called only on a failure).
template <typename Where>
void judge_o(Comparison &cmp, Where worst) {
    cmp.ratio = cmp.max_err / std::max(cmp.lowp_err, 5e-7);
    bool case_ok = cmp.max_err <= 2 * cmp.lowp_err + 1e-6;
    if (cmp.all_written && !case_ok) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "O error %.3g > 2 x %.3g (worst at ", cmp.max_err,
                      cmp.lowp_err);
        note(cmp.detail, buf + worst() + ")");
    }
    bool classes_ok = true;
    for (int k = 0; k < Comparison::kClasses; ++k) {
        if (cmp.class_worst[k].empty()) continue;
        double lowp = cmp.class_lowp[k];
        if (k > 0) lowp = std::max(lowp, cmp.class_lowp[k - 1]);
        if (k + 1 < Comparison::kClasses) lowp = std::max(lowp, cmp.class_lowp[k + 1]);
        cmp.ratio = std::max(cmp.ratio, cmp.class_err[k] / std::max(lowp, 5e-7));
        if (cmp.class_err[k] <= 2 * lowp + 1e-6) continue;
        if (cmp.all_written && classes_ok) {
            char buf[200];
            std::snprintf(buf, sizeof buf,
                          "O error %.3g > 2 x %.3g among rows of largest |O| in [2^%d, 2^%d) "
                          "(worst at ",
                          cmp.class_err[k], lowp, k - Comparison::kClassBias,
                          k - Comparison::kClassBias + 1);
            note(cmp.detail, buf + cmp.class_worst[k] + ")");
        }
        classes_ok = false;
    }
    cmp.o_ok = cmp.all_written && case_ok && classes_ok;
}

// The LSE verdict once every entry is checked: each within kLseRelTol (1 + |ref|)
// (`all_within_tol`), or the 2x rule over all of them.
inline void judge_lse(Comparison &cmp, bool all_within_tol) {
    cmp.lse_ok = all_within_tol || cmp.lse_err <= 2 * cmp.lse_lowp_err + 1e-6;
    if (!cmp.lse_ok) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "LSE error %.3g beyond %.0e*(1+|lse|) and 2 x %.3g",
                      cmp.lse_err, kLseRelTol, cmp.lse_lowp_err);
        note(cmp.detail, buf);
    }
}

// ---- the summary line ----

// A run that did not complete: appends " | STATUS: error" and returns true.
inline bool append_run_failure(std::ostream &s, fmha_status status, const std::string &error) {
    if (status == FMHA_STATUS_SUCCESS && error.empty()) return false;
    s << " | ";
    if (status != FMHA_STATUS_SUCCESS) s << fmha_status_string(status) << ": ";
    s << error;
    return true;
}

// The defects of a completed run, " | what" each, then the comparison's
// detail; `outside` and `no_key_rows` word the two the runners name apart.
inline void append_defects(std::ostream &s, bool guards_ok, bool rerun_identical,
                           const Comparison &cmp, const char *outside, const char *no_key_rows) {
    if (!guards_ok) s << " | guards overwritten";
    if (!rerun_identical) s << " | rerun differs";
    if (!cmp.all_written) s << " | unwritten/NaN output";
    if (!cmp.gaps_untouched) s << " | " << outside;
    if (!cmp.masked_rows_ok) s << " | " << no_key_rows;
    if (!cmp.detail.empty()) s << " | " << cmp.detail;
}

}  // namespace fmha_test
