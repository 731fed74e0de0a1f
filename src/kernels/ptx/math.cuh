// Special-function-unit math shared by every kernel family.
#pragma once

namespace fmha::ptx {

// 2^x on the special-function unit (ex2.approx: exp2(-inf) = +0).
__device__ __forceinline__ float exp2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// tanh on the special-function unit (sm_75+), for logit soft-capping.
__device__ __forceinline__ float tanh_approx(float x) {
    float y;
    asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

}  // namespace fmha::ptx
