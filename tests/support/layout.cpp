#include "fmha_test/layout.h"

namespace fmha_test {

const char *layout_name(Layout layout) {
    switch (layout) {
    case Layout::BSHD: return "BSHD";
    case Layout::BHSD: return "BHSD";
    case Layout::SLICED: return "SLICED";
    }
    return "layout?";
}

TensorLayout make_layout(Layout layout, int64_t batch, int64_t seqlen, int64_t heads,
                         int64_t head_dim) {
    TensorLayout t;
    switch (layout) {
    case Layout::BSHD:
        t.strides = {seqlen * heads * head_dim, heads * head_dim, head_dim, 1};
        t.alloc_elems = size_t(batch * seqlen * heads * head_dim);
        break;
    case Layout::BHSD:
        t.strides = {heads * seqlen * head_dim, head_dim, seqlen * head_dim, 1};
        t.alloc_elems = size_t(batch * seqlen * heads * head_dim);
        break;
    case Layout::SLICED: {
        // The parent tensor is [batch, seqlen + 3, heads + 2, head_dim + 8]; the
        // view takes rows 1.., heads 1.. and the first head_dim columns. All
        // strides and the offset stay multiples of 8 elements (16 bytes).
        const int64_t dim_p = head_dim + 8, heads_p = heads + 2, seq_p = seqlen + 3;
        t.strides = {seq_p * heads_p * dim_p, heads_p * dim_p, dim_p, 1};
        t.offset = t.strides.seq + t.strides.head;
        t.alloc_elems = size_t(batch * t.strides.batch);
        break;
    }
    }
    return t;
}

}  // namespace fmha_test
