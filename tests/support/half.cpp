#include "fmha_test/half.h"

#include <cstring>

namespace fmha_test {
namespace {

uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

float float_of(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

}  // namespace

float bf16_to_float(uint16_t h) { return float_of(uint32_t(h) << 16); }

uint16_t float_to_bf16(float f) {
    uint32_t u = bits_of(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)  // NaN: keep the sign, force a quiet NaN
        return uint16_t((u >> 16) | 0x0040u);
    // Adding 0x7FFF plus the lowest kept bit rounds to nearest, ties to even;
    // a carry out of the mantissa correctly bumps the exponent (up to inf).
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7FFFu + lsb;
    return uint16_t(u >> 16);
}

float fp16_to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    if (exp == 0x1F) return float_of(sign | 0x7F800000u | (mant << 13));  // inf / NaN
    if (exp != 0) return float_of(sign | ((exp + 127 - 15) << 23) | (mant << 13));
    if (mant == 0) return float_of(sign);  // +-0
    // Subnormal: mant * 2^-24, exactly representable in float.
    float v = float(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
}

uint16_t float_to_fp16(float f) {
    uint32_t u = bits_of(f);
    uint16_t sign = uint16_t((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return uint16_t(sign | 0x7E00u | ((a >> 13) & 0x3FFu));  // NaN
    // 65520 (0x477FF000) is halfway between 65504, the largest fp16, and 65536;
    // the tie goes to the even neighbour, which is inf.
    if (a >= 0x477FF000u) return uint16_t(sign | 0x7C00u);
    if (a >= 0x38800000u) {  // normal fp16 (>= 2^-14)
        uint32_t exp = (a >> 23) - 127 + 15;
        uint32_t mant = a & 0x7FFFFFu;
        uint32_t h = (exp << 10) | (mant >> 13);
        uint32_t rest = mant & 0x1FFFu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carry may bump exp
        return uint16_t(sign | h);
    }
    // Subnormal fp16, in units of 2^-24. 2^-25 and below round to zero (2^-25
    // itself is a tie between 0 and 2^-24, and 0 is even).
    if (a <= 0x33000000u) return sign;
    uint32_t e = a >> 23;                   // biased float exponent, 102..112
    uint32_t m = (a & 0x7FFFFFu) | 0x800000u;  // with the implicit bit
    uint32_t shift = 126 - e;               // value / 2^-24 = m >> shift
    uint32_t h = m >> shift;
    uint32_t rest = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1u))) ++h;  // may become the smallest normal
    return uint16_t(sign | h);
}

float lowp_to_float(uint16_t h, fmha_dtype dtype) {
    return dtype == FMHA_DTYPE_FP16 ? fp16_to_float(h) : bf16_to_float(h);
}

uint16_t float_to_lowp(float f, fmha_dtype dtype) {
    return dtype == FMHA_DTYPE_FP16 ? float_to_fp16(f) : float_to_bf16(f);
}

float round_to_lowp(float f, fmha_dtype dtype) {
    return lowp_to_float(float_to_lowp(f, dtype), dtype);
}

bool is_nan_lowp(uint16_t h, fmha_dtype dtype) {
    if (dtype == FMHA_DTYPE_FP16) return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0;
    return (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu) != 0;
}

const char *dtype_name(fmha_dtype dtype) {
    switch (dtype) {
    case FMHA_DTYPE_BF16: return "bf16";
    case FMHA_DTYPE_FP16: return "fp16";
    }
    return "dtype?";
}

}  // namespace fmha_test
