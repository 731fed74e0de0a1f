// Serving-shaped attention problems (descriptor version 3): ragged batches
// (cu_seqlens_q / cu_seqlens_k), keys used per sequence (seqused_k), paged
// K/V caches with shuffled pages, split-KV, and the merge of partial results.
//
// ServingHost builds a case's inputs on the host and computes its float64
// and same-precision references per sequence (the same arithmetic as
// reference.h, spread over (sequence, head, row block) so one long sequence
// does not leave the threads idle). ServingData adds the device buffers
// (every one guard-banded) and run_serving() runs one kernel family on it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fmha/fmha.h"
#include "fmha_test/buffers.h"
#include "fmha_test/layout.h"
#include "fmha_test/reference.h"
#include "fmha_test/runner.h"

namespace fmha_test {

// Where the keys of a sequence live.
enum class KeyLayout {
    DENSE,   // K/V [batch, seqlen_k, kv_heads, dim]
    PACKED,  // K/V [total_k, kv_heads, dim], rows from cu_seqlens_k (FMHA_FLAG_VARLEN_K)
    PAGED,   // K/V [num_pages, page_size, kv_heads, dim] + block_table (FMHA_FLAG_PAGED_KV)
};

const char *key_layout_name(KeyLayout k);
const char *family_name(int family);  // auto, portable, hopper, decode

struct ServingCase {
    fmha_dtype dtype = FMHA_DTYPE_BF16;
    int64_t num_q_heads = 4, num_kv_heads = 2, head_dim = 128;
    // Per sequence; the batch is q_lens.size().
    //  q_lens:  rows of Q/O (the cu_seqlens_q differences with varlen_q; else
    //           every entry must equal seqlen_q).
    //  k_lens:  keys the sequence stores: the cu_seqlens_k differences (PACKED,
    //           or PAGED with cu_seqlens_k), the keys its pages hold (PAGED),
    //           or seqlen_k for every sequence (DENSE).
    //  seqused: FMHA_FLAG_SEQUSED_K when not empty: the keys each uses.
    std::vector<int32_t> q_lens, k_lens, seqused;
    bool varlen_q = false;
    KeyLayout keys = KeyLayout::DENSE;
    bool cu_seqlens_k = false;  // FMHA_FLAG_VARLEN_K (always with PACKED; optional with PAGED)
    int32_t page_size = 16;     // PAGED only
    int64_t seqlen_q = 0, seqlen_k = 0;  // descriptor maxima; 0: the largest q_lens / k_lens
    int64_t extra_q_rows = 0;   // packed rows past cu_seqlens_q[batch]: never written
    int64_t extra_k_rows = 3;   // PACKED: NaN rows past cu_seqlens_k[batch]
    int64_t extra_pages = 3;    // PAGED: NaN pages no sequence uses
    // PAGED: the descriptor's num_pages when larger than the pages allocated:
    // a pool declared far larger (past 64 GB) than the pages the table uses,
    // which alone exist and are read.
    int64_t declared_pages = 0;
    Layout layout = Layout::BSHD;  // of every tensor, packed and paged ones as [outer, rows, heads, dim]
    fmha_mask mask = FMHA_MASK_NONE;
    int32_t window_left = -1, window_right = -1;
    float softcap = 0;
    bool sinks = false;
    float softmax_scale = 0;
    bool write_lse = true;
    int32_t num_splits = 0;  // descriptor.num_splits (0: automatic)
    fmha_kernel_family kernel = FMHA_KERNEL_AUTO;
    uint64_t seed = 1;

    int64_t batch() const { return int64_t(q_lens.size()); }
    int64_t max_q() const;  // descriptor.seqlen_q
    int64_t max_k() const;  // descriptor.seqlen_k
    // Query rows computed and keys used by sequence b, after the clamps of fmha.h.
    int64_t eff_q(int64_t b) const;
    int64_t eff_k(int64_t b) const;
    // Sum over rows of the visible keys, times heads and head_dim: the
    // reference's work, for keeping the suite's runtime in bounds.
    double reference_work() const;
    // Throws std::invalid_argument when the fields are inconsistent.
    void check() const;
    // e.g. "bf16 hd128 Hq8/Hkv2 b5 q=varlen[1,17,0,...] k=paged16+seqused ..."
    std::string name() const;
};

// Writes a ServingCase as one expression, a setter per property, so that a
// suite's hand-written cases state only what sets them apart:
//   ServingCase c = serving_case(FMHA_DTYPE_BF16, 128, 8, 2)
//                       .varlen_q({3, 1, 4}).paged(16, {700, 64, 1000}).seqused({700, 60, 999});
// Fields not named keep ServingCase's defaults.
class ServingCaseBuilder {
public:
    explicit ServingCaseBuilder(const ServingCase &c) : c_(c) {}
    operator ServingCase() const { return c_; }

    // Dense Q: every entry of `lens` is seqlen_q.
    ServingCaseBuilder &q(std::vector<int32_t> lens) {
        c_.q_lens = std::move(lens);
        return *this;
    }
    // Packed Q (cu_seqlens_q), `extra_rows` rows past the last sequence.
    ServingCaseBuilder &varlen_q(std::vector<int32_t> lens, int64_t extra_rows = 0) {
        c_.varlen_q = true;
        c_.q_lens = std::move(lens);
        c_.extra_q_rows = extra_rows;
        return *this;
    }
    // Dense K/V: every entry of `lens` is seqlen_k.
    ServingCaseBuilder &k(std::vector<int32_t> lens) {
        c_.k_lens = std::move(lens);
        return *this;
    }
    // Packed K/V with cu_seqlens_k.
    ServingCaseBuilder &packed_k(std::vector<int32_t> lens) {
        c_.keys = KeyLayout::PACKED;
        c_.cu_seqlens_k = true;
        c_.k_lens = std::move(lens);
        return *this;
    }
    // Paged K/V, `lens` keys stored per sequence; with_cu_seqlens_k() adds the offsets.
    ServingCaseBuilder &paged(int32_t page_size, std::vector<int32_t> lens) {
        c_.keys = KeyLayout::PAGED;
        c_.page_size = page_size;
        c_.k_lens = std::move(lens);
        return *this;
    }
    ServingCaseBuilder &with_cu_seqlens_k() {
        c_.cu_seqlens_k = true;
        return *this;
    }
    ServingCaseBuilder &seqused(std::vector<int32_t> used) {
        c_.seqused = std::move(used);
        return *this;
    }
    ServingCaseBuilder &mask(fmha_mask m) {
        c_.mask = m;
        return *this;
    }
    ServingCaseBuilder &window(int32_t left, int32_t right = -1) {
        c_.window_left = left;
        c_.window_right = right;
        return *this;
    }
    ServingCaseBuilder &softcap(float cap) {
        c_.softcap = cap;
        return *this;
    }
    ServingCaseBuilder &sinks() {
        c_.sinks = true;
        return *this;
    }
    ServingCaseBuilder &scale(float softmax_scale) {
        c_.softmax_scale = softmax_scale;
        return *this;
    }
    ServingCaseBuilder &layout(Layout l) {
        c_.layout = l;
        return *this;
    }
    ServingCaseBuilder &splits(int32_t n) {
        c_.num_splits = n;
        return *this;
    }
    ServingCaseBuilder &extra_pages(int64_t n) {
        c_.extra_pages = n;
        return *this;
    }
    ServingCaseBuilder &declared_pages(int64_t n) {
        c_.declared_pages = n;
        return *this;
    }
    ServingCaseBuilder &seed(uint64_t s) {
        c_.seed = s;
        return *this;
    }

private:
    ServingCase c_;
};

// A case of this dtype and head shape, to be filled in through the builder.
inline ServingCaseBuilder serving_case(fmha_dtype dtype, int64_t head_dim, int64_t num_q_heads,
                                       int64_t num_kv_heads) {
    ServingCase c;
    c.dtype = dtype;
    c.head_dim = head_dim;
    c.num_q_heads = num_q_heads;
    c.num_kv_heads = num_kv_heads;
    return ServingCaseBuilder(c);
}

// The references of a serving case, in row order: `rows` query rows (the
// packed rows with varlen_q, else batch * seqlen_q), o[(row * Hq + h) * D + d],
// lse[row * Hq + h].
struct ServingRef {
    std::vector<double> o, lse;
};

// A case's inputs on the host: whole allocations (NaN wherever no input
// element lives, including keys past a sequence's used length and rows past
// its computed rows), index arrays, layouts and references. Needs no GPU.
class ServingHost {
public:
    // Without inputs (with_inputs false) only the layouts, index arrays and
    // descriptor exist: for checking a case's shape cheaply.
    explicit ServingHost(const ServingCase &c, bool with_inputs = true);
    const ServingCase &config() const { return case_; }

    // The descriptor with the case's fields, for `kernel` and `num_splits`.
    fmha_descriptor descriptor(fmha_kernel_family kernel, int32_t num_splits) const;
    fmha_descriptor descriptor() const { return descriptor(case_.kernel, case_.num_splits); }

    const ServingRef &ref64();
    const ServingRef &ref_lowp();
    // Compares one run's outputs with the references: the same checks and
    // 2x rule as HostCase::compare, plus rows outside every sequence (and
    // the LSE entries of those rows) kept at the prefill.
    Comparison compare(const Outputs &out);
    // Outputs a correct kernel could produce: the same-precision reference
    // at the sequences' rows, the prefill everywhere else.
    Outputs expected_outputs();

    // Logical position of query row i of sequence b: the row index used by
    // ServingRef, the O element (h, d), and the LSE entry of head h.
    int64_t row_index(int64_t b, int64_t i) const;
    int64_t o_element(int64_t b, int64_t i, int64_t h, int64_t d) const;
    int64_t lse_entry(int64_t b, int64_t i, int64_t h) const;
    // Element (h, d) of key j of sequence b in the K (and V) allocation.
    int64_t k_element(int64_t b, int64_t j, int64_t h, int64_t d) const;

    int64_t q_rows() const;   // rows of the Q/O tensor (total_q or batch * seqlen_q)
    int64_t total_q() const { return total_q_; }
    int64_t total_k() const { return total_k_; }
    int64_t num_pages() const { return num_pages_; }
    int64_t max_pages_per_seq() const { return max_pages_; }
    size_t lse_elems() const;

    const std::vector<uint16_t> &host_q() const { return hq_; }
    const std::vector<uint16_t> &host_k() const { return hk_; }
    const std::vector<uint16_t> &host_v() const { return hv_; }
    const std::vector<float> &host_sinks() const { return sinks_; }
    const std::vector<int32_t> &host_cu_q() const { return cu_q_; }
    const std::vector<int32_t> &host_cu_k() const { return cu_k_; }
    const std::vector<int32_t> &host_block_table() const { return block_table_; }
    // Pages sequence b's used keys occupy (entries of its block-table row that are read).
    int64_t pages_used(int64_t b) const;

    TensorLayout q_layout, k_layout, o_layout;  // V shares K's layout

private:
    void compute_references();
    ServingCase case_;
    bool with_inputs_ = true;
    int64_t total_q_ = 0, total_k_ = 0, num_pages_ = 0, max_pages_ = 0;
    std::vector<uint16_t> hq_, hk_, hv_;
    std::vector<float> sinks_;
    std::vector<int32_t> cu_q_, cu_k_, block_table_;
    std::unique_ptr<ServingRef> ref64_, ref_lowp_;
};

// A ServingHost with its device buffers: inputs uploaded, outputs prefilled.
class ServingData : public ServingHost {
public:
    explicit ServingData(const ServingCase &c);
    // Pointers for fmha_run (version 3); only the arrays the case's flags need are set.
    fmha_tensors tensors() const;
    // Uploads another case's inputs and index arrays (Q, K, V, sinks,
    // cu_seqlens, seqused_k, block table) into these buffers, as a server
    // refills the memory a captured graph reads between replays. The cases
    // must have the same allocations (same batch, head shape, layouts,
    // total_q, stored keys and pages); throws std::invalid_argument if not.
    void upload_inputs(const ServingHost &from);
    void prefill_outputs();
    Outputs download() const;
    bool guards_intact(std::string *why) const;

    DeviceBuffer q, k, v, o, lse, sinks, cu_q, cu_k, seqused, block_table;
};

// Why fmha.h says `d.kernel` cannot run `d` (NOT_SUPPORTED is then an
// answer, not a failure), or nullptr where the header documents no such
// limit: PORTABLE with head_dim 512; an explicitly
// requested HOPPER kernel (as the existing sweep treats it); a kernel whose
// shared memory the device lacks (`error`: plan creation's message).
const char *documented_unsupported(const fmha_descriptor &d, const std::string &error = {});

// One run of a serving case on one kernel family and split count.
struct ServingRun {
    fmha_kernel_family kernel = FMHA_KERNEL_AUTO;  // requested
    int32_t requested_splits = 0;
    fmha_status status = FMHA_STATUS_SUCCESS;      // of plan creation / run
    std::string error;                             // what failed to run, or ""
    const char *unsupported = nullptr;             // documented NOT_SUPPORTED: the reason
    int kernel_family = -1;                        // chosen (plan info)
    std::string kernel_name;
    int32_t num_splits = 0;                        // plan info (version 2)
    uint64_t workspace_bytes = 0;
    std::string plan_problem;  // plan info contradicting fmha.h, or ""
    Comparison cmp;
    bool guards_ok = false;
    bool rerun_identical = false;
    Outputs out;  // of the first run

    bool passed() const;  // false for an unsupported run too: it is not a pass
    std::string summary(const ServingCase &c) const;
};

// Creates the plan for (kernel, num_splits), reads its info (version 2),
// allocates the workspace it reports with guard bands (its payload NaN),
// runs twice with outputs prefilled with NaN, synchronizes, compares the
// two outputs bitwise and the first with the references, and checks every
// guard band. Plan info is checked against fmha.h: a forced family is the
// one chosen; AUTO with num_splits >= 2 chooses DECODE (PORTABLE where the
// decode kernel does not fit), with head_dim 512 not PORTABLE; num_splits
// is >= 1 and exactly the request for 1..128; workspace_bytes matches.
ServingRun run_serving(ServingData &data, fmha_kernel_family kernel, int32_t num_splits);

// ---- merge -----------------------------------------------------------

// Partial results in logical order, as fmha_run_merge sees them:
// o[p][((b * H + h) * Sq + i) * D + d] (values of the dtype), lse[p][(b * H + h) * Sq + i].
struct MergeInput {
    fmha_dtype dtype = FMHA_DTYPE_BF16;
    int64_t batch = 1, seqlen_q = 1, num_heads = 1, head_dim = 64;
    std::vector<std::vector<double>> o, lse;
};

// O = sum_p exp(LSE_p - LSE) O_p, LSE = log sum_p exp(LSE_p), a row no part
// saw giving O = 0 and LSE = -inf: in float64, and in float32 with O
// rounded to the dtype (the same-precision reference). RefResult layout.
RefResult merge_reference_fp64(const MergeInput &in);
RefResult merge_reference_lowp(const MergeInput &in);

// ---- the GPU suites' cases -------------------------------------------------

// The cases of tests/gpu/test_serving.cpp, seeded from base_seed(); here so
// that the CPU tests can check every one is a valid problem (and the suite
// stays affordable) without a GPU. The kernel field is left AUTO: the suites
// run each case on serving_families().
std::vector<ServingCase> varlen_suite();    // ragged prefill batches
std::vector<ServingCase> paged_suite();     // shuffled pages of every size
std::vector<ServingCase> decode_suite();    // seqlen_q x head_dim x GQA ratio
std::vector<ServingCase> packed_heads_suite();  // short GQA queries for the Hopper kernel
std::vector<ServingCase> paged_hopper_suite();  // paged caches the Hopper kernel reads
std::vector<ServingCase> gathered_pages_suite();  // pages no TMA box fits (Hopper `_gather`)
std::vector<ServingCase> hopper_feature_suite();  // windows, softcap, sinks on the Hopper kernel
std::vector<ServingCase> hd512_hopper_suite();    // head_dim 512 on the Hopper kernel (split D)
std::vector<ServingCase> split_suite();     // problems run with every split count
std::vector<ServingCase> feature_suite();   // windows, softcap, sinks on decode shapes
std::vector<ServingCase> sanitize_suite();  // small cases for compute-sanitizer
// The split counts split_suite() runs on the decode kernel.
std::vector<int32_t> split_counts();

// Parses FMHA_TEST_KERNEL for the serving suites (which also know
// "decode"): unset or "auto" gives AUTO, PORTABLE and DECODE; a family name
// gives only that family. Anything else throws std::invalid_argument.
std::vector<fmha_kernel_family> serving_families();

}  // namespace fmha_test
