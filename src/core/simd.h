// Vector helpers shared by the codecs and the wire format (internal to
// adacomp_core): for each X, the dispatcher X, its plain twin XScalar (the
// definition; simd_test.cc compares the twins on random data) and XAvx2,
// named and built as core/cpu.h says. All functions are reentrant.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/cpu.h"

namespace adacomp::internal {

// Largest (bits of v[j]) & 0x7FFFFFFF: the bits of the largest |v|, which is
// >= 0x7F800000 exactly when some v is Inf or NaN.
inline uint32_t MaxAbsBitsScalar(const float* v, size_t n) {
  uint32_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t a = std::bit_cast<uint32_t>(v[i]) & 0x7FFFFFFFu;
    m = a > m ? a : m;
  }
  return m;
}

// Gaps of strictly increasing indices: gap_0 = idx[0], gap_j = idx[j] -
// idx[j-1] - 1. RiceSum = sum of (gap_j >> k); EgSum = sum of
// floor(log2((gap_j >> k) + 1)). (The index-code costs, wire/frame.h.)
inline uint64_t RiceSumScalar(const uint32_t* idx, size_t c, int k) {
  uint64_t s = 0, next = 0;
  for (size_t j = 0; j < c; ++j) {
    s += (idx[j] - next) >> k;
    next = uint64_t{idx[j]} + 1;
  }
  return s;
}
inline uint64_t EgSumScalar(const uint32_t* idx, size_t c, int k) {
  uint64_t s = 0, next = 0;
  for (size_t j = 0; j < c; ++j) {
    s += static_cast<uint64_t>(std::bit_width(((idx[j] - next) >> k) + 1) - 1);
    next = uint64_t{idx[j]} + 1;
  }
  return s;
}

// Over the same gaps: sum of gap, sum of bit_width(gap), max gap.
struct GapStats {
  uint64_t sum = 0, width_sum = 0, max = 0;
  friend bool operator==(const GapStats&, const GapStats&) = default;
};
inline GapStats SumGapsScalar(const uint32_t* idx, size_t c) {
  GapStats st;
  uint64_t next = 0;
  for (size_t j = 0; j < c; ++j) {
    const uint64_t g = idx[j] - next;
    next = uint64_t{idx[j]} + 1;
    st.sum += g;
    st.width_sum += static_cast<uint64_t>(std::bit_width(g));
    st.max = g > st.max ? g : st.max;
  }
  return st;
}

// Decoding dense and onebit payloads (bytes at any alignment, little-endian
// f32 / bit i of byte i / 8):
// the largest (bits & 0x7FFFFFFF) of n f32 values (>= 0x7F800000 iff one
// is Inf or NaN);
inline uint32_t MaxAbsBitsBytesScalar(const uint8_t* src, size_t n) {
  uint32_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, src + 4 * i, 4);
    b &= 0x7FFFFFFFu;
    m = b > m ? b : m;
  }
  return m;
}
// dst[i] += f32 value i;
inline void AddFloatsFromBytesScalar(float* dst, const uint8_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, src + 4 * i, 4);
    dst[i] += v;
  }
}
// dst[i] += bit i ? neg : pos.
inline void AddSignBitsScalar(float* dst, const uint8_t* bits, size_t n, float pos, float neg) {
  for (size_t i = 0; i < n; ++i) dst[i] += (bits[i / 8] >> (i % 8)) & 1 ? neg : pos;
}

// x[i] = x[i] / d (IEEE division, correctly rounded).
inline void DivideFloatsScalar(float* x, size_t n, float d) {
  for (size_t i = 0; i < n; ++i) x[i] = x[i] / d;
}

#if ADACOMP_X86_SIMD
void DivideFloatsAvx2(float* x, size_t n, float d);
uint32_t MaxAbsBitsBytesAvx2(const uint8_t* src, size_t n);
void AddFloatsFromBytesAvx2(float* dst, const uint8_t* src, size_t n);
void AddSignBitsAvx2(float* dst, const uint8_t* bits, size_t n, float pos, float neg);
GapStats SumGapsAvx2(const uint32_t* idx, size_t c);
uint32_t MaxAbsBitsAvx2(const float* v, size_t n);
uint64_t RiceSumAvx2(const uint32_t* idx, size_t c, int k);
uint64_t EgSumAvx2(const uint32_t* idx, size_t c, int k);
#endif

// Dispatching versions.
uint32_t MaxAbsBits(const float* v, size_t n);
uint64_t RiceSum(const uint32_t* idx, size_t c, int k);
uint64_t EgSum(const uint32_t* idx, size_t c, int k);
GapStats SumGaps(const uint32_t* idx, size_t c);
uint32_t MaxAbsBitsBytes(const uint8_t* src, size_t n);
void AddFloatsFromBytes(float* dst, const uint8_t* src, size_t n);
void AddSignBits(float* dst, const uint8_t* bits, size_t n, float pos, float neg);
// DivideFloatsScalar's result. When d is a power of two (2^-126 < 1/d, so
// that 1/d is a normal float) it multiplies by 1/d, which rounds the same
// exact quotient once and so gives the same bits, several times faster.
void DivideFloats(float* x, size_t n, float d);

}  // namespace adacomp::internal
