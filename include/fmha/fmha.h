/*
 * libfmha: fused multi-head attention for NVIDIA GPUs behind a stable C ABI.
 *
 * This is the one public header. It is C99, needs no CUDA header, and every
 * function is safe to call on a machine with no NVIDIA driver: such calls
 * return FMHA_STATUS_NO_DRIVER instead of failing to load or crashing.
 *
 * Usage, in the cuDNN / cuBLASLt style:
 *
 *     fmha_descriptor d;
 *     fmha_descriptor_init(&d, FMHA_DESCRIPTOR_VERSION);
 *     d.batch = 2; d.num_q_heads = 16; ...;
 *     fmha_plan *plan;
 *     if (fmha_create_plan(&plan, &d) != FMHA_STATUS_SUCCESS)
 *         fprintf(stderr, "%s\n", fmha_last_error_message());
 *     size_t ws; fmha_plan_workspace_size(plan, &ws);   // allocate it yourself
 *     fmha_tensors t; fmha_tensors_init(&t, FMHA_TENSORS_VERSION);
 *     t.q = q; t.k = k; t.v = v; t.o = o;
 *     fmha_run(plan, &t, workspace, ws, stream);     // async on `stream`
 *     fmha_destroy_plan(plan);
 *
 * ABI rules: enum values are explicit and never renumbered; struct fields are
 * only ever appended, and every struct starts with a `version` field that an
 * init function fills, so a caller built against an older header keeps
 * working with a newer library: a struct's layout changes only together with
 * its version number. Unknown (newer) versions are rejected. Before 1.0 the
 * version-1 layouts are those of the header of the installed release.
 */
#ifndef FMHA_FMHA_H
#define FMHA_FMHA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
 * Export and version
 * ====================================================================== */

#if defined(__GNUC__) && __GNUC__ >= 4
#define FMHA_API __attribute__((visibility("default")))
#else
#define FMHA_API
#endif

#define FMHA_VERSION_MAJOR 0
#define FMHA_VERSION_MINOR 1
#define FMHA_VERSION_PATCH 0
/** Single number, MAJOR*10000 + MINOR*100 + PATCH, as fmha_version() returns. */
#define FMHA_VERSION_NUMBER \
    (FMHA_VERSION_MAJOR * 10000 + FMHA_VERSION_MINOR * 100 + FMHA_VERSION_PATCH)

/** Run-time version of the loaded library, in FMHA_VERSION_NUMBER form.
 *  Compare it with FMHA_VERSION_NUMBER to detect a header/library mismatch. */
FMHA_API uint32_t fmha_version(void);

/** Run-time version as a static string such as "0.1.0". Never NULL. */
FMHA_API const char *fmha_version_string(void);

/* ======================================================================
 * Status codes and errors
 * ====================================================================== */

/** Every function that can fail returns one of these. Values are fixed. */
typedef enum fmha_status {
    FMHA_STATUS_SUCCESS = 0,
    /** A field or argument is invalid (null, zero, negative, inconsistent). */
    FMHA_STATUS_INVALID_ARGUMENT = 1,
    /** The problem is valid but this build or device has no kernel for it. */
    FMHA_STATUS_NOT_SUPPORTED = 2,
    /** A struct's `version` field is not one this library knows. */
    FMHA_STATUS_VERSION_MISMATCH = 3,
    /** libcuda.so.1 could not be loaded or lacks a needed entry point. */
    FMHA_STATUS_NO_DRIVER = 4,
    /** The driver loaded but reports no usable device (or bad ordinal). */
    FMHA_STATUS_NO_DEVICE = 5,
    /** A CUDA driver call failed; the message names the call and CUresult. */
    FMHA_STATUS_DRIVER_ERROR = 6,
    /** A pointer or stride violates the alignment the kernels need. */
    FMHA_STATUS_MISALIGNED = 7,
    /** fmha_run got less workspace than fmha_plan_workspace_size reported. */
    FMHA_STATUS_WORKSPACE_TOO_SMALL = 8,
    /** A host allocation failed. */
    FMHA_STATUS_OUT_OF_MEMORY = 9,
    /** No embedded cubin or PTX can run on this device's architecture. */
    FMHA_STATUS_NO_KERNEL_IMAGE = 10,
    /** The plan's CUDA context differs from the stream's or was destroyed. */
    FMHA_STATUS_CONTEXT_MISMATCH = 11,
    /** A bug in libfmha; please report it with the message. */
    FMHA_STATUS_INTERNAL_ERROR = 12
} fmha_status;

/** Static name of a status, e.g. "FMHA_STATUS_NOT_SUPPORTED". Never NULL;
 *  unknown values give "FMHA_STATUS_UNKNOWN". */
FMHA_API const char *fmha_status_string(fmha_status status);

/** Message of the last failing call made on this thread, naming the field,
 *  the value and the rule broken. Never NULL. Every function that returns a
 *  status clears it on entry, so after a success it is "". Valid until the
 *  next libfmha call on the same thread (bindings read it right after the
 *  failing call, on the same OS thread). */
FMHA_API const char *fmha_last_error_message(void);

/** Status of the last call made on this thread (SUCCESS after a success). */
FMHA_API fmha_status fmha_last_error_status(void);

/** Clears this thread's last error. */
FMHA_API void fmha_clear_last_error(void);

/* ======================================================================
 * Problem description
 * ====================================================================== */

/** Element type of Q, K, V and O. */
typedef enum fmha_dtype {
    FMHA_DTYPE_BF16 = 1,
    FMHA_DTYPE_FP16 = 2
} fmha_dtype;

/** Which keys a query may see. For row i of Q (0-based) and key j:
 *  TOP_LEFT:     j <= i                          (aligned at the start)
 *  BOTTOM_RIGHT: j <= i + seqlen_k - seqlen_q    (aligned at the end: the
 *                last query sees every key; the usual decode convention)
 *  A row that sees no key gives O = 0 and LSE = -inf. */
typedef enum fmha_mask {
    FMHA_MASK_NONE = 0,
    FMHA_MASK_CAUSAL_TOP_LEFT = 1,
    FMHA_MASK_CAUSAL_BOTTOM_RIGHT = 2
} fmha_mask;

/** Which kernel family a plan may pick. */
typedef enum fmha_kernel_family {
    /** The fastest kernel for the device (env FMHA_FORCE_KERNEL overrides). */
    FMHA_KERNEL_AUTO = 0,
    /** The portable mma.sync kernel, every architecture from sm_80 on. */
    FMHA_KERNEL_PORTABLE = 1,
    /** The Hopper TMA + wgmma kernel (sm_90 devices only). */
    FMHA_KERNEL_HOPPER = 2
} fmha_kernel_family;

/** Element strides of one 4-D tensor. Element (b, s, h, d) lives at
 *  base + b*batch + s*seq + h*head + d*dim. BSHD, BHSD and sliced views are
 *  all expressed this way. The last dimension must be contiguous (dim == 1);
 *  the other strides must be non-negative multiples of 8 elements (16 bytes)
 *  and may be 0 to broadcast an input (never the output). The stride of a
 *  dimension of size 1 is never followed and is not checked. */
typedef struct fmha_strides {
    int64_t batch;
    int64_t seq;
    int64_t head;
    int64_t dim;   /**< Must be 1; present so a strided last dim is caught. */
} fmha_strides;

/** Bits of fmha_descriptor.flags. */
#define FMHA_FLAG_WRITE_LSE 0x1u /**< fmha_run writes fmha_tensors.lse. */
/** Attention sinks (descriptor version 2): fmha_tensors.sinks holds one float32
 *  logit per query head, in the units of the scaled scores, that joins every
 *  row's softmax denominator (but has no value row). LSE then includes it, and
 *  a row that sees no key gives O = 0 and LSE = its head's sink. */
#define FMHA_FLAG_SINKS 0x2u

/** Version 1: fields up to reserved0. Version 2 appends window_left,
 *  window_right and softcap (and allows FMHA_FLAG_SINKS). */
#define FMHA_DESCRIPTOR_VERSION 2

/** The attention problem. Fill with fmha_descriptor_init, then set fields.
 *  Shapes: Q [batch, seqlen_q, num_q_heads, head_dim],
 *          K [batch, seqlen_k, num_kv_heads, head_dim],
 *          V [batch, seqlen_k, num_kv_heads, head_dim_v],
 *          O [batch, seqlen_q, num_q_heads, head_dim_v]   (logical order;
 *          the strides give the memory order),
 *          LSE (optional) float32 [batch, num_q_heads, seqlen_q], contiguous,
 *          natural-log log-sum-exp of the scaled scores of each row. */
typedef struct fmha_descriptor {
    uint32_t version;      /**< FMHA_DESCRIPTOR_VERSION the caller was built with. */
    int32_t dtype;         /**< fmha_dtype. */
    int64_t batch;         /**< >= 1. */
    int64_t num_q_heads;   /**< >= 1, a multiple of num_kv_heads. */
    int64_t num_kv_heads;  /**< >= 1; == num_q_heads is MHA, 1 is MQA, else GQA:
                                query head h reads KV head h / (num_q_heads / num_kv_heads). */
    int64_t seqlen_q;      /**< >= 1. */
    int64_t seqlen_k;      /**< >= 1. */
    int64_t head_dim;      /**< Head dim of Q and K: 64, 96, 128 or 256. */
    int64_t head_dim_v;    /**< Head dim of V and O; 0 means head_dim. This
                                version supports only head_dim_v == head_dim. */
    fmha_strides q_strides;
    fmha_strides k_strides;
    fmha_strides v_strides;
    fmha_strides o_strides;
    float softmax_scale;   /**< Multiplies QK^T; 0 means 1/sqrt(head_dim);
                                negative, infinite or NaN is INVALID_ARGUMENT. */
    int32_t mask;          /**< fmha_mask. */
    uint32_t flags;        /**< FMHA_FLAG_* bits. */
    int32_t kernel;        /**< fmha_kernel_family; default AUTO. */
    /** CUDA device ordinal used when no CUDA context is current on the
     *  calling thread (its primary context is retained by the plan). When a
     *  context is current, its device is used and this field is ignored. */
    int32_t device;
    int32_t reserved0;     /**< Must be 0. */
    /* ---- version 2 ---- */
    /** Sliding window: row i sees key j only if d(i) - window_left <= j <=
     *  d(i) + window_right, where the diagonal d(i) = i under
     *  CAUSAL_TOP_LEFT and i + seqlen_k - seqlen_q otherwise. -1 means
     *  unbounded on that side; a causal mask already bounds the right side. */
    int32_t window_left;
    int32_t window_right;
    /** > 0: each scaled score s becomes softcap * tanh(s / softcap) before
     *  masking and softmax (logit soft-capping). 0: off. */
    float softcap;
    int32_t reserved1;     /**< Must be 0. */
} fmha_descriptor;

/** Fills `desc` with defaults for `version` (pass FMHA_DESCRIPTOR_VERSION; an
 *  older version fills only that version's fields, so an older, shorter
 *  struct is never overrun):
 *  every stride 0 except `dim` = 1 (set the others, e.g. with
 *  fmha_strides_bshd), AUTO kernel, device 0, no mask, dtype BF16, head_dim_v
 *  0 (same as head_dim), softmax_scale 0 (1/sqrt(head_dim)), no window
 *  (-1, -1), no softcap. Returns VERSION_MISMATCH for an unknown version. */
FMHA_API fmha_status fmha_descriptor_init(fmha_descriptor *desc, uint32_t version);

/** Convenience: sets a tensor's strides for the BSHD ([batch, seq, heads,
 *  dim], contiguous) layout. */
FMHA_API fmha_status fmha_strides_bshd(fmha_strides *out, int64_t seqlen,
                                       int64_t num_heads, int64_t head_dim);

/** Convenience: sets a tensor's strides for the BHSD ([batch, heads, seq,
 *  dim], contiguous) layout. */
FMHA_API fmha_status fmha_strides_bhsd(fmha_strides *out, int64_t seqlen,
                                       int64_t num_heads, int64_t head_dim);

/* ======================================================================
 * Support query (no side effects)
 * ====================================================================== */

/** Pass as `sm` to fmha_check_support to skip every device-dependent check. */
#define FMHA_SM_ANY 0
/** Pass as `sm` to check against the device a plan would use now. */
#define FMHA_SM_CURRENT_DEVICE (-1)

/** Says whether `desc` is valid and supported, without creating anything.
 *  `sm` is a compute capability as major*10+minor (80, 86, 90, 100, 120...),
 *  FMHA_SM_ANY, or FMHA_SM_CURRENT_DEVICE (which needs the driver). On
 *  failure the last error message says which field breaks which rule. */
FMHA_API fmha_status fmha_check_support(const fmha_descriptor *desc, int32_t sm);

/* ======================================================================
 * Plans
 * ====================================================================== */

/** Opaque plan: a validated problem bound to a CUDA context and kernel. */
typedef struct fmha_plan fmha_plan;

/** Validates `desc`, picks the device (see fmha_descriptor.device) and a
 *  kernel, and loads that kernel's module into the context (once per
 *  context; cached). Slow-ish: create plans ahead of time, not per call.
 *  On failure *plan is set to NULL. */
FMHA_API fmha_status fmha_create_plan(fmha_plan **plan, const fmha_descriptor *desc);

/** Releases the plan. NULL is ignored. May be called from any thread, once
 *  no other thread is inside a call using the plan; runs already enqueued
 *  are unaffected (the kernels do not reference the plan). */
FMHA_API void fmha_destroy_plan(fmha_plan *plan);

/** Bytes of device workspace fmha_run needs for this plan (may be 0). */
FMHA_API fmha_status fmha_plan_workspace_size(const fmha_plan *plan, size_t *bytes);

#define FMHA_PLAN_INFO_VERSION 1

/** What a plan chose, for logs and tests. */
typedef struct fmha_plan_info {
    uint32_t version;         /**< FMHA_PLAN_INFO_VERSION. */
    int32_t kernel_family;    /**< fmha_kernel_family actually chosen. */
    const char *kernel_name;  /**< Static string, e.g. "fmha_fwd_portable_bf16_hd128". */
    int32_t device;           /**< Device ordinal of the plan's context. */
    int32_t device_sm;        /**< Device compute capability, major*10+minor. */
    int32_t image_sm;         /**< Arch of the loaded image (90 for sm_90a). */
    int32_t image_is_ptx;     /**< 1 when the driver JIT-compiled embedded PTX. */
    int32_t tile_m;           /**< Query rows per CTA tile. */
    int32_t tile_n;           /**< Key rows per inner-loop tile. */
    int32_t threads_per_cta;
    int32_t shared_memory_bytes;
    uint64_t workspace_bytes;
} fmha_plan_info;

/** Fills `info` (set info->version first, e.g. with fmha_plan_info_init). */
FMHA_API fmha_status fmha_plan_get_info(const fmha_plan *plan, fmha_plan_info *info);

/** Sets info->version and zeroes the rest. */
FMHA_API fmha_status fmha_plan_info_init(fmha_plan_info *info, uint32_t version);

/* ======================================================================
 * Running
 * ====================================================================== */

/** A CUDA stream: pass a CUstream or cudaStream_t (both are pointers to
 *  struct CUstream_st), or NULL for the legacy default stream. */
struct CUstream_st;
typedef struct CUstream_st *fmha_stream;

/** Version 1: q, k, v, o, lse. Version 2 appends sinks. */
#define FMHA_TENSORS_VERSION 2

/** Device pointers for one run. q, k, v and o must be 16-byte aligned, lse
 *  and sinks 4-byte aligned. */
typedef struct fmha_tensors {
    uint32_t version;   /**< FMHA_TENSORS_VERSION. */
    uint32_t reserved0; /**< Must be 0. */
    const void *q;
    const void *k;
    const void *v;
    void *o;
    float *lse;         /**< Required iff FMHA_FLAG_WRITE_LSE, else ignored. */
    /* ---- version 2 ---- */
    const float *sinks; /**< float32 [num_q_heads]; required iff FMHA_FLAG_SINKS. */
} fmha_tensors;

/** Sets t->version and zeroes the pointers. */
FMHA_API fmha_status fmha_tensors_init(fmha_tensors *t, uint32_t version);

/** Enqueues attention on `stream`. Never allocates, never synchronizes and
 *  is safe inside CUDA graph capture. The stream must belong to the plan's
 *  context. One plan may be run concurrently from several threads on
 *  several streams, each run with its own workspace (runs in flight must not
 *  share one). Errors in the arguments are reported before anything is
 *  enqueued; kernel faults surface as usual on the stream. */
FMHA_API fmha_status fmha_run(const fmha_plan *plan, const fmha_tensors *tensors,
                              void *workspace, size_t workspace_bytes,
                              fmha_stream stream);

/* ======================================================================
 * Build and driver introspection
 * ====================================================================== */

/** Writes up to `capacity` architectures (major*10+minor) that this build
 *  embeds machine code for, in ascending order, and returns how many there
 *  are in total. `archs` may be NULL when capacity is 0. */
FMHA_API int32_t fmha_embedded_archs(int32_t *archs, int32_t capacity);

/** Virtual architecture of the embedded PTX (e.g. 80), or 0 if none. */
FMHA_API int32_t fmha_embedded_ptx_arch(void);

/** Loads the driver if needed and reports its version (e.g. 13000).
 *  Returns NO_DRIVER when libcuda.so.1 is missing. The environment variable
 *  FMHA_LIBCUDA names another path to load instead. */
FMHA_API fmha_status fmha_driver_version(int32_t *version);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FMHA_FMHA_H */
