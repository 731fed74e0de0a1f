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
    /** The plan's CUDA context differs from the stream's or was destroyed
     *  (a launch that fails with CUDA_ERROR_INVALID_HANDLE,
     *  CUDA_ERROR_INVALID_CONTEXT or CUDA_ERROR_CONTEXT_IS_DESTROYED). */
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
 *  With variable lengths (varlen, seqused_k, paged) seqlen_q and seqlen_k
 *  here are the sequence's own lengths. A row that sees no key gives O = 0
 *  and LSE = -inf. */
typedef enum fmha_mask {
    FMHA_MASK_NONE = 0,
    FMHA_MASK_CAUSAL_TOP_LEFT = 1,
    FMHA_MASK_CAUSAL_BOTTOM_RIGHT = 2
} fmha_mask;

/** Which kernel family a plan may pick. */
typedef enum fmha_kernel_family {
    /** The fastest kernel for the device (env FMHA_FORCE_KERNEL overrides). */
    FMHA_KERNEL_AUTO = 0,
    /** The portable mma.sync kernel, every architecture from sm_80 on. It
     *  splits the keys (num_splits) as asked, or by itself where its grid
     *  would not fill two CTAs per SM once and the keys are at least 512:
     *  min(2 x SMs / CTAs, seqlen_k / 256, 64) parts. */
    FMHA_KERNEL_PORTABLE = 1,
    /** The Hopper TMA + wgmma kernel (sm_90 devices only). Queries of up to
     *  256 positions get the query heads of a KV head packed into one tile
     *  (2-64 of them, 2-128 at head_dim 512, padded to a power of two), and
     *  their keys may be split. Reads a paged KV cache of any page_size:
     *  multiples of 16 rows (32 at head_dim 512) in TMA boxes, other sizes
     *  row by row. Its TMA maps take strides below 2^40 bytes and at most
     *  2^32 entries per dimension; the stride of a dimension of extent 1
     *  (the batch of packed Q, the head of a single KV head) is never
     *  stepped and does not count. Beyond, AUTO takes another kernel and
     *  HOPPER is NOT_SUPPORTED at plan creation, naming the strides. Zero
     *  (broadcast) strides of Q, K and V are NOT_SUPPORTED the same way. */
    FMHA_KERNEL_HOPPER = 2,
    /** The decode kernel (mma.sync, sm_80 on): few query rows per sequence,
     *  GQA heads packed into one tile, split-KV. AUTO picks it for up to 16
     *  query rows per KV head (seqlen_q x num_q_heads / num_kv_heads; on
     *  devices where the Hopper kernel does not run, for short seqlen_q; at
     *  head_dim 512 only over pages the Hopper kernel gathers row by row,
     *  sizes not a multiple of 32), when num_splits >= 2, and for head_dim
     *  512 where the Hopper kernel does not run. Its grid takes m_tiles x
     *  num_kv_heads <= 65535, where m_tiles = ceil(seqlen_q x num_q_heads /
     *  num_kv_heads / 16), and batch <= 65535. Shared memory per block:
     *  213,248 bytes at head_dim 512, 205,056 at 256, 102,656 at 128 with a
     *  contiguous cache (69,888 over pages), 100,608 at 64 and 77,056 at 96;
     *  on sm_90 also 102,656 at 64 and 153,856 at 96 (tiles reading two KV
     *  heads at once from a contiguous cache) and 135,424 (the two-CTA
     *  clusters of 2-split hd128 grids of one CTA per SM). Where the device
     *  offers less per block, smaller tiles: 53,504 bytes at 128 with a
     *  contiguous cache, 73,984 at 256 and 147,712 at 512 (contiguous or
     *  paged). So every head_dim runs on it on devices with 163 KB or more
     *  (sm_80/87, sm_90, sm_100/103), and all but 512 on sm_86/89/120 (99
     *  KB). Where it cannot run a problem (those limits), AUTO takes the
     *  Hopper kernel where that runs it, else the portable kernel (split as
     *  asked); head_dim 512 is then NOT_SUPPORTED (as is DECODE itself).
     *  Env FMHA_SHARED_MEMORY_LIMIT (bytes) lowers the shared memory per
     *  block plans assume, never raising it: a large GPU then runs the tiles
     *  chosen for smaller ones, as the tests do. */
    FMHA_KERNEL_DECODE = 3
} fmha_kernel_family;

/** Element strides of one 4-D tensor. Element (b, s, h, d) lives at
 *  base + b*batch + s*seq + h*head + d*dim. BSHD, BHSD and sliced views are
 *  all expressed this way. The last dimension must be contiguous (dim == 1;
 *  otherwise NOT_SUPPORTED); the other strides must be non-negative
 *  (negative ones are NOT_SUPPORTED) multiples of 8 elements (16 bytes;
 *  otherwise MISALIGNED) and may be 0 to broadcast an input. O's may not
 *  overlap: taken by increasing stride, each of its dimensions must step
 *  past the span of the smaller ones (with the last dimension's head_dim
 *  elements), else INVALID_ARGUMENT. The stride of a dimension of size 1 is
 *  never followed and is not checked. Every kernel forms offsets in 64
 *  bits, so an element may lie any distance up to 2^60 elements (2 EiB)
 *  from its base (the tests place them hundreds of GiB away); strides
 *  reaching farther are INVALID_ARGUMENT.
 *  WARNING: 0 is a valid stride for Q, K and V, and fmha_descriptor_init sets
 *  batch, seq and head to 0. A stride left unset is therefore not an error:
 *  it silently broadcasts (e.g. K's and V's row 0 read for every key). Set
 *  every tensor's strides, e.g. with fmha_strides_bshd. */
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
/** Variable-length queries (descriptor version 3): Q and O are packed
 *  [total_q, heads, dim]. Sequence b owns rows cu_seqlens_q[b] to
 *  cu_seqlens_q[b+1]-1 (fmha_tensors.cu_seqlens_q, int32, batch+1 entries,
 *  starting at 0, non-decreasing, at most total_q). Row r of a packed tensor
 *  is at base + r*seq + h*head (the batch stride is not used). seqlen_q is the
 *  maximum length and no sequence may be longer (the rows of one that is are
 *  left unspecified). Zero-length sequences are allowed; rows past
 *  cu_seqlens_q[batch] are not touched. Entries outside [0, total_q] are
 *  clamped into it: a broken array gives wrong rows, never an access outside
 *  Q or O. total_q may be a capacity (any value >= cu_seqlens_q[batch]), so
 *  one plan serves every batch composition up to it. With FMHA_FLAG_WRITE_LSE
 *  the LSE is float32 [num_q_heads, total_q]. */
#define FMHA_FLAG_VARLEN_Q 0x4u
/** Variable-length keys (version 3): fmha_tensors.cu_seqlens_k (int32,
 *  batch+1 entries) gives each sequence's key count as a difference, and
 *  without FMHA_FLAG_PAGED_KV also its rows of K and V packed
 *  [total_k, kv_heads, dim] (entries clamped to [0, total_k], as for Q).
 *  seqlen_k is the maximum length; a longer sequence uses only its first
 *  seqlen_k keys, and a negative difference (or, from a broken array, one
 *  past 2^31-1) counts as none. Masks and windows use each sequence's own
 *  lengths: the bottom-right diagonal of sequence b is len_k(b) - len_q(b).
 *  Key rows a sequence does not use may hold anything (NaN included). */
#define FMHA_FLAG_VARLEN_K 0x8u
/** Keys used per sequence (version 3): fmha_tensors.seqused_k (int32, batch
 *  entries) says how many keys sequence b uses (e.g. the filled part of a
 *  cache). It overrides the length from cu_seqlens_k or seqlen_k; a larger
 *  value is clamped to seqlen_k and, for packed K/V, to the sequence's
 *  cu_seqlens_k length, a negative one to 0 (a host copy given to
 *  fmha_check_block_table must instead hold each value in [0, seqlen_k]).
 *  The rows past it must still be memory of K and V as the descriptor
 *  describes them (a dense cache: seqlen_k rows per sequence): the decode
 *  kernel may read them, and never uses them. */
#define FMHA_FLAG_SEQUSED_K 0x10u
/** Paged KV cache (version 3): K and V are [num_pages, page_size,
 *  kv_heads, dim] with k_strides.batch / v_strides.batch the page stride;
 *  any strides, so a pool laid out [num_pages, kv_heads, page_size, dim] is
 *  described by its head and row strides (pages of 16 rows read fastest in
 *  these two packed layouts). Key j of sequence b is row j % page_size of page
 *  block_table[b * max_pages_per_seq + j / page_size] (fmha_tensors.
 *  block_table, int32, row-major [batch, max_pages_per_seq]). Key counts
 *  come from seqused_k, cu_seqlens_k or seqlen_k, in that order. Contract:
 *  every entry a sequence uses is in [0, num_pages); the decode and
 *  portable kernels clamp an entry outside that range into it and the
 *  Hopper kernel reads zeros for it (no fault, but a wrong result), and
 *  fmha_check_block_table checks a host copy. */
#define FMHA_FLAG_PAGED_KV 0x20u

/** Version 1: fields up to reserved0. Version 2 appends window_left,
 *  window_right and softcap (and allows FMHA_FLAG_SINKS). Version 3 appends
 *  the varlen, paged-KV and split-KV fields (and allows FMHA_FLAG_VARLEN_Q,
 *  FMHA_FLAG_VARLEN_K, FMHA_FLAG_SEQUSED_K and FMHA_FLAG_PAGED_KV). */
#define FMHA_DESCRIPTOR_VERSION 3

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
    int64_t head_dim;      /**< Head dim of Q and K: 64, 96, 128, 256, or 512
                                (512: not the portable kernel; the Hopper
                                kernel on sm_90, and the decode kernel on
                                devices with sm_90 / sm_100-class shared
                                memory, up to its 65535-tile grid; see
                                FMHA_KERNEL_DECODE). */
    int64_t head_dim_v;    /**< Head dim of V and O; 0 means head_dim. This
                                version supports only head_dim_v == head_dim. */
    /** Strides of each tensor, in elements. fmha_descriptor_init leaves
     *  batch, seq and head 0, which for Q, K and V is a valid broadcast, not
     *  an error: set all four (see fmha_strides). */
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
     *  context is current, the plan uses that context and its device, and
     *  this field is ignored; that context is not retained: the caller keeps
     *  it alive for the plan's lifetime (a run in a destroyed context
     *  returns CONTEXT_MISMATCH). */
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
    /* ---- version 3 ---- */
    /** FMHA_FLAG_VARLEN_Q: rows of the packed Q and O (>= cu_seqlens_q[batch]). */
    int64_t total_q;
    /** FMHA_FLAG_VARLEN_K without PAGED_KV: rows of the packed K and V. */
    int64_t total_k;
    /** FMHA_FLAG_PAGED_KV: pages in the K and V caches. */
    int64_t num_pages;
    /** FMHA_FLAG_PAGED_KV: columns of the block table; max_pages_per_seq *
     *  page_size must cover seqlen_k. */
    int64_t max_pages_per_seq;
    /** FMHA_FLAG_PAGED_KV: key rows per page, >= 1 (any size; multiples of
     *  16 read fastest). */
    int32_t page_size;
    /** Split-KV: the keys of each (sequence, head) are cut into this many
     *  parts, computed in parallel and combined exactly through their LSE.
     *  0: automatic (the plan picks from the grid and the device's SMs;
     *  see fmha_plan_info.num_splits; the decode kernel, the Hopper kernel
     *  for queries of up to 256 positions, and the portable kernel where its
     *  grid would not fill two CTAs per SM, may split), 1: off, 2..128: exactly
     *  that many (AUTO then takes the decode kernel, or where that cannot
     *  run the problem the Hopper or portable kernel as for
     *  FMHA_KERNEL_DECODE above; HOPPER and PORTABLE split too). The
     *  partial results live in the plan's workspace
     *  (fmha_plan_workspace_size), except where the parts of a
     *  (sequence, KV head) merge on chip and the plan needs none. */
    int32_t num_splits;
} fmha_descriptor;

/** Fills `desc` with defaults for `version` (pass FMHA_DESCRIPTOR_VERSION; an
 *  older version fills only that version's fields, so an older, shorter
 *  struct is never overrun):
 *  every stride 0 except `dim` = 1, AUTO kernel, device 0, no mask, dtype
 *  BF16, head_dim_v 0 (same as head_dim), softmax_scale 0 (1/sqrt(head_dim)),
 *  no window (-1, -1), no softcap. Returns VERSION_MISMATCH for an unknown
 *  version.
 *  WARNING: the zero strides are valid broadcasts for Q, K and V, so a
 *  tensor whose strides are not set afterwards (e.g. with fmha_strides_bshd)
 *  is not rejected: the plan computes with its first row repeated. */
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
 *  FMHA_SM_ANY, or FMHA_SM_CURRENT_DEVICE (which needs the driver). The
 *  device check includes the chosen kernel's shared memory per block: for
 *  FMHA_SM_CURRENT_DEVICE against the device's opt-in maximum, as
 *  fmha_create_plan does; for an `sm`, against its architecture's (163 KB
 *  on sm_80/87, 227 KB on sm_90/100/103, 99 KB on sm_86/89/120/121 and,
 *  conservatively, on any other). On failure the last error message says
 *  which field breaks which rule. */
FMHA_API fmha_status fmha_check_support(const fmha_descriptor *desc, int32_t sm);

/* ======================================================================
 * Plans
 * ====================================================================== */

/** Opaque plan: a validated problem bound to a CUDA context and kernel. */
typedef struct fmha_plan fmha_plan;

/** Validates `desc`, picks the device (see fmha_descriptor.device) and a
 *  kernel, and loads that kernel's module into the context (once per
 *  context; cached). Slow-ish: create plans ahead of time, not per call.
 *  Thread-safe: threads creating plans on different contexts (one per GPU)
 *  load their modules concurrently. On failure *plan is set to NULL. */
FMHA_API fmha_status fmha_create_plan(fmha_plan **plan, const fmha_descriptor *desc);

/** Releases the plan. NULL is ignored. May be called from any thread, once
 *  no other thread is inside a call using the plan; runs already enqueued
 *  are unaffected (the kernels do not reference the plan). */
FMHA_API void fmha_destroy_plan(fmha_plan *plan);

/** Bytes of device workspace fmha_run needs for this plan (may be 0). The
 *  workspace passed to fmha_run must be 16-byte aligned (cuMemAlloc's and
 *  every caching allocator's blocks are), else MISALIGNED. */
FMHA_API fmha_status fmha_plan_workspace_size(const fmha_plan *plan, size_t *bytes);

/** Version 2 appends num_splits. */
#define FMHA_PLAN_INFO_VERSION 2

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
    /* ---- version 2 ---- */
    int32_t num_splits;       /**< Split-KV parts per (sequence, head); 1 = none. */
    int32_t reserved0;
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

/** Version 1: q, k, v, o, lse. Version 2 appends sinks. Version 3 appends
 *  the varlen and paged-KV index arrays. */
#define FMHA_TENSORS_VERSION 3

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
    /* ---- version 3: int32 device arrays, 4-byte aligned ---- */
    const int32_t *cu_seqlens_q; /**< [batch + 1]; required iff FMHA_FLAG_VARLEN_Q. */
    const int32_t *cu_seqlens_k; /**< [batch + 1]; required iff FMHA_FLAG_VARLEN_K. */
    const int32_t *seqused_k;    /**< [batch]; required iff FMHA_FLAG_SEQUSED_K. */
    const int32_t *block_table;  /**< [batch, max_pages_per_seq]; required iff
                                      FMHA_FLAG_PAGED_KV. */
} fmha_tensors;

/** Sets t->version and zeroes the pointers. */
FMHA_API fmha_status fmha_tensors_init(fmha_tensors *t, uint32_t version);

/** Enqueues attention on `stream`. Never allocates, never synchronizes and
 *  is safe inside CUDA graph capture. The stream must belong to the plan's
 *  context. One plan may be run concurrently from several threads on
 *  several streams, each run with its own workspace (runs in flight must not
 *  share one; at least fmha_plan_workspace_size bytes, 16-byte aligned).
 *  Errors in the arguments are reported before anything is enqueued;
 *  kernel faults surface as usual on the stream. A NaN or infinity in Q,
 *  or in a key or value row a query sees, leaves that query's O and LSE
 *  unspecified (NaN, 0 or -inf, by kernel and split count); the run still
 *  touches nothing outside the tensors. On sm_90 and newer, from
 *  cubins built for them (not from JIT-compiled compute_80 PTX), the decode
 *  kernel and the split-KV combine use programmatic dependent launch: they
 *  may be scheduled while the previous work in `stream` drains, wait for it
 *  to complete before touching memory, and let a following kernel launched
 *  the same way be scheduled early (stream order is kept). */
FMHA_API fmha_status fmha_run(const fmha_plan *plan, const fmha_tensors *tensors,
                              void *workspace, size_t workspace_bytes,
                              fmha_stream stream);

/** Checks a host copy of a paged-KV block table against `desc` (which must
 *  set FMHA_FLAG_PAGED_KV): every entry that a sequence's keys use must lie
 *  in [0, num_pages). `host_seqlens_k` (batch entries) gives each
 *  sequence's key count, each in [0, seqlen_k] (INVALID_ARGUMENT names the
 *  first one outside; unlike the kernels, which clamp seqused_k, this
 *  check never reads past a row of the table); NULL means seqlen_k for all.
 *  Entries past a sequence's last page are not read. Pure host code: no
 *  driver needed, and the environment (FMHA_FORCE_KERNEL) is not read.
 *  INVALID_ARGUMENT names the first bad entry as block_table[b][i]. */
FMHA_API fmha_status fmha_check_block_table(const fmha_descriptor *desc,
                                            const int32_t *host_block_table,
                                            const int32_t *host_seqlens_k);

/* ======================================================================
 * Merging partial results (cascade and context-parallel attention)
 * ====================================================================== */

#define FMHA_MERGE_DESCRIPTOR_VERSION 1

/** Most parts fmha_run_merge combines in one call. */
#define FMHA_MERGE_MAX_PARTS 64

/** A merge: `num_parts` partial attention results over disjoint sets of keys
 *  of the same queries, each an O [batch, seqlen_q, num_heads, head_dim]
 *  (dtype, strides part_strides) and its float32 LSE [batch, num_heads,
 *  seqlen_q] (contiguous, natural log, as fmha_run writes with
 *  FMHA_FLAG_WRITE_LSE), combine into the exact attention over the union:
 *  O = sum_p exp(LSE_p - LSE) O_p with LSE = log sum_p exp(LSE_p). A part
 *  whose LSE is -inf (it saw no key) contributes nothing; a row no part saw
 *  gives O = 0 and LSE = -inf. The O of a part whose LSE is -inf is not
 *  read, so it may hold anything. A NaN or +inf LSE in any part makes that
 *  row NaN (O and LSE), so that a corrupt part shows. fmha_plan_get_info on
 *  a merge plan reports kernel_family AUTO, the merge kernel's name and
 *  num_splits = num_parts. */
typedef struct fmha_merge_descriptor {
    uint32_t version;      /**< FMHA_MERGE_DESCRIPTOR_VERSION. */
    int32_t dtype;         /**< fmha_dtype of the parts' O and of the output O. */
    int64_t batch;         /**< >= 1. */
    int64_t seqlen_q;      /**< >= 1. */
    int64_t num_heads;     /**< >= 1. */
    int64_t head_dim;      /**< A multiple of 8, from 8 to 512. */
    fmha_strides part_strides; /**< Strides of every part's O. */
    fmha_strides o_strides;    /**< Strides of the output O. */
    int32_t num_parts;     /**< 1 to FMHA_MERGE_MAX_PARTS. */
    uint32_t flags;        /**< FMHA_FLAG_WRITE_LSE: also write the merged LSE. */
    int32_t device;        /**< As fmha_descriptor.device. */
    int32_t reserved0;     /**< Must be 0. */
} fmha_merge_descriptor;

/** Fills `desc` with defaults for `version`: BF16, strides 0 except dim = 1,
 *  device 0, no flags. Set part_strides: 0 is a valid broadcast for the
 *  parts, so left unset it is not rejected. */
FMHA_API fmha_status fmha_merge_descriptor_init(fmha_merge_descriptor *desc,
                                                uint32_t version);

/** Creates a plan that merges partial results (free it with
 *  fmha_destroy_plan). fmha_run refuses it; use fmha_run_merge. */
FMHA_API fmha_status fmha_create_merge_plan(fmha_plan **plan,
                                            const fmha_merge_descriptor *desc);

/** Enqueues the merge on `stream`. `o_parts` and `lse_parts` are host arrays
 *  of num_parts device pointers (copied at the call; O pointers 16-byte
 *  aligned, LSE 4-byte); `lse` is required iff FMHA_FLAG_WRITE_LSE. The
 *  output may alias a part only if it is that same tensor with the same
 *  strides. Never allocates or synchronizes; safe in graph capture.
 *  Launched as a programmatic dependent where fmha_run's decode kernel is. */
FMHA_API fmha_status fmha_run_merge(const fmha_plan *plan, const void *const *o_parts,
                                    const float *const *lse_parts, void *o, float *lse,
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
