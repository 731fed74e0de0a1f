// Memory layouts of the test tensors, expressed as fmha_strides.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "fmha/fmha.h"

namespace fmha_test {

enum class Layout {
    BSHD,    // [batch, seq, heads, dim], contiguous
    BHSD,    // [batch, heads, seq, dim], contiguous
    SLICED,  // a view into a bigger BSHD tensor: extra heads, padded head_dim and
             // extra rows, so every stride is larger than the packed one and the
             // view starts at an offset into the allocation
};

const char *layout_name(Layout layout);

struct TensorLayout {
    fmha_strides strides{};
    int64_t offset = 0;      // elements from the allocation start to element (0,0,0,0)
    size_t alloc_elems = 0;  // elements to allocate (without guard bands)
};

// Layout of a logical [batch, seqlen, heads, head_dim] tensor.
TensorLayout make_layout(Layout layout, int64_t batch, int64_t seqlen, int64_t heads,
                         int64_t head_dim);

inline int64_t element_offset(const fmha_strides &s, int64_t b, int64_t t, int64_t h,
                              int64_t d) {
    return b * s.batch + t * s.seq + h * s.head + d * s.dim;
}

}  // namespace fmha_test
