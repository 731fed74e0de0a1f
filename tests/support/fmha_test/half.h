// Host-side bf16 / fp16 <-> float conversions (round to nearest, ties to even),
// written here so the tests depend on nothing but the C++ standard library.
#pragma once
#include <cstdint>

#include "fmha/fmha.h"

namespace fmha_test {

float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);
float fp16_to_float(uint16_t h);
uint16_t float_to_fp16(float f);

// Dispatch on the descriptor's dtype.
float lowp_to_float(uint16_t h, fmha_dtype dtype);
uint16_t float_to_lowp(float f, fmha_dtype dtype);
// float -> dtype -> float.
float round_to_lowp(float f, fmha_dtype dtype);

// Bit patterns that are NaN both as bf16 and as fp16 (exponent bits all ones,
// mantissa non-zero in either format), so one pattern serves both dtypes.
constexpr uint16_t kOutputPrefill16 = 0x7FFF;  // outputs before a run
constexpr uint16_t kGuard16 = 0x7FAB;          // guard bands and layout gaps
constexpr uint32_t kOutputPrefill32 = 0x7FC0FFEEu;  // float NaN: LSE before a run
constexpr uint32_t kGuard32 = 0x7FC0BAADu;          // float NaN: LSE guard bands

bool is_nan_lowp(uint16_t h, fmha_dtype dtype);

const char *dtype_name(fmha_dtype dtype);

}  // namespace fmha_test
