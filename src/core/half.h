// IEEE 754 binary16 conversions (internal to adacomp_core), in software so
// that results are identical on every CPU.
#pragma once

#include <bit>
#include <cstdint>

namespace adacomp::internal {

inline constexpr float kHalfMax = 65504.0f;  // largest finite half

// Rounds a float to the nearest half, ties to even. Values beyond the half
// range become +-Inf, NaN stays NaN (callers clamp first to avoid Inf).
inline uint16_t FloatToHalf(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7FFFFFFFu;
  uint32_t h;
  if (x >= 0x47800000u) {  // >= 65536 (rounds to Inf), Inf or NaN
    h = x > 0x7F800000u ? 0x7E00u : 0x7C00u;
  } else if (x < 0x38800000u) {  // below 2^-14: half subnormal or zero
    // Adding 0.5 aligns the value so that the float adder rounds the low bits
    // to the nearest multiple of 2^-24 (ties to even); the mantissa's low
    // bits then hold the half subnormal's mantissa.
    const float magic = std::bit_cast<float>(0x3F000000u);  // 0.5
    const float sum = std::bit_cast<float>(x) + magic;
    h = std::bit_cast<uint32_t>(sum) - 0x3F000000u;
  } else {
    const uint32_t odd = (x >> 13) & 1u;
    x += (static_cast<uint32_t>(15 - 127) << 23) + 0xFFFu + odd;  // rebias, round to even
    h = x >> 13;
  }
  return static_cast<uint16_t>(h | sign);
}

// Exact conversion of a half to float.
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    const float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24, exact
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline bool HalfIsFinite(uint16_t h) { return (h & 0x7C00u) != 0x7C00u; }

}  // namespace adacomp::internal
