#include "kernel_select.h"

#include "errors.h"
#include "images.h"

namespace fmha {

bool is_supported_head_dim(int64_t d) { return d == 64 || d == 96 || d == 128 || d == 256 || d == 512; }

// Opt-in shared memory per block (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
// by architecture, from the CUDA programming guide: 163 KB on sm_80/87, 227 KB
// on sm_90 and sm_100/103, 99 KB on sm_86/89 and sm_120/121. sm_110 and
// architectures not listed get the smallest, so that a support query never
// promises a kernel that the device cannot launch.
static int architecture_optin_smem(int sm) {
    switch (sm) {
    case 80: case 87: return 166912;
    case 90: case 100: case 103: return 232448;
    default: return 101376;  // 99 KB: 86, 89, 110, 120, 121, unknown
    }
}

DeviceLimits support_query_limits(int sm) {
    DeviceLimits dev;
    dev.sm = sm;
    dev.max_smem = architecture_optin_smem(sm);
    return dev;
}

// Per SM the guide gives 1 KB more than the opt-in maximum per block (164,
// 228 and 100 KB); the architecture's figure where the driver reported none.
int shared_memory_per_sm(const DeviceLimits &dev) {
    return dev.smem_per_sm > 0 ? dev.smem_per_sm : architecture_optin_smem(dev.sm) + 1024;
}

// A kernel launches only with its dynamic shared memory within the device's
// opt-in maximum per block.
static fmha_status check_shared_memory(const Problem &p, const KernelChoice &c,
                                       const DeviceLimits &dev) {
    if (c.smem_bytes <= dev.max_smem) return FMHA_STATUS_SUCCESS;
    return fail(FMHA_STATUS_NOT_SUPPORTED,
                "descriptor.head_dim is %lld: kernel %s needs %d bytes of shared memory per "
                "block; sm_%d offers at most %d%s",
                (long long)p.head_dim, c.kernel_name, c.smem_bytes, dev.sm, dev.max_smem,
                dev.smem_capped ? " (as environment FMHA_SHARED_MEMORY_LIMIT sets)" : "");
}

static fmha_status need_image(const char *family, int sm) {
    if (find_image(family, sm) == nullptr)
        return fail(FMHA_STATUS_NO_KERNEL_IMAGE,
                    "no embedded %s kernel image runs on sm_%d (this build has archs set by "
                    "FMHA_CUDA_ARCHS; see fmha_embedded_archs)",
                    family, sm);
    return FMHA_STATUS_SUCCESS;
}

fmha_status select_kernel(const Problem &p, const DeviceLimits &dev, KernelChoice *out) {
    const int sm = dev.sm;
    const bool hopper_device = sm == 90;
    // What the Hopper kernel would do with the problem, for AUTO.
    KernelChoice hopper;
    bool hopper_runs_it = false;
    if (p.kernel == FMHA_KERNEL_AUTO && hopper_device && find_image("sm90", sm) != nullptr) {
        fmha_status st = sm90_configure(p, dev, &hopper);
        if (st == FMHA_STATUS_SUCCESS) st = check_shared_memory(p, hopper, dev);
        if (st == FMHA_STATUS_SUCCESS && hopper.num_splits > 1) st = need_image("combine", sm);
        hopper_runs_it = st == FMHA_STATUS_SUCCESS;
        if (st != FMHA_STATUS_SUCCESS) clear_error();
    }
    const bool auto_decode = p.kernel == FMHA_KERNEL_AUTO && prefers_decode(p, hopper_runs_it);
    if (p.kernel == FMHA_KERNEL_DECODE || auto_decode) {
        fmha_status st = need_image("decode", sm);
        if (st == FMHA_STATUS_SUCCESS) st = need_image("combine", sm);
        if (st == FMHA_STATUS_SUCCESS) st = decode_configure(p, dev, out);
        if (st == FMHA_STATUS_SUCCESS) st = check_shared_memory(p, *out, dev);
        // Where the decode kernel cannot run an AUTO problem (its grid
        // limits, or too little shared memory per block for it), the Hopper
        // kernel takes it if it runs it, else the portable kernel, explicit
        // split counts included; head_dim 512 has no portable kernel, so
        // then the decode kernel's reason is the answer.
        if (st == FMHA_STATUS_SUCCESS || !auto_decode || (p.head_dim == 512 && !hopper_runs_it))
            return st;
        clear_error();
    }
    if (p.kernel == FMHA_KERNEL_HOPPER) {
        if (!hopper_device)
            return fail(FMHA_STATUS_NOT_SUPPORTED,
                        "descriptor.kernel is HOPPER (2): the device is sm_%d, the Hopper "
                        "kernel needs sm_90",
                        sm);
        FMHA_TRY(need_image("sm90", sm));
        FMHA_TRY(sm90_configure(p, dev, out));
        FMHA_TRY(check_shared_memory(p, *out, dev));
        return out->num_splits > 1 ? need_image("combine", sm) : FMHA_STATUS_SUCCESS;
    }
    if (hopper_runs_it) {
        *out = hopper;
        return FMHA_STATUS_SUCCESS;
    }
    FMHA_TRY(need_image("portable", sm));
    FMHA_TRY(portable_configure(p, dev, out));
    FMHA_TRY(check_shared_memory(p, *out, dev));
    return out->num_splits > 1 ? need_image("combine", sm) : FMHA_STATUS_SUCCESS;
}

}  // namespace fmha
