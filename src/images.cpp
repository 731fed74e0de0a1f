#include "images.h"

#include <cstring>

#include "errors.h"

namespace fmha {

static bool cubin_runs_on(const EmbeddedImage &img, int device_sm) {
    if (img.arch_specific) return img.sm == device_sm;
    // A cubin runs on later minor revisions of the same major architecture.
    return img.sm / 10 == device_sm / 10 && img.sm <= device_sm;
}

const EmbeddedImage *find_image(const char *family, int device_sm) {
    const EmbeddedImage *best_cubin = nullptr;
    const EmbeddedImage *best_ptx = nullptr;
    for (int i = 0; i < kEmbeddedImageCount; ++i) {
        const EmbeddedImage &img = kEmbeddedImages[i];
        if (std::strcmp(img.family, family) != 0) continue;
        if (img.is_ptx) {
            if (img.sm <= device_sm && (!best_ptx || img.sm > best_ptx->sm)) best_ptx = &img;
        } else if (cubin_runs_on(img, device_sm)) {
            if (!best_cubin || img.sm > best_cubin->sm) best_cubin = &img;
        }
    }
    return best_cubin ? best_cubin : best_ptx;
}

bool launches_as_dependent(const EmbeddedImage &image, int device_sm) {
    return device_sm >= 90 && image.sm >= 90;
}

bool has_family(const char *family) {
    for (int i = 0; i < kEmbeddedImageCount; ++i)
        if (std::strcmp(kEmbeddedImages[i].family, family) == 0) return true;
    return false;
}

}  // namespace fmha

extern "C" {

FMHA_API int32_t fmha_embedded_archs(int32_t *archs, int32_t capacity) {
    // Distinct cubin archs in ascending order (the table is small).
    int32_t count = 0;
    for (int sm = 1; sm < 1000; ++sm) {
        bool present = false;
        for (int i = 0; i < fmha::kEmbeddedImageCount && !present; ++i)
            present = !fmha::kEmbeddedImages[i].is_ptx && fmha::kEmbeddedImages[i].sm == sm;
        if (!present) continue;
        if (archs && count < capacity) archs[count] = sm;
        ++count;
    }
    return count;
}

FMHA_API int32_t fmha_embedded_ptx_arch(void) {
    int32_t best = 0;
    for (int i = 0; i < fmha::kEmbeddedImageCount; ++i)
        if (fmha::kEmbeddedImages[i].is_ptx && fmha::kEmbeddedImages[i].sm > best)
            best = fmha::kEmbeddedImages[i].sm;
    return best;
}

}  // extern "C"
