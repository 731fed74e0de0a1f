/* The public header must compile as strict C99 on its own (see
 * tests/CMakeLists.txt: -std=c99 -Wall -Wextra -Werror -pedantic). */
#include "fmha/fmha.h"

static fmha_status fill(fmha_descriptor *d) {
    fmha_status st = fmha_descriptor_init(d, FMHA_DESCRIPTOR_VERSION);
    if (st != FMHA_STATUS_SUCCESS) return st;
    d->dtype = FMHA_DTYPE_FP16;
    d->batch = 1;
    d->num_q_heads = d->num_kv_heads = 1;
    d->seqlen_q = d->seqlen_k = 1;
    d->head_dim = 64;
    d->mask = FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
    d->kernel = FMHA_KERNEL_PORTABLE;
    d->flags = FMHA_FLAG_WRITE_LSE;
    return fmha_strides_bshd(&d->q_strides, 1, 1, 64);
}

int header_c99_check(void);
int header_c99_check(void) {
    fmha_descriptor d;
    fmha_plan *plan = NULL;
    fmha_tensors t;
    fmha_plan_info info;
    fmha_stream stream = NULL;
    size_t ws = 0;
    int32_t archs[8];
    int32_t version = 0;
    if (fill(&d) != FMHA_STATUS_SUCCESS) return 1;
    if (fmha_check_support(&d, FMHA_SM_CURRENT_DEVICE) != FMHA_STATUS_SUCCESS) return 2;
    if (fmha_create_plan(&plan, &d) != FMHA_STATUS_SUCCESS) return 3;
    fmha_plan_workspace_size(plan, &ws);
    fmha_plan_info_init(&info, FMHA_PLAN_INFO_VERSION);
    fmha_plan_get_info(plan, &info);
    fmha_tensors_init(&t, FMHA_TENSORS_VERSION);
    fmha_run(plan, &t, NULL, ws, stream);
    fmha_destroy_plan(plan);
    (void)fmha_embedded_archs(archs, 8);
    (void)fmha_embedded_ptx_arch();
    (void)fmha_driver_version(&version);
    (void)fmha_status_string(fmha_last_error_status());
    (void)fmha_last_error_message();
    fmha_clear_last_error();
    return fmha_version() == FMHA_VERSION_NUMBER && fmha_version_string()[0] != '\0' ? 0 : 4;
}
