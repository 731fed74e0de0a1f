// One attention case end to end: random inputs, device buffers with guards,
// a plan, two runs, and every check the GPU suite makes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fmha/fmha.h"
#include "fmha_test/buffers.h"
#include "fmha_test/layout.h"
#include "fmha_test/reference.h"

struct CUstream_st;

namespace fmha_test {

struct Case {
    fmha_dtype dtype = FMHA_DTYPE_BF16;
    int64_t batch = 1, num_q_heads = 8, num_kv_heads = 8;
    int64_t seqlen_q = 128, seqlen_k = 128, head_dim = 128;
    fmha_mask mask = FMHA_MASK_NONE;
    Layout layout = Layout::BSHD;
    float softmax_scale = 0;  // 0: the library's default 1/sqrt(head_dim)
    bool write_lse = true;
    fmha_kernel_family kernel = FMHA_KERNEL_AUTO;
    bool broadcast_kv = false;  // K and V hold one batch, read with batch stride 0
    int32_t window_left = -1, window_right = -1;  // -1: unbounded (descriptor v2)
    float softcap = 0;                            // 0: off
    bool sinks = false;                           // random per-head sink logits
    float key_growth = 0;  // K's row s scaled by 1 + key_growth * s: a running max that jumps
    uint64_t seed = 1;

    // e.g. "bf16 hd128 b2 Hq8/Hkv2 sq17 sk1000 mask=bottom-right BSHD lse seed=0x..."
    std::string name() const;
};

// A case of this shape, every other field at its default.
Case dense_case(fmha_dtype dtype, int64_t head_dim, int64_t batch, int64_t num_q_heads,
                int64_t num_kv_heads, int64_t seqlen_q, int64_t seqlen_k);

const char *mask_name(fmha_mask mask);

// Outputs of one run as copied back: the whole O allocation (gaps included)
// and the LSE ([batch, Hq, Sq], contiguous; empty without FMHA_FLAG_WRITE_LSE).
struct Outputs {
    std::vector<uint16_t> o;
    std::vector<float> lse;
    bool operator==(const Outputs &other) const;  // bitwise

    // O's whole allocation, and the LSE's when `with_lse`.
    static Outputs download(const DeviceBuffer &o, const DeviceBuffer &lse, bool with_lse);
};

// An fp32 LSE (max and sum in fp32, hardware exp2/log2, softcap's tanh)
// measured within 5.3e-6 (1 + |ref|) of float64 over the GPU suites' 3,600
// runs; the bound keeps a 10x margin.
constexpr double kLseRelTol = 5e-5;

// Result of comparing one run's outputs with the references.
struct Comparison {
    double max_err = 0;     // max |kernel - ref64| over O
    double lowp_err = 0;    // max |same-precision ref - ref64| over O
    double ratio = 0;       // the larger of the whole-case and the per-class ratio
    bool o_ok = false;      // 2x rule over the case and per magnitude class (below)
    // The 2x rule again per magnitude class of rows: class k holds the rows
    // whose largest |ref64| lies in [2^(k-kClassBias), 2^(k-kClassBias+1)).
    // Short rows (a few keys: O ~ one V row) have errors tens of times those
    // of long rows (O an average of thousands), so one bound per case would
    // let a long row be far off; a class is held to 2x the same-precision
    // error of its own class and its two neighbours.
    static constexpr int kClasses = 40, kClassBias = 32;
    double class_err[kClasses] = {};
    double class_lowp[kClasses] = {};
    std::string class_worst[kClasses];  // the element with class_err, named
    double lse_err = 0;     // max |kernel - ref64| over finite LSE rows
    double lse_rel_err = 0;  // max |kernel - ref64| / (1 + |ref64|) over them
    double lse_lowp_err = 0;
    bool lse_ok = true;     // every row within 5e-5*(1+|lse|), or the 2x rule on LSE
    bool all_written = false;     // no NaN left in the logical O (and LSE)
    bool gaps_untouched = false;  // O elements outside the view kept the prefill
    int64_t masked_rows = 0;      // rows that see no key
    bool masked_rows_ok = true;   // those have O == +-0 exactly and LSE == -inf
    std::string detail;           // first problem found, for the failure line
};

// A case's inputs on the host, its layouts, its references (computed on
// first use) and the comparison of outputs with them. Needs no GPU.
class HostCase {
public:
    explicit HostCase(const Case &c);
    const Case &config() const { return case_; }

    fmha_descriptor descriptor() const;
    RefProblem ref_problem() const;

    // Compares one run's outputs with the references.
    Comparison compare(const Outputs &out);
    // Outputs a correct kernel could produce: the same-precision reference
    // placed at the O strides, the gaps left at the prefill pattern.
    Outputs expected_outputs();

    const RefResult &ref64();
    const RefResult &ref_lowp();

    // Whole allocations (gaps included), as uploaded.
    const std::vector<uint16_t> &host_q() const { return hq_; }
    const std::vector<uint16_t> &host_k() const { return hk_; }
    const std::vector<uint16_t> &host_v() const { return hv_; }
    const std::vector<float> &host_sinks() const { return sinks_; }

    TensorLayout q_layout, k_layout, v_layout, o_layout;
    size_t lse_elems() const;

private:
    Case case_;
    std::vector<uint16_t> hq_, hk_, hv_;
    std::vector<float> sinks_;
    std::unique_ptr<RefResult> ref64_, ref_lowp_;
};

// A HostCase with its device buffers: inputs uploaded, outputs prefilled.
class CaseData : public HostCase {
public:
    explicit CaseData(const Case &c);

    // Pointers for fmha_run; lse is set only when write_lse.
    fmha_tensors tensors() const;

    // Fills O (all of its allocation) and LSE with NaN (synchronous).
    void prefill_outputs();
    Outputs download() const;
    // Checks the guard bands of every buffer.
    bool guards_intact(std::string *why) const;

    DeviceBuffer q, k, v, o, lse, sinks;
};

struct CaseResult {
    fmha_status status = FMHA_STATUS_SUCCESS;  // of create_plan / run
    std::string error;                         // message when something failed to run
    std::string kernel_name;
    int kernel_family = -1;
    uint64_t workspace_bytes = 0;
    Comparison cmp;
    bool guards_ok = false;
    bool bitwise_identical_rerun = false;
    // Convenience copies of cmp's headline numbers.
    double max_err = 0, lowp_err = 0, ratio = 0, lse_err = 0;
    bool all_written = false;

    bool passed() const;
    // One line: what failed, the numbers, the seed.
    std::string summary(const Case &c) const;
};

// Creates a plan, allocates the workspace it asks for (if any), runs twice on
// the default stream, synchronizes, checks cudaGetLastError, compares both
// outputs bitwise and the first with the references, and checks the guards.
CaseResult run_case(const Case &c);

}  // namespace fmha_test
