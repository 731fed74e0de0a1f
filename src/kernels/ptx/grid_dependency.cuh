// Programmatic dependent launch (sm_90+): a kernel signals that its
// dependent may be scheduled, and the dependent waits for its predecessor's
// memory before reading it. Both are no-ops without the launch attribute
// and compile to nothing before sm_90.
#pragma once

namespace fmha::ptx {

__device__ __forceinline__ void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wait_for_predecessor() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

}  // namespace fmha::ptx
