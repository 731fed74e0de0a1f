/*
 * fmha_example: the CPU-side path of libfmha from plain C99.
 *
 * Describes a small causal GQA prefill and a paged-KV decode step (the
 * serving form: one new token per sequence against a vLLM-style cache of
 * 16-row pages), asks whether they are supported, checks a block table on
 * the host, and, when a CUDA driver and device are present, creates the
 * plans and prints what they chose (kernel, split count, workspace). It allocates no device memory and needs no CUDA header or
 * runtime: libfmha loads the driver itself.
 *
 * Exit status: 0 when everything that could be tried on this machine
 * worked (including "no driver" / "no device"), 1 otherwise.
 */
#include <stdio.h>
#include <fmha/fmha.h>

static int fail(const char *what, fmha_status s)
{
    fprintf(stderr, "%s failed: %s: %s\n", what, fmha_status_string(s),
            fmha_last_error_message());
    return 1;
}

enum { kBatch = 4, kPageSize = 16, kMaxPages = 64 };

/* Decode: Q [4, 1, 32, 128] against K/V caches [256 pages, 16, 8, 128] read
 * through a block table [4, 64]; sequence lengths come from seqused_k. */
static fmha_status describe_paged_decode(fmha_descriptor *d)
{
    fmha_status s = fmha_descriptor_init(d, FMHA_DESCRIPTOR_VERSION);
    if (s != FMHA_STATUS_SUCCESS) return s;
    d->batch = kBatch;
    d->num_q_heads = 32;
    d->num_kv_heads = 8;
    d->seqlen_q = 1;
    d->seqlen_k = kPageSize * kMaxPages; /* the longest a sequence may be */
    d->head_dim = 128;
    d->mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
    d->flags = FMHA_FLAG_PAGED_KV | FMHA_FLAG_SEQUSED_K;
    d->page_size = kPageSize;
    d->num_pages = kBatch * kMaxPages;
    d->max_pages_per_seq = kMaxPages;
    d->num_splits = 0; /* automatic */
    if ((s = fmha_strides_bshd(&d->q_strides, 1, 32, 128)) != FMHA_STATUS_SUCCESS ||
        (s = fmha_strides_bshd(&d->o_strides, 1, 32, 128)) != FMHA_STATUS_SUCCESS ||
        /* A page is a [page_size, kv_heads, head_dim] block: its "batch" stride. */
        (s = fmha_strides_bshd(&d->k_strides, kPageSize, 8, 128)) != FMHA_STATUS_SUCCESS)
        return s;
    d->v_strides = d->k_strides;
    return FMHA_STATUS_SUCCESS;
}

/* The serving path on the host: the descriptor, then a host copy of the
 * block table checked against it (entries in [0, num_pages)). */
static int check_paged_decode(void)
{
    fmha_descriptor d;
    int32_t table[kBatch][kMaxPages];
    int32_t lengths[kBatch] = {1, 17, 500, kPageSize * kMaxPages};
    int b, i;
    fmha_status s = describe_paged_decode(&d);
    if (s != FMHA_STATUS_SUCCESS) return fail("describe_paged_decode", s);
    s = fmha_check_support(&d, FMHA_SM_ANY);
    printf("paged decode check_support(any sm): %s\n", fmha_status_string(s));
    if (s != FMHA_STATUS_SUCCESS) return fail("fmha_check_support", s);
    for (b = 0; b < kBatch; ++b) /* pages of sequence b, interleaved with the others */
        for (i = 0; i < kMaxPages; ++i) table[b][i] = i * kBatch + b;
    s = fmha_check_block_table(&d, &table[0][0], lengths);
    printf("block table: %s\n", fmha_status_string(s));
    if (s != FMHA_STATUS_SUCCESS) return fail("fmha_check_block_table", s);
    table[2][40] = -1; /* not used by sequence 2 (500 keys = 32 pages): still valid */
    table[2][3] = (int32_t)d.num_pages; /* used: rejected, naming the entry */
    s = fmha_check_block_table(&d, &table[0][0], lengths);
    printf("block table with a bad entry: %s (%s)\n", fmha_status_string(s),
           fmha_last_error_message());
    return s == FMHA_STATUS_INVALID_ARGUMENT ? 0 : 1;
}

/* With a device: the plan AUTO picks for the decode step. */
static int plan_paged_decode(void)
{
    fmha_descriptor d;
    fmha_plan *plan = NULL;
    fmha_plan_info info;
    fmha_status s = describe_paged_decode(&d);
    if (s == FMHA_STATUS_SUCCESS) s = fmha_create_plan(&plan, &d);
    if (s != FMHA_STATUS_SUCCESS) return fail("fmha_create_plan (paged decode)", s);
    if ((s = fmha_plan_info_init(&info, FMHA_PLAN_INFO_VERSION)) != FMHA_STATUS_SUCCESS ||
        (s = fmha_plan_get_info(plan, &info)) != FMHA_STATUS_SUCCESS) {
        fmha_destroy_plan(plan);
        return fail("plan query", s);
    }
    printf("paged decode plan: kernel %s, %d split(s), %lu B workspace\n",
           info.kernel_name ? info.kernel_name : "?", (int)info.num_splits,
           (unsigned long)info.workspace_bytes);
    fmha_destroy_plan(plan);
    return 0;
}

int main(void)
{
    fmha_descriptor d;
    fmha_status s;
    int32_t archs[16];
    int32_t n, i, driver = 0;
    fmha_plan *plan = NULL;
    fmha_plan_info info;
    size_t ws = 0;

    printf("libfmha %s (header %d.%d.%d)\n", fmha_version_string(),
           FMHA_VERSION_MAJOR, FMHA_VERSION_MINOR, FMHA_VERSION_PATCH);
    if (fmha_version() != FMHA_VERSION_NUMBER)
        printf("warning: library version %u differs from header %d\n",
               (unsigned)fmha_version(), FMHA_VERSION_NUMBER);

    n = fmha_embedded_archs(archs, (int32_t)(sizeof archs / sizeof archs[0]));
    printf("embedded archs:");
    for (i = 0; i < n && i < (int32_t)(sizeof archs / sizeof archs[0]); ++i)
        printf(" sm_%d", (int)archs[i]);
    printf("; PTX: %d\n", (int)fmha_embedded_ptx_arch());

    /* Q [2, 256, 8, 128], K/V [2, 256, 2, 128], O like Q; BSHD, bf16, causal. */
    s = fmha_descriptor_init(&d, FMHA_DESCRIPTOR_VERSION);
    if (s != FMHA_STATUS_SUCCESS) return fail("fmha_descriptor_init", s);
    d.dtype = FMHA_DTYPE_BF16;
    d.batch = 2;
    d.num_q_heads = 8;
    d.num_kv_heads = 2;
    d.seqlen_q = 256;
    d.seqlen_k = 256;
    d.head_dim = 128;
    d.mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
    if ((s = fmha_strides_bshd(&d.q_strides, d.seqlen_q, d.num_q_heads, d.head_dim)) ||
        (s = fmha_strides_bshd(&d.k_strides, d.seqlen_k, d.num_kv_heads, d.head_dim)) ||
        (s = fmha_strides_bshd(&d.v_strides, d.seqlen_k, d.num_kv_heads, d.head_dim)) ||
        (s = fmha_strides_bshd(&d.o_strides, d.seqlen_q, d.num_q_heads, d.head_dim)))
        return fail("fmha_strides_bshd", s);

    s = fmha_check_support(&d, FMHA_SM_ANY);
    printf("check_support(any sm): %s\n", fmha_status_string(s));
    if (s != FMHA_STATUS_SUCCESS) return fail("fmha_check_support", s);
    if (check_paged_decode() != 0) return 1;

    s = fmha_driver_version(&driver);
    if (s == FMHA_STATUS_NO_DRIVER) {
        printf("no GPU: stopped after check_support\n");
        return 0;
    }
    if (s != FMHA_STATUS_SUCCESS) return fail("fmha_driver_version", s);
    printf("CUDA driver %d.%d\n", (int)(driver / 1000), (int)(driver % 1000 / 10));

    s = fmha_check_support(&d, FMHA_SM_CURRENT_DEVICE);
    printf("check_support(current device): %s\n", fmha_status_string(s));
    if (s == FMHA_STATUS_NO_DEVICE) {
        printf("no usable device: %s\n", fmha_last_error_message());
        return 0;
    }
    if (s != FMHA_STATUS_SUCCESS) return fail("fmha_check_support", s);

    s = fmha_create_plan(&plan, &d);
    if (s != FMHA_STATUS_SUCCESS) return fail("fmha_create_plan", s);
    if ((s = fmha_plan_workspace_size(plan, &ws)) != FMHA_STATUS_SUCCESS ||
        (s = fmha_plan_info_init(&info, FMHA_PLAN_INFO_VERSION)) != FMHA_STATUS_SUCCESS ||
        (s = fmha_plan_get_info(plan, &info)) != FMHA_STATUS_SUCCESS) {
        fail("plan query", s);
        fmha_destroy_plan(plan);
        return 1;
    }
    printf("plan: kernel %s (family %d) on device %d (sm_%d), image sm_%d%s\n",
           info.kernel_name ? info.kernel_name : "?", (int)info.kernel_family,
           (int)info.device, (int)info.device_sm, (int)info.image_sm,
           info.image_is_ptx ? " from PTX" : "");
    printf("      tile %dx%d, %d threads, %d B shared memory, %lu B workspace\n",
           (int)info.tile_m, (int)info.tile_n, (int)info.threads_per_cta,
           (int)info.shared_memory_bytes, (unsigned long)ws);
    fmha_destroy_plan(plan);
    return plan_paged_decode();
}
