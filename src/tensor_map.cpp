#include "tensor_map.h"

#include "errors.h"

namespace fmha {

fmha_status encode_tensor_map(const Driver &drv, CUtensorMap *map, fmha_dtype dtype,
                              const void *base, int64_t dim, int64_t seqlen, int64_t heads,
                              int64_t batch, const fmha_strides &strides, int box_rows,
                              const char *name) {
    const int64_t bytes = 2;
    cuuint64_t sizes[4] = {cuuint64_t(dim), cuuint64_t(seqlen), cuuint64_t(heads),
                           cuuint64_t(batch)};
    // The stride of a dimension of extent 1 is never followed (validation
    // stores 0 there); TMA still wants a non-zero multiple of 16, so give it
    // the tensor's whole span, as a packed layout would have.
    int64_t span = dim * bytes;
    const int64_t extents[3] = {seqlen, heads, batch};
    const int64_t element_strides_3[3] = {strides.seq, strides.head, strides.batch};
    for (int i = 0; i < 3; ++i)
        if (extents[i] > 1 && element_strides_3[i] * extents[i] * bytes > span)
            span = element_strides_3[i] * extents[i] * bytes;
    span = (span + 15) / 16 * 16;
    auto stride_of = [&](int64_t stride, int64_t extent) -> cuuint64_t {
        return extent == 1 ? cuuint64_t(span) : cuuint64_t(stride * bytes);
    };
    cuuint64_t byte_strides[3] = {stride_of(strides.seq, seqlen), stride_of(strides.head, heads),
                                  stride_of(strides.batch, batch)};
    cuuint32_t box[4] = {64, cuuint32_t(box_rows), 1, 1};
    cuuint32_t element_strides[4] = {1, 1, 1, 1};
    const CUtensorMapDataType type = dtype == FMHA_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                              : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    CUresult res = drv.tensor_map_encode_tiled(
        map, type, 4, const_cast<void *>(base), sizes, byte_strides, box, element_strides,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (res != CUDA_SUCCESS) {
        driver_fail(drv, res, "cuTensorMapEncodeTiled");
        return fail(FMHA_STATUS_DRIVER_ERROR, "tensor map for %s (strides %lld/%lld/%lld): %s",
                    name, (long long)strides.batch, (long long)strides.seq,
                    (long long)strides.head, fmha_last_error_message());
    }
    return FMHA_STATUS_SUCCESS;
}

}  // namespace fmha
