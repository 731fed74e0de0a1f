#include "fwd_params.h"

#include <cmath>

#include "driver.h"
#include "errors.h"

namespace fmha {

static TensorStrides strides_of(const fmha_strides &s) { return {s.batch, s.seq, s.head}; }

FwdParams make_fwd_params(const Problem &p, const fmha_tensors &t, int block_m) {
    FwdParams f{};
    f.q = t.q;
    f.k = t.k;
    f.v = t.v;
    f.o = t.o;
    f.lse = p.write_lse ? t.lse : nullptr;
    f.q_stride = strides_of(p.q);
    f.k_stride = strides_of(p.k);
    f.v_stride = strides_of(p.v);
    f.o_stride = strides_of(p.o);
    f.causal = p.mask != FMHA_MASK_NONE;
    f.causal_offset = p.causal_offset();
    f.batch = static_cast<int32_t>(p.batch);
    f.num_q_heads = static_cast<int32_t>(p.num_q_heads);
    f.q_heads_per_kv = static_cast<int32_t>(p.num_q_heads / p.num_kv_heads);
    f.seqlen_q = static_cast<int32_t>(p.seqlen_q);
    f.seqlen_k = static_cast<int32_t>(p.seqlen_k);
    f.num_m_blocks = static_cast<int32_t>((p.seqlen_q + block_m - 1) / block_m);
    f.softmax_scale = p.softmax_scale;
    const float log2e = 1.4426950408889634f;
    // With a softcap the kernel scales inside tanh; the capped score is final.
    f.scale_log2 = p.softcap > 0.0f ? log2e : p.softmax_scale * log2e;
    f.softcap = p.softcap;
    f.softcap_scale = p.softcap > 0.0f ? p.softmax_scale / p.softcap : 0.0f;
    f.sinks = p.sinks ? t.sinks : nullptr;
    const int64_t diagonal = p.diagonal_offset();
    f.has_hi = p.mask != FMHA_MASK_NONE || p.window_right >= 0;
    f.hi_offset = p.mask != FMHA_MASK_NONE ? diagonal : diagonal + p.window_right;
    f.has_lo = p.window_left >= 0;
    f.lo_offset = diagonal - p.window_left;
    f.cu_seqlens_q = p.varlen_q ? t.cu_seqlens_q : nullptr;
    f.cu_seqlens_k = p.varlen_k ? t.cu_seqlens_k : nullptr;
    f.seqused_k = p.seqused_k ? t.seqused_k : nullptr;
    f.block_table = p.paged_kv ? t.block_table : nullptr;
    f.page_size = p.paged_kv ? p.page_size : 0;
    f.page_div = p.page_div;  // derived at plan time
    f.max_pages_per_seq = static_cast<int32_t>(p.max_pages_per_seq);
    f.num_pages = static_cast<int32_t>(p.num_pages);
    f.mask = p.mask;
    f.window_left = p.window_left;
    f.window_right = p.window_right;
    f.total_q = static_cast<int32_t>(p.total_q);
    f.total_k = static_cast<int32_t>(p.total_k);
    // LSE is [batch, heads, seqlen_q], or [heads, total_q] for packed rows.
    f.lse_batch_stride = p.varlen_q ? 0 : p.num_q_heads * p.seqlen_q;
    f.lse_head_stride = p.varlen_q ? p.total_q : p.seqlen_q;
    return f;
}

// A failed launch: a stream of another context, or a plan whose context was
// destroyed, is the caller's mistake; anything else the driver's. Every
// launch (fmha_run's kernels, split-KV combines, merges) comes through here.
static fmha_status launch_result(const Driver &drv, CUresult res, const char *call,
                                 const char *kernel_name) {
    if (res == CUDA_SUCCESS) return FMHA_STATUS_SUCCESS;
    driver_fail(drv, res, call);
    return fail(is_context_error(res) ? FMHA_STATUS_CONTEXT_MISMATCH : FMHA_STATUS_DRIVER_ERROR,
                "launching %s: %s (is the stream from the plan's context, and is that context "
                "still alive?)",
                kernel_name, fmha_last_error_message());
}

// cuLaunchKernelEx with the given attributes.
static fmha_status launch_ex(const Driver &drv, CUlaunchAttribute *attrs, unsigned num_attrs,
                             CUfunction fn, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                             unsigned threads, unsigned smem_bytes, CUstream stream, void *params,
                             const char *kernel_name) {
    CUlaunchConfig config{};
    config.gridDimX = grid_x;
    config.gridDimY = grid_y;
    config.gridDimZ = grid_z;
    config.blockDimX = threads;
    config.blockDimY = config.blockDimZ = 1;
    config.sharedMemBytes = smem_bytes;
    config.hStream = stream;
    config.attrs = attrs;
    config.numAttrs = num_attrs;
    void *args[] = {params};
    return launch_result(drv, drv.launch_kernel_ex(&config, fn, args, nullptr),
                         "cuLaunchKernelEx", kernel_name);
}

static CUlaunchAttribute programmatic_serialization() {
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    return attr;
}

fmha_status launch_dependent(const Driver &drv, bool dependent, CUfunction fn, unsigned grid_x,
                             unsigned grid_y, unsigned grid_z, unsigned threads,
                             unsigned smem_bytes, CUstream stream, void *params,
                             const char *kernel_name) {
    if (!dependent || drv.launch_kernel_ex == nullptr)
        return launch(drv, fn, grid_x, grid_y, grid_z, threads, smem_bytes, stream, params,
                      kernel_name);
    CUlaunchAttribute attr = programmatic_serialization();
    return launch_ex(drv, &attr, 1, fn, grid_x, grid_y, grid_z, threads, smem_bytes, stream,
                     params, kernel_name);
}

fmha_status launch_in_clusters(const Driver &drv, bool dependent, unsigned cluster_x, CUfunction fn,
                               unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned threads,
                               unsigned smem_bytes, CUstream stream, void *params,
                               const char *kernel_name) {
    if (drv.launch_kernel_ex == nullptr)  // the plan chose clusters only with it
        return fail(FMHA_STATUS_INTERNAL_ERROR, "launching %s in clusters: no cuLaunchKernelEx",
                    kernel_name);
    CUlaunchAttribute attrs[2] = {};
    attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[0].value.clusterDim.x = cluster_x;
    attrs[0].value.clusterDim.y = 1;
    attrs[0].value.clusterDim.z = 1;
    if (dependent) attrs[1] = programmatic_serialization();
    return launch_ex(drv, attrs, dependent ? 2 : 1, fn, grid_x, grid_y, grid_z, threads,
                     smem_bytes, stream, params, kernel_name);
}

fmha_status launch(const Driver &drv, CUfunction fn, unsigned grid_x, unsigned grid_y,
                   unsigned grid_z, unsigned threads, unsigned smem_bytes, CUstream stream,
                   void *params, const char *kernel_name) {
    void *args[] = {params};
    return launch_result(drv,
                         drv.launch_kernel(fn, grid_x, grid_y, grid_z, threads, 1, 1, smem_bytes,
                                           stream, args, nullptr),
                         "cuLaunchKernel", kernel_name);
}

}  // namespace fmha
