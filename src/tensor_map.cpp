#include "tensor_map.h"

#include <algorithm>

#include "errors.h"

namespace fmha {
namespace {

constexpr int kMaxRank = 5;
constexpr cuuint64_t kMaxExtent = cuuint64_t(1) << 32;
constexpr cuuint64_t kMaxStrideBytes = cuuint64_t(1) << 40;

// Dimension i >= 1 of a map: extent and stride in elements.
struct Extent {
    int64_t size, stride;
};

fmha_status encode(const Driver *drv, CUtensorMap *map, fmha_dtype dtype, const void *base,
                   int64_t dim, int rank, const Extent *outer, const cuuint32_t *box,
                   const fmha_strides &strides, const char *name) {
    const int64_t bytes = 2;
    // The stride of a dimension of extent 1 is never followed (validation
    // stores 0 there); TMA still wants a non-zero multiple of 16 below 2^40,
    // so give it the tensor's whole span, as a packed layout would have,
    // capped at the largest stride TMA takes (a span past 1 TiB: batches far
    // apart in a sparse reservation). The H200's driver encodes 16 and
    // 2^40 - 16 for such a dimension alike, and refuses 2^40.
    int64_t span = dim * bytes;
    for (int i = 0; i < rank - 1; ++i)
        if (outer[i].size > 1 && outer[i].stride * outer[i].size * bytes > span)
            span = outer[i].stride * outer[i].size * bytes;
    span = std::min<int64_t>((span + 15) / 16 * 16, int64_t(kMaxStrideBytes) - 16);
    cuuint64_t sizes[kMaxRank] = {cuuint64_t(dim)};
    cuuint64_t byte_strides[kMaxRank - 1];
    cuuint32_t element_strides[kMaxRank] = {1, 1, 1, 1, 1};
    for (int i = 0; i < rank - 1; ++i) {
        sizes[i + 1] = cuuint64_t(outer[i].size);
        byte_strides[i] = outer[i].size == 1 ? cuuint64_t(span) : cuuint64_t(outer[i].stride * bytes);
    }
    // cuTensorMapEncodeTiled's limits, checked when the plan builds the maps
    // without pointers (map == nullptr), so that it declines what a run could
    // not encode (the other kernels address memory freely). A run encodes the
    // plan's dims and strides again, so it does not repeat the check.
    if (map == nullptr) {
        for (int i = 0; i < rank - 1; ++i) {
            if (sizes[i + 1] > kMaxExtent)
                return fail(FMHA_STATUS_NOT_SUPPORTED,
                            "descriptor: the Hopper kernel's TMA map of %s would have %llu "
                            "entries (rows, heads or pages) in one dimension, and TMA takes at "
                            "most 2^32 (the decode and portable kernels have no such limit)",
                            name, (unsigned long long)sizes[i + 1]);
            if (byte_strides[i] >= kMaxStrideBytes)
                return fail(FMHA_STATUS_NOT_SUPPORTED,
                            "descriptor.%s_strides is (batch %lld, seq %lld, head %lld) "
                            "elements: the Hopper kernel's TMA map would step %llu bytes, and "
                            "TMA takes strides below 2^40 bytes (the decode and portable kernels "
                            "take any)",
                            name, (long long)strides.batch, (long long)strides.seq,
                            (long long)strides.head, (unsigned long long)byte_strides[i]);
        }
        return FMHA_STATUS_SUCCESS;
    }
    const CUtensorMapDataType type = dtype == FMHA_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                              : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    CUresult res = drv->tensor_map_encode_tiled(
        map, type, cuuint32_t(rank), const_cast<void *>(base), sizes, byte_strides, box,
        element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (res != CUDA_SUCCESS) {
        driver_fail(*drv, res, "cuTensorMapEncodeTiled");
        return fail(FMHA_STATUS_DRIVER_ERROR, "tensor map for %s (strides %lld/%lld/%lld): %s",
                    name, (long long)strides.batch, (long long)strides.seq,
                    (long long)strides.head, fmha_last_error_message());
    }
    return FMHA_STATUS_SUCCESS;
}

}  // namespace

fmha_status encode_tensor_map(const Driver *drv, CUtensorMap *map, fmha_dtype dtype,
                              const void *base, int64_t dim, int64_t seqlen, int64_t heads,
                              int64_t batch, const fmha_strides &strides, int box_rows,
                              const char *name) {
    const Extent outer[3] = {{seqlen, strides.seq}, {heads, strides.head}, {batch, strides.batch}};
    const cuuint32_t box[4] = {64, cuuint32_t(box_rows), 1, 1};
    return encode(drv, map, dtype, base, dim, 4, outer, box, strides, name);
}

fmha_status encode_column_boxed_tensor_map(const Driver *drv, CUtensorMap *map, fmha_dtype dtype,
                                           const void *base, int64_t dim, int64_t seqlen,
                                           int64_t heads, int64_t batch,
                                           const fmha_strides &strides, int box_rows,
                                           const char *name) {
    const Extent outer[4] = {
        {seqlen, strides.seq}, {dim / 64, 64}, {heads, strides.head}, {batch, strides.batch}};
    const cuuint32_t box[5] = {64, cuuint32_t(box_rows), cuuint32_t(dim / 64), 1, 1};
    return encode(drv, map, dtype, base, 64, 5, outer, box, strides, name);
}

HeadFold group_boxed_head_fold(const fmha_strides &strides, int64_t dim, int64_t seqlen,
                               int64_t heads) {
    if (dim % 64 != 0 || seqlen % 8 != 0) return HeadFold::kNone;
    if (heads == 1 || strides.head == dim) return HeadFold::kColumns;
    if (strides.head == seqlen * strides.seq) return HeadFold::kGroups;
    return HeadFold::kNone;
}

fmha_status encode_group_boxed_tensor_map(const Driver *drv, CUtensorMap *map, fmha_dtype dtype,
                                          const void *base, int64_t dim, int64_t seqlen,
                                          int64_t heads, int64_t batch,
                                          const fmha_strides &strides, int box_rows,
                                          HeadFold fold, const char *name) {
    // The heads continue the column boxes (stride 64) or the 8-row groups
    // (stride 8 rows): one dimension for both, as `fold` says they allow.
    if (fold == HeadFold::kNone)
        return fail(FMHA_STATUS_INTERNAL_ERROR,
                    "tensor map for %s: its heads fold into neither pieces nor groups", name);
    const bool in_columns = fold == HeadFold::kColumns;
    const Extent outer[4] = {{8, strides.seq},
                             {(in_columns ? heads : 1) * dim / 64, 64},
                             {(in_columns ? 1 : heads) * seqlen / 8, 8 * strides.seq},
                             {batch, strides.batch}};
    const cuuint32_t box[5] = {64, 8, cuuint32_t(dim / 64), cuuint32_t(box_rows / 8), 1};
    return encode(drv, map, dtype, base, 64, 5, outer, box, strides, name);
}

fmha_status encode_grouped_tensor_map(const Driver *drv, CUtensorMap *map, fmha_dtype dtype,
                                      const void *base, int64_t dim, int64_t seqlen,
                                      int64_t heads, int64_t batch, const fmha_strides &strides,
                                      int64_t group, int64_t box_group, int box_rows,
                                      const char *name) {
    const Extent outer[4] = {{group, strides.head},
                             {seqlen, strides.seq},
                             {heads / group, strides.head * group},
                             {batch, strides.batch}};
    // box_rows / box_group positions of the whole group, or (a group wider
    // than the box) box_rows of its heads at one position.
    const int64_t box_heads = std::min<int64_t>(box_group, box_rows);
    const cuuint32_t box[5] = {64, cuuint32_t(box_heads), cuuint32_t(box_rows / box_heads), 1, 1};
    return encode(drv, map, dtype, base, dim, 5, outer, box, strides, name);
}

}  // namespace fmha
