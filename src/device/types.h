// Element types of the NCCL API as portable C++ types, with arithmetic.
//
// float16, bfloat16 and the two fp8 formats are storage types; arithmetic is
// done in float and rounded back to nearest-even. For + - * that double
// rounding is still correctly rounded, because float keeps at least 2p+2 bits
// of a p-bit format (24 >= 2*11+2), so results match native half/bf16 math.
// fp8 conversions saturate to the largest finite value, like CUDA's
// __NV_SATFINITE conversions that NCCL's fp8 reductions use.
#pragma once

#include <math.h>
#include <string.h>

#include <type_traits>

#include "device/portable.h"

namespace weft::device {

template <typename To, typename From>
WEFT_HD To bitCast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bitCast needs equal sizes");
  To to;
  memcpy(&to, &from, sizeof(To));
  return to;
}

struct half_t {
  uint16_t bits;
};
struct bfloat16_t {
  uint16_t bits;
};
struct fp8e4m3_t {
  uint8_t bits;
};
struct fp8e5m2_t {
  uint8_t bits;
};

// ---- float16 -----------------------------------------------------------------

WEFT_HD uint16_t roundShiftEven(uint32_t mantissa, int shift) {
  uint32_t kept = mantissa >> shift;
  uint32_t rest = mantissa & ((1u << shift) - 1);
  uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (kept & 1u))) kept += 1;
  return static_cast<uint16_t>(kept);
}

WEFT_HD half_t floatToHalf(float value) {
  uint32_t x = bitCast<uint32_t>(value);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return half_t{static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u))};
  if (absx >= 0x477ff000u) return half_t{static_cast<uint16_t>(sign | 0x7c00u)};  // >= 65520 rounds to inf
  if (absx < 0x38800000u) {                                                       // below 2^-14: subnormal
    if (absx < 0x33000000u) return half_t{sign};                                  // at most 2^-25: zero
    int exponent = static_cast<int>(absx >> 23);
    uint32_t mantissa = (absx & 0x7fffffu) | 0x800000u;
    return half_t{static_cast<uint16_t>(sign | roundShiftEven(mantissa, 126 - exponent))};
  }
  uint32_t rebased = absx - (112u << 23);  // float exponent bias 127 -> half bias 15
  return half_t{static_cast<uint16_t>(sign | roundShiftEven(rebased, 13))};
}

WEFT_HD float halfToFloat(half_t h) {
  uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  uint32_t exponent = (h.bits >> 10) & 0x1fu;
  uint32_t mantissa = h.bits & 0x3ffu;
  if (exponent == 0x1f) return bitCast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;  // 2^-24
    return sign ? -magnitude : magnitude;
  }
  return bitCast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// ---- bfloat16 ----------------------------------------------------------------

WEFT_HD bfloat16_t floatToBfloat16(float value) {
  uint32_t x = bitCast<uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return bfloat16_t{static_cast<uint16_t>((x >> 16) | 0x40u)};  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return bfloat16_t{static_cast<uint16_t>(x >> 16)};
}

WEFT_HD float bfloat16ToFloat(bfloat16_t b) { return bitCast<float>(static_cast<uint32_t>(b.bits) << 16); }

// ---- fp8 (OCP formats: E4M3 without infinities, E5M2 IEEE-like) -------------

// Encodes |value| (finite, already saturated) with kMant mantissa bits and
// exponent bias kBias, rounding to nearest even.
template <int kMant, int kBias>
WEFT_HD uint8_t encodeSmallFloat(float magnitude) {
  if (magnitude == 0.0f) return 0;
  int exponent = 0;
  frexpf(magnitude, &exponent);  // magnitude = f * 2^exponent, f in [0.5, 1)
  int unbiased = exponent - 1;
  int quantumExp = (unbiased < 1 - kBias ? 1 - kBias : unbiased) - kMant;
  float units = rintf(ldexpf(magnitude, -quantumExp));  // rint: ties to even
  float rounded = ldexpf(units, quantumExp);
  frexpf(rounded, &exponent);
  unbiased = exponent - 1;
  if (unbiased < 1 - kBias) return static_cast<uint8_t>(units);  // subnormal: mantissa field only
  int mantissa = static_cast<int>(ldexpf(rounded, kMant - unbiased)) - (1 << kMant);
  return static_cast<uint8_t>(((unbiased + kBias) << kMant) | mantissa);
}

template <int kMant, int kBias>
WEFT_HD float decodeSmallFloat(uint8_t code) {
  int exponentField = (code & 0x7f) >> kMant;
  int mantissa = code & ((1 << kMant) - 1);
  float magnitude = exponentField == 0
                        ? ldexpf(static_cast<float>(mantissa), 1 - kBias - kMant)
                        : ldexpf(static_cast<float>(mantissa + (1 << kMant)), exponentField - kBias - kMant);
  return (code & 0x80) ? -magnitude : magnitude;
}

WEFT_HD fp8e4m3_t floatToFp8e4m3(float value) {
  if (isnan(value)) return fp8e4m3_t{0x7f};
  uint8_t sign = signbit(value) ? 0x80 : 0;
  float magnitude = fabsf(value);
  if (magnitude >= 448.0f) return fp8e4m3_t{static_cast<uint8_t>(sign | 0x7e)};  // saturate to 448
  return fp8e4m3_t{static_cast<uint8_t>(sign | encodeSmallFloat<3, 7>(magnitude))};
}

WEFT_HD float fp8e4m3ToFloat(fp8e4m3_t v) {
  if ((v.bits & 0x7f) == 0x7f) return NAN;
  return decodeSmallFloat<3, 7>(v.bits);
}

WEFT_HD fp8e5m2_t floatToFp8e5m2(float value) {
  if (isnan(value)) return fp8e5m2_t{0x7f};
  uint8_t sign = signbit(value) ? 0x80 : 0;
  float magnitude = fabsf(value);
  if (magnitude >= 57344.0f) return fp8e5m2_t{static_cast<uint8_t>(sign | 0x7b)};  // saturate to 57344
  return fp8e5m2_t{static_cast<uint8_t>(sign | encodeSmallFloat<2, 15>(magnitude))};
}

WEFT_HD float fp8e5m2ToFloat(fp8e5m2_t v) {
  int exponentField = (v.bits & 0x7c) >> 2;
  if (exponentField == 31) return (v.bits & 3) ? NAN : ((v.bits & 0x80) ? -INFINITY : INFINITY);
  return decodeSmallFloat<2, 15>(v.bits);
}

// ---- Arithmetic ----------------------------------------------------------------

// Integers wrap (two's complement) instead of overflowing into undefined
// behaviour: computed in the unsigned type of the same width.
template <typename T, typename Enable = void>
struct Arith {
  using U = std::make_unsigned_t<T>;
  WEFT_HD static T add(T a, T b) { return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b))); }
  WEFT_HD static T mul(T a, T b) { return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b))); }
  WEFT_HD static T max(T a, T b) { return a < b ? b : a; }
  WEFT_HD static T min(T a, T b) { return a < b ? a : b; }
  WEFT_HD static T divide(T a, uint64_t n) { return static_cast<T>(a / static_cast<T>(n)); }
};

template <typename T>
struct Arith<T, std::enable_if_t<std::is_floating_point_v<T>>> {
  WEFT_HD static T add(T a, T b) { return a + b; }
  // Rounded on its own on the GPU too: nvcc would otherwise fuse a pre-op's
  // multiply with the sum that follows (one rounding instead of two), and
  // PreMulSum and float ncclAvg would differ from the host and from a
  // scalar reference in the last bit.
  WEFT_HD static T mul(T a, T b) {
#if WEFT_DEVICE_PASS
    if constexpr (std::is_same_v<T, float>)
      return __fmul_rn(a, b);
    else
      return __dmul_rn(a, b);
#else
    return a * b;
#endif
  }
  WEFT_HD static T max(T a, T b) { return a < b ? b : a; }
  WEFT_HD static T min(T a, T b) { return a < b ? a : b; }
  WEFT_HD static T divide(T a, uint64_t n) { return a / static_cast<T>(n); }
};

// Storage types compute through float.
template <typename T, float (*ToFloat)(T), T (*FromFloat)(float)>
struct ArithViaFloat {
  WEFT_HD static T add(T a, T b) { return FromFloat(ToFloat(a) + ToFloat(b)); }
  WEFT_HD static T mul(T a, T b) { return FromFloat(ToFloat(a) * ToFloat(b)); }
  WEFT_HD static T max(T a, T b) { return ToFloat(a) < ToFloat(b) ? b : a; }
  WEFT_HD static T min(T a, T b) { return ToFloat(b) < ToFloat(a) ? b : a; }
  WEFT_HD static T divide(T a, uint64_t n) { return FromFloat(ToFloat(a) / static_cast<float>(n)); }
};

template <>
struct Arith<half_t> : ArithViaFloat<half_t, halfToFloat, floatToHalf> {};
template <>
struct Arith<bfloat16_t> : ArithViaFloat<bfloat16_t, bfloat16ToFloat, floatToBfloat16> {};
template <>
struct Arith<fp8e4m3_t> : ArithViaFloat<fp8e4m3_t, fp8e4m3ToFloat, floatToFp8e4m3> {};
template <>
struct Arith<fp8e5m2_t> : ArithViaFloat<fp8e5m2_t, fp8e5m2ToFloat, floatToFp8e5m2> {};

// Converts a double to T (for scalars such as 1/nranks).
template <typename T>
WEFT_HD T fromDouble(double value) {
  if constexpr (std::is_same_v<T, half_t>)
    return floatToHalf(static_cast<float>(value));
  else if constexpr (std::is_same_v<T, bfloat16_t>)
    return floatToBfloat16(static_cast<float>(value));
  else if constexpr (std::is_same_v<T, fp8e4m3_t>)
    return floatToFp8e4m3(static_cast<float>(value));
  else if constexpr (std::is_same_v<T, fp8e5m2_t>)
    return floatToFp8e5m2(static_cast<float>(value));
  else
    return static_cast<T>(value);
}

template <typename T>
constexpr bool kIsFloatLike =
    std::is_floating_point_v<T> || std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t> ||
    std::is_same_v<T, fp8e4m3_t> || std::is_same_v<T, fp8e5m2_t>;

}  // namespace weft::device
