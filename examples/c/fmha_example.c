/*
 * fmha_example: the CPU-side path of libfmha from plain C99.
 *
 * Describes a small causal GQA problem, asks whether it is supported, and,
 * when a CUDA driver and device are present, creates a plan and prints what
 * it chose. It allocates no device memory and needs no CUDA header or
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
    return 0;
}
