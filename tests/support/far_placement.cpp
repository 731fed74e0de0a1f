#include "fmha_test/far_placement.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "fmha_test/half.h"
#include "fmha_test/random.h"
#include "serving_run.h"

namespace fmha_test {
namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;
constexpr int64_t kElemBytes = 2;  // bf16 and fp16
constexpr int64_t kMaxIndex = (int64_t(1) << 31) - 1;

// A multiple of 2 MiB (the VMM granularity) in elements, at least `bytes`.
int64_t far_elems(uint64_t bytes) {
    return int64_t((bytes + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB)) / kElemBytes;
}

int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string gib(double bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / double(uint64_t(1) << 30));
    return buf;
}

}  // namespace

FarTensor FarTensor::batches(const char *name, const TensorLayout &compact, int64_t outer,
                             uint64_t stride_bytes) {
    FarTensor t;
    t.name = name;
    const int64_t block = compact.strides.batch, far = far_elems(stride_bytes);
    if (compact.offset != 0 || int64_t(compact.alloc_elems) != outer * block)
        throw std::invalid_argument(std::string("FarTensor: ") + name +
                                    " is not a packed run of batch blocks");
    for (int64_t b = 0; b < outer; ++b) t.segments.push_back({b * block, block, b * far});
    t.strides = compact.strides;
    t.strides.batch = far;
    t.how = std::string(name) + " batches " + gib(double(far * kElemBytes)) + " apart";
    return t;
}

void FarTensor::back(const std::vector<uint16_t> *host, uint16_t fill) {
    std::vector<SparseDeviceRange::Piece> pieces;
    uint64_t end = 0;
    for (const Segment &s : segments) {
        pieces.push_back({uint64_t(s.far * kElemBytes), uint64_t(s.count * kElemBytes)});
        end = std::max(end, uint64_t((s.far + s.count) * kElemBytes));
    }
    mem_ = std::make_unique<SparseDeviceRange>(end, pieces);
    mem_->fill16(fill);
    if (host == nullptr) return;
    for (const Segment &s : segments)
        mem_->upload(uint64_t(s.far * kElemBytes), host->data() + s.compact,
                     size_t(s.count * kElemBytes));
}

void FarTensor::download(std::vector<uint16_t> &compact) const {
    for (const Segment &s : segments)
        mem_->download(uint64_t(s.far * kElemBytes), compact.data() + s.compact,
                       size_t(s.count * kElemBytes));
}

bool FarTensor::outside_untouched(uint16_t pattern, std::string *why) const {
    std::vector<uint16_t> got;
    for (const SparseDeviceRange::Piece &p : mem_->pieces()) {
        got.resize(size_t(p.bytes / kElemBytes));
        mem_->download(p.offset, got.data(), p.bytes);
        const int64_t lo = int64_t(p.offset) / kElemBytes, hi = lo + int64_t(got.size());
        std::vector<char> inside(got.size(), 0);
        for (const Segment &s : segments) {
            const int64_t a = std::max(lo, s.far), e = std::min(hi, s.far + s.count);
            if (a < e) std::fill(inside.begin() + (a - lo), inside.begin() + (e - lo), 1);
        }
        for (size_t i = 0; i < got.size(); ++i)
            if (!inside[i] && got[i] != pattern) {
                if (why)
                    *why = std::string(name) + ": the element at byte " +
                           std::to_string(uint64_t(lo + int64_t(i)) * kElemBytes) +
                           " of its far range, outside the tensor, was written";
                return false;
            }
    }
    return true;
}

uint64_t FarTensor::largest_offset() const {
    uint64_t top = 0;
    for (const Segment &s : segments)
        top = std::max(top, uint64_t((s.far + s.count - 1) * kElemBytes));
    return top;
}

FarData::FarData(const ServingCase &c, const FarPlacement &where, bool on_device)
    : ServingHost(c, on_device), where_(where) {
    if (c.layout != Layout::BSHD && c.layout != Layout::BHSD)
        throw std::invalid_argument("FarData: BSHD and BHSD layouts only (a sliced view starts "
                                    "inside its allocation)");
    if (c.declared_pages > 0)
        throw std::invalid_argument("FarData: a declared pool has no compact pages to move");
    q_.name = "q";  // the names of the tensors the place_* functions move
    k_.name = "k";
    v_.name = "v";
    o_.name = "o";
    // Q and O.
    if (c.varlen_q) {
        place_query_rows(q_);
        place_query_rows(o_);
    } else {
        q_ = FarTensor::batches("q", q_layout, c.batch(), where.batch_bytes + 2 * kMiB);
        o_ = FarTensor::batches("o", o_layout, c.batch(), where.batch_bytes + 6 * kMiB);
    }
    // K and V.
    switch (c.keys) {
    case KeyLayout::DENSE:
        k_ = FarTensor::batches("k", k_layout, c.batch(), where.batch_bytes);
        v_ = FarTensor::batches("v", k_layout, c.batch(), where.batch_bytes + 4 * kMiB);
        break;
    case KeyLayout::PAGED:
        place_pages(k_);
        place_pages(v_);
        break;
    case KeyLayout::PACKED:
        place_key_rows(k_);
        place_key_rows(v_);
        break;
    }
    if (!on_device) return;
    q_.back(&host_q(), kGuard16);
    k_.back(&host_k(), kGuard16);
    v_.back(&host_v(), kGuard16);
    o_.back(nullptr, kOutputPrefill16);

    // The small arrays stay in ordinary guard-banded buffers.
    if (c.write_lse) lse_ = DeviceBuffer(lse_elems(), 4, kGuard32);
    if (c.sinks) {
        sinks_ = DeviceBuffer(host_sinks().size(), 4, kGuard32);
        sinks_.upload(host_sinks().data());
    }
    if (c.varlen_q) cu_q_ = int32_buffer(host_cu_q(), kGuard32);
    if (c.cu_seqlens_k) cu_k_ = int32_buffer(c.keys == KeyLayout::PACKED ? cu_k_far_ : host_cu_k(), kGuard32);
    if (!c.seqused.empty()) seqused_ = int32_buffer(c.seqused, kGuard32);
    if (c.keys == KeyLayout::PAGED) block_table_ = int32_buffer(block_table_far_, kGuard32);
    prefill_outputs();
}

// Odd pages move up by `shift` pages; the block table follows.
void FarData::place_pages(FarTensor &t) {
    const ServingCase &c = config();
    const int64_t block = k_layout.strides.batch, pages = num_pages();
    if (k_layout.offset != 0 || int64_t(k_layout.alloc_elems) != pages * block)
        throw std::invalid_argument("FarData: the page pool is not a packed run of pages");
    const int64_t shift = ceil_div64(int64_t(where_.page_shift_bytes), block * kElemBytes);
    if (shift + pages > kMaxIndex)
        throw std::invalid_argument("FarData: the moved pages pass 2^31-1");
    auto moved = [&](int64_t p) { return p % 2 ? p + shift : p; };
    for (int64_t p = 0; p < pages; ++p) t.segments.push_back({p * block, block, moved(p) * block});
    t.strides = k_layout.strides;
    t.how = std::string(t.name) + " odd pages up to " +
            gib(double((shift + pages) * block * kElemBytes));
    if (!block_table_far_.empty()) return;  // K did the table; V shares it
    // The pool ends with the last odd page: the decode and portable kernels
    // clamp an out-of-range entry to the last page, which must have memory.
    const int64_t last_odd = (pages - 1) % 2 ? pages - 1 : pages - 2;
    num_pages_far_ = last_odd > 0 ? shift + last_odd + 1 : pages;
    const int64_t B = c.batch(), cols = max_pages_per_seq();
    block_table_far_ = host_block_table();
    for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < cols; ++i) {
            int32_t &e = block_table_far_[size_t(b * cols + i)];
            const int64_t held = ceil_div64(c.k_lens[size_t(b)], c.page_size);
            if (i < held) e = int32_t(moved(e));
            // An entry no key uses was out of range: keep it out of the larger pool.
            else if (e >= pages && e != INT32_MAX && int64_t(e) + shift <= kMaxIndex)
                e = int32_t(e + shift);
        }
}

// Sequence b's rows (and, for the last, the spare rows after it) move down
// b x `shift` rows; every sequence but the last gets `shift` unused rows.
void FarData::place_key_rows(FarTensor &t) {
    const ServingCase &c = config();
    const int64_t B = c.batch(), row = k_layout.strides.seq;
    if (c.layout != Layout::BSHD)
        throw std::invalid_argument("FarData: packed K/V must be BSHD (rows of whole heads)");
    if (c.seqused.empty())
        throw std::invalid_argument("FarData: packed K/V needs seqused_k (moved sequences grow)");
    for (int64_t b = 0; b < B; ++b)
        if (c.seqused[size_t(b)] > c.k_lens[size_t(b)])
            throw std::invalid_argument("FarData: seqused_k must be within each sequence's keys");
    const int64_t shift = ceil_div64(int64_t(where_.key_shift_bytes), row * kElemBytes);
    const std::vector<int32_t> &cu = host_cu_k();
    if (total_k() + (B - 1) * shift > kMaxIndex)
        throw std::invalid_argument("FarData: the moved rows pass 2^31-1");
    for (int64_t b = 0; b < B; ++b) {
        const int64_t first = cu[size_t(b)], end = b + 1 < B ? cu[size_t(b + 1)] : total_k();
        t.segments.push_back({first * row, (end - first) * row, (first + b * shift) * row});
    }
    t.strides = k_layout.strides;
    t.how = std::string(t.name) + " sequences " + gib(double(shift * row * kElemBytes)) + " apart";
    if (!cu_k_far_.empty()) return;
    cu_k_far_ = cu;
    for (int64_t b = 1; b <= B; ++b) cu_k_far_[size_t(b)] += int32_t(std::min(b, B - 1) * shift);
    total_k_far_ = total_k() + (B - 1) * shift;
}

// Row r of packed Q/O moves to r x the far row stride.
void FarData::place_query_rows(FarTensor &t) {
    const ServingCase &c = config();
    if (c.layout != Layout::BSHD)
        throw std::invalid_argument("FarData: packed Q/O must be BSHD (rows of whole heads)");
    const int64_t row = q_layout.strides.seq, far = far_elems(where_.query_row_bytes);
    for (int64_t r = 0; r < total_q(); ++r) t.segments.push_back({r * row, row, r * far});
    t.strides = q_layout.strides;
    t.strides.seq = far;
    t.how = std::string(t.name) + " rows " + gib(double(far * kElemBytes)) + " apart";
}

void FarData::upload_lengths(const std::vector<int32_t> *cu_q, const std::vector<int32_t> *cu_k,
                             const std::vector<int32_t> *seqused) {
    const struct {
        const std::vector<int32_t> *values;
        DeviceBuffer *buf;
        const char *name;
    } arrays[] = {{cu_q, &cu_q_, "cu_seqlens_q"}, {cu_k, &cu_k_, "cu_seqlens_k"},
                  {seqused, &seqused_, "seqused_k"}};
    for (const auto &a : arrays) {
        if (a.values == nullptr) continue;
        if (a.buf->elems() == 0 || a.values->size() != a.buf->elems())
            throw std::invalid_argument(std::string("FarData::upload_lengths: ") + a.name +
                                        " is absent or of another length");
        a.buf->upload(a.values->data());
    }
}

void FarData::restore_lengths() {
    const ServingCase &c = config();
    if (c.varlen_q) cu_q_.upload(host_cu_q().data());
    if (c.cu_seqlens_k)
        cu_k_.upload(c.keys == KeyLayout::PACKED ? cu_k_far_.data() : host_cu_k().data());
    if (!c.seqused.empty()) seqused_.upload(c.seqused.data());
}

fmha_descriptor FarData::descriptor(fmha_kernel_family kernel, int32_t num_splits) const {
    fmha_descriptor d = ServingHost::descriptor(kernel, num_splits);
    d.q_strides = q_.strides;
    d.k_strides = k_.strides;
    d.v_strides = v_.strides;
    d.o_strides = o_.strides;
    if (config().keys == KeyLayout::PAGED) d.num_pages = num_pages_far_;
    if (config().keys == KeyLayout::PACKED) d.total_k = total_k_far_;
    return d;
}

fmha_tensors FarData::tensors() const {
    const ServingCase &c = config();
    fmha_tensors t;
    fmha_tensors_init(&t, FMHA_TENSORS_VERSION);
    t.q = q_.data();
    t.k = k_.data();
    t.v = v_.data();
    t.o = o_.data();
    t.lse = c.write_lse ? static_cast<float *>(lse_.data()) : nullptr;
    t.sinks = c.sinks ? static_cast<const float *>(sinks_.data()) : nullptr;
    t.cu_seqlens_q = c.varlen_q ? static_cast<const int32_t *>(cu_q_.data()) : nullptr;
    t.cu_seqlens_k = c.cu_seqlens_k ? static_cast<const int32_t *>(cu_k_.data()) : nullptr;
    t.seqused_k = c.seqused.empty() ? nullptr : static_cast<const int32_t *>(seqused_.data());
    t.block_table =
        c.keys == KeyLayout::PAGED ? static_cast<const int32_t *>(block_table_.data()) : nullptr;
    return t;
}

void FarData::prefill_outputs() {
    o_.fill(kOutputPrefill16);
    if (config().write_lse) lse_.fill(kOutputPrefill32);
}

Outputs FarData::download() const {
    Outputs out;
    out.o.assign(o_layout.alloc_elems, kOutputPrefill16);
    o_.download(out.o);
    if (config().write_lse) {
        out.lse.resize(lse_.elems());
        lse_.download(out.lse.data());
    }
    return out;
}

bool FarData::guards_intact(std::string *why) const {
    if (!all_guards_intact({{"lse", &lse_},
                            {"sinks", &sinks_},
                            {"cu_seqlens_q", &cu_q_},
                            {"cu_seqlens_k", &cu_k_},
                            {"seqused_k", &seqused_},
                            {"block_table", &block_table_}},
                           why))
        return false;
    // O's backing outside its elements must still hold the prefill.
    return o_.outside_untouched(kOutputPrefill16, why);
}

uint64_t FarData::largest_offset() const {
    uint64_t top = 0;
    for (const FarTensor *t : {&q_, &k_, &v_, &o_}) top = std::max(top, t->largest_offset());
    return top;
}

std::string FarData::placement() const {
    std::ostringstream s;
    s << q_.how << "; " << k_.how << "; " << v_.how << "; " << o_.how
      << "; largest offset " << gib(double(largest_offset()));
    return s.str();
}

ServingRun run_serving(FarData &data, fmha_kernel_family kernel, int32_t num_splits) {
    return run_serving_on(data, kernel, num_splits);
}

}  // namespace fmha_test

namespace fmha_test {

std::vector<ServingCase> large_offset_suite() {
    const fmha_mask br = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
    std::vector<ServingCase> v;
    // Dense caches, batches 68 GiB apart.
    // decode, hd128 GQA, ragged seqused_k (decode kernel; Hopper packed heads)
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 8, 2)
                    .q({1, 1, 1}).k({2000, 2000, 2000}).seqused({1999, 1000, 1500}).mask(br));
    // prefill, [batch, head, seq, dim] (Hopper TMA maps; portable)
    v.push_back(serving_case(FMHA_DTYPE_FP16, 128, 4, 2)
                    .q({192, 192}).k({700, 700}).mask(br).layout(Layout::BHSD));
    // hd64 with a window, softcap and sinks (`_scoremod` entry points)
    v.push_back(serving_case(FMHA_DTYPE_BF16, 64, 4, 4)
                    .q({100, 100, 100}).k({600, 600, 600}).mask(br).window(64).softcap(30.0f)
                    .sinks());
    // hd64 MHA decode (the decode kernel reads head pairs)
    v.push_back(serving_case(FMHA_DTYPE_BF16, 64, 8, 8).q({1, 1, 1, 1}).k({800, 800, 800, 800}));
    // hd96 decode
    v.push_back(serving_case(FMHA_DTYPE_FP16, 96, 8, 4).q({1, 1}).k({900, 900}).mask(br));
    // hd256, 4 positions, split three ways (partials and combine)
    v.push_back(serving_case(FMHA_DTYPE_FP16, 256, 16, 2)
                    .q({4, 4}).k({1500, 1500}).mask(br).splits(3));
    // hd512 MQA decode (split-D tiles)
    v.push_back(serving_case(FMHA_DTYPE_BF16, 512, 16, 1).q({1, 1}).k({1200, 1200}).mask(br));

    // Paged caches, odd pages moved past 132 GiB.
    // decode over 16-row pages (TMA page chunks; the decode kernel's page walk)
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 32, 8)
                    .q({1, 1, 1}).paged(16, {3000, 100, 2000}).seqused({2990, 100, 1999})
                    .mask(br));
    // 32 positions over pages of one row (Hopper `_gather`)
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 16, 4)
                    .q({32, 32}).paged(1, {1000, 600}).seqused({1000, 577}).mask(br));
    // chunked prefill over 64-row pages, packed query rows 5 GiB apart
    v.push_back(serving_case(FMHA_DTYPE_FP16, 128, 8, 2)
                    .varlen_q({30, 0, 17}).paged(64, {1100, 5, 640}).seqused({1100, 5, 600})
                    .mask(br));
    // hd512 over 32-row pages, 64 heads x 2 positions (shared-S tile)
    v.push_back(serving_case(FMHA_DTYPE_BF16, 512, 64, 1)
                    .q({2, 2}).paged(32, {900, 500}).seqused({900, 480}).mask(br));
    // hd512 over pages of one row with a softcap (`_gather_scoremod`)
    v.push_back(serving_case(FMHA_DTYPE_FP16, 512, 16, 1)
                    .q({1, 1}).paged(1, {700, 300}).seqused({700, 299}).mask(br)
                    .softcap(20.0f));

    // Packed keys, sequences 72 GiB apart, and packed query rows 5 GiB apart.
    v.push_back(serving_case(FMHA_DTYPE_BF16, 128, 8, 2)
                    .varlen_q({5, 0, 3}, 1).packed_k({900, 40, 700}).seqused({880, 40, 650})
                    .mask(br));
    for (size_t i = 0; i < v.size(); ++i) v[i].seed = case_seed(base_seed(), 31000 + i);
    return v;
}

}  // namespace fmha_test
