// A serving case whose tensors lie far apart in the device address space:
// the same problem, inputs and references as the compact case (ServingHost),
// with each piece of Q, K, V and O moved tens to hundreds of GiB away, so a
// kernel's offsets pass 2^31 elements, 2^32 bytes and 2^36 bytes (a 32-bit
// offset in 16-byte units) while only the pieces hold memory
// (SparseDeviceRange). A kernel that forms any offset in 32 bits reads or
// writes an unbacked address and faults, or reads NaN.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fmha/fmha.h"
#include "fmha_test/buffers.h"
#include "fmha_test/serving.h"
#include "fmha_test/sparse_memory.h"

namespace fmha_test {

// How far FarData moves each kind of tensor. Every tensor of the case moves:
//  - dense Q, K, V, O: batch b's block starts at b x batch_bytes (V, Q and O
//    a few MiB further each, so no two tensors share a batch stride);
//  - paged K/V: the odd pages move page_shift_bytes up (the block table and
//    num_pages follow, the pool ending with the last odd page; the even
//    pages stay, holding NaN where odd ones were);
//  - packed K/V (cu_seqlens_k): sequence b's rows start b x key_shift_bytes
//    further (cu_seqlens_k and total_k follow; each moved sequence gets
//    unused rows without memory, so the case needs seqused_k within its
//    keys; 0 keeps the rows packed);
//  - packed Q/O (cu_seqlens_q, BSHD): row r starts at r x query_row_bytes.
struct FarPlacement {
    uint64_t batch_bytes = uint64_t(68) << 30;
    uint64_t page_shift_bytes = uint64_t(132) << 30;
    uint64_t key_shift_bytes = uint64_t(72) << 30;
    uint64_t query_row_bytes = uint64_t(5) << 30;
};

// One tensor moved far: pieces of its compact allocation (`segments`, in
// elements) placed at far element offsets of its own sparse range.
class FarTensor {
public:
    struct Segment {
        int64_t compact, count, far;  // elements: compact start, length, far start
    };

    FarTensor() = default;
    FarTensor(FarTensor &&) = default;
    FarTensor &operator=(FarTensor &&) = default;

    // A dense tensor whose `outer` blocks (the compact layout's batch stride
    // long, from element 0) move to multiples of `stride_bytes` (rounded up
    // to 2 MiB); the strides are the compact ones with that batch stride.
    static FarTensor batches(const char *name, const TensorLayout &compact, int64_t outer,
                             uint64_t stride_bytes);

    const char *name = "";
    std::string how;  // e.g. "q batches 68.0 GiB apart"
    std::vector<Segment> segments;
    fmha_strides strides{};  // of the far layout

    // Reserves the range, backs the segments, fills the backing with `fill`
    // and copies in the compact host elements (none when `host` is null).
    void back(const std::vector<uint16_t> *host, uint16_t fill);
    void fill(uint16_t pattern) const { mem_->fill16(pattern); }
    // Element 0 of the far layout.
    void *data() const { return mem_->base(); }
    // The segments back into `compact` (sized by the caller).
    void download(std::vector<uint16_t> &compact) const;
    // True when every backed element outside the segments still holds
    // `pattern`; otherwise `why` says where.
    bool outside_untouched(uint16_t pattern, std::string *why) const;
    // The largest byte offset of an element.
    uint64_t largest_offset() const;

private:
    std::unique_ptr<SparseDeviceRange> mem_;
};

class FarData : public ServingHost {
public:
    // Throws std::invalid_argument for a case FarData cannot move (layouts
    // other than BSHD and BHSD, packed tensors not BSHD, packed K/V without
    // seqused_k within each sequence's keys, a declared pool). Without
    // `on_device` only the layout and the descriptor exist (no inputs, no
    // device memory): for checking the cases without a GPU.
    explicit FarData(const ServingCase &c, const FarPlacement &where = {}, bool on_device = true);

    // ServingHost's descriptor with the moved strides, pages and total_k.
    fmha_descriptor descriptor(fmha_kernel_family kernel, int32_t num_splits) const;
    fmha_descriptor descriptor() const {
        return descriptor(config().kernel, config().num_splits);
    }
    fmha_tensors tensors() const;
    void prefill_outputs();
    // O and LSE as ServingHost lays them out (for compare()).
    Outputs download() const;
    // The small buffers' guard bands hold, and so does every backed element
    // of O's range that is not an element of O.
    bool guards_intact(std::string *why) const;
    // e.g. "q batches 68.0 GiB apart; k pages up to 132.1 GiB; ..."
    std::string placement() const;
    // The largest byte offset from a tensor's base at which an element lies.
    uint64_t largest_offset() const;
    // The moved block table (paged K/V), as uploaded.
    const std::vector<int32_t> &far_block_table() const { return block_table_far_; }
    // Replaces the device copies of cu_seqlens_q, cu_seqlens_k and
    // seqused_k (each where given and the case has it) with other values, as
    // a broken caller would pass; restore_lengths() puts the right ones back.
    void upload_lengths(const std::vector<int32_t> *cu_q, const std::vector<int32_t> *cu_k,
                        const std::vector<int32_t> *seqused);
    void restore_lengths();

private:
    void place_pages(FarTensor &t);
    void place_key_rows(FarTensor &t);
    void place_query_rows(FarTensor &t);

    FarPlacement where_;
    FarTensor q_, k_, v_, o_;
    std::vector<int32_t> block_table_far_, cu_k_far_;
    int64_t num_pages_far_ = 0, total_k_far_ = 0;
    DeviceBuffer lse_, sinks_, cu_q_, cu_k_, seqused_, block_table_;
};

// run_serving (serving.h) on a FarData.
ServingRun run_serving(FarData &data, fmha_kernel_family kernel, int32_t num_splits);

// The cases of tests/gpu/test_large_offsets.cpp: dense, paged and packed
// caches, every kernel family's tile shapes (head_dim 64 to 512, TMA boxes
// and gathered pages, split-KV), seeded from base_seed().
std::vector<ServingCase> large_offset_suite();

}  // namespace fmha_test
