// Kernel images (cubins and PTX) embedded in the library at build time, and
// the rule that picks the one a device can run.
#pragma once

namespace fmha {

struct EmbeddedImage {
    const char *family;        // "portable", "sm90", ...
    int sm;                    // 80, 90, 100, 120 (major*10+minor)
    int arch_specific;         // 1 for sm_90a / sm_100a: runs on exactly that sm (not sm_100f)
    int is_ptx;                // 1 when the image is PTX for the driver to JIT
    const unsigned char *begin;
    const unsigned char *end;  // one past the trailing NUL
};

extern const EmbeddedImage kEmbeddedImages[];
extern const int kEmbeddedImageCount;

// Best image of `family` for a device of compute capability `device_sm`:
// an exact or same-major older cubin (arch-specific ones only on their own
// sm), else PTX of an equal or older virtual arch. NULL when none fits.
const EmbeddedImage *find_image(const char *family, int device_sm);

// True if the build embeds any image of `family` at all.
bool has_family(const char *family);

// Whether a kernel of `image` may be launched as a programmatic dependent on a
// device of compute capability `device_sm`: both must be sm_90+. The kernels
// wait for their predecessor (griddepcontrol.wait) only when compiled for
// sm_90+ (kernels/ptx/grid_dependency.cuh), so PTX of an older virtual arch,
// which the driver JIT-compiles for a newer device, must be launched plainly.
bool launches_as_dependent(const EmbeddedImage &image, int device_sm);

}  // namespace fmha
