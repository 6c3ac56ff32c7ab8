// AVX2 versions of the helpers of core/simd.h, and the run-time dispatch.
#include <bit>
#include <cmath>

#include "core/cpu.h"
#include "core/simd.h"

#if ADACOMP_X86_SIMD
#include <immintrin.h>
#endif

namespace adacomp::internal {

#if ADACOMP_X86_SIMD

// Walks from the end to the start: CheckGradient runs this over dW just
// before the compressors stream through dW from the start, and the start,
// read last here, is then still in the last-level cache.
ADACOMP_TARGET_AVX2 uint32_t MaxAbsBitsAvx2(const float* v, size_t n) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i m0 = _mm256_setzero_si256(), m1 = m0, m2 = m0, m3 = m0;
  const size_t head = n % 32;  // v[0, head) by the scalar twin
  size_t i = n;
#define ADACOMP_LOAD_ABS(o) \
  _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + (o))), abs_mask)
  while (i > head) {
    i -= 32;
    if (i >= 4096) {
      _mm_prefetch(reinterpret_cast<const char*>(v + i - 4096), _MM_HINT_T0);  // 16 KB ahead
      _mm_prefetch(reinterpret_cast<const char*>(v + i - 4096 + 16), _MM_HINT_T0);
    }
    m0 = _mm256_max_epi32(m0, ADACOMP_LOAD_ABS(i));  // as signed: the masked bits are >= 0
    m1 = _mm256_max_epi32(m1, ADACOMP_LOAD_ABS(i + 8));
    m2 = _mm256_max_epi32(m2, ADACOMP_LOAD_ABS(i + 16));
    m3 = _mm256_max_epi32(m3, ADACOMP_LOAD_ABS(i + 24));
  }
#undef ADACOMP_LOAD_ABS
  m0 = _mm256_max_epi32(_mm256_max_epi32(m0, m1), _mm256_max_epi32(m2, m3));
  __m128i h = _mm_max_epi32(_mm256_castsi256_si128(m0), _mm256_extracti128_si256(m0, 1));
  h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0x4E));
  h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0xB1));
  const uint32_t m = static_cast<uint32_t>(_mm_cvtsi128_si32(h));
  const uint32_t t = MaxAbsBitsScalar(v, head);
  return t > m ? t : m;
}

namespace {
// Gaps of 8 entries j .. j+7 (j >= 1): idx[j+l] - idx[j+l-1] - 1.
ADACOMP_TARGET_AVX2 inline __attribute__((always_inline)) __m256i Gaps(const uint32_t* idx,
                                                                       size_t j) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + j));
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + j - 1));
  return _mm256_sub_epi32(_mm256_sub_epi32(a, b), _mm256_set1_epi32(1));
}
ADACOMP_TARGET_AVX2 inline uint64_t SumLanes(__m256i acc64a, __m256i acc64b) {
  const __m256i s = _mm256_add_epi64(acc64a, acc64b);
  alignas(32) uint64_t l[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(l), s);
  return l[0] + l[1] + l[2] + l[3];
}
}  // namespace

ADACOMP_TARGET_AVX2 uint64_t RiceSumAvx2(const uint32_t* idx, size_t c, int k) {
  if (c == 0) return 0;
  uint64_t s = idx[0] >> k;
  const __m128i kk = _mm_cvtsi32_si128(k);
  const __m256i lo32 = _mm256_set1_epi64x(0xFFFFFFFF);
  __m256i a = _mm256_setzero_si256(), b = a;
  size_t j = 1;
  for (; j + 8 <= c; j += 8) {
    const __m256i q = _mm256_srl_epi32(Gaps(idx, j), kk);
    a = _mm256_add_epi64(a, _mm256_and_si256(q, lo32));
    b = _mm256_add_epi64(b, _mm256_srli_epi64(q, 32));
  }
  s += SumLanes(a, b);
  for (; j < c; ++j) s += (idx[j] - idx[j - 1] - 1) >> k;
  return s;
}

ADACOMP_TARGET_AVX2 uint64_t EgSumAvx2(const uint32_t* idx, size_t c, int k) {
  if (c == 0) return 0;
  uint64_t s = static_cast<uint64_t>(std::bit_width((idx[0] >> k) + uint64_t{1}) - 1);
  const __m128i kk = _mm_cvtsi32_si128(k);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i lo32 = _mm256_set1_epi64x(0xFFFFFFFF);
  const __m256i zero = _mm256_setzero_si256();
  __m256i a = zero, b = zero;
  size_t j = 1;
  for (; j + 8 <= c; j += 8) {
    // v = (gap >> k) + 1 in [1, 2^32 - 1]. floor(log2 v) from the exponent
    // of float(w), exact because w < 2^24: w = v, or v >> 8 (and + 8) when
    // v >= 2^24.
    const __m256i v = _mm256_add_epi32(_mm256_srl_epi32(Gaps(idx, j), kk), one);
    const __m256i small = _mm256_cmpeq_epi32(_mm256_srli_epi32(v, 24), zero);
    const __m256i w = _mm256_blendv_epi8(_mm256_srli_epi32(v, 8), v, small);
    const __m256i e = _mm256_sub_epi32(
        _mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(w)), 23), _mm256_set1_epi32(127));
    const __m256i f = _mm256_add_epi32(e, _mm256_andnot_si256(small, _mm256_set1_epi32(8)));
    a = _mm256_add_epi64(a, _mm256_and_si256(f, lo32));
    b = _mm256_add_epi64(b, _mm256_srli_epi64(f, 32));
  }
  s += SumLanes(a, b);
  for (; j < c; ++j) {
    s += static_cast<uint64_t>(std::bit_width(((idx[j] - idx[j - 1] - 1) >> k) + uint64_t{1}) - 1);
  }
  return s;
}

ADACOMP_TARGET_AVX2 GapStats SumGapsAvx2(const uint32_t* idx, size_t c) {
  GapStats st;
  if (c == 0) return st;
  st = SumGapsScalar(idx, 1);
  const __m256i lo32 = _mm256_set1_epi64x(0xFFFFFFFF);
  const __m256i zero = _mm256_setzero_si256();
  __m256i sa = zero, sb = zero, wa = zero, wb = zero, mx = zero;
  size_t j = 1;
  for (; j + 8 <= c; j += 8) {
    const __m256i g = Gaps(idx, j);
    sa = _mm256_add_epi64(sa, _mm256_and_si256(g, lo32));
    sb = _mm256_add_epi64(sb, _mm256_srli_epi64(g, 32));
    mx = _mm256_max_epu32(mx, g);
    // bit_width(g) = floor(log2 g) + 1 (0 for g = 0), from float exponents
    // of values below 2^24 as in EgSumAvx2.
    const __m256i small = _mm256_cmpeq_epi32(_mm256_srli_epi32(g, 24), zero);
    const __m256i w = _mm256_blendv_epi8(_mm256_srli_epi32(g, 8), g, small);
    const __m256i e = _mm256_sub_epi32(
        _mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(w)), 23), _mm256_set1_epi32(126));
    const __m256i f =
        _mm256_andnot_si256(_mm256_cmpeq_epi32(g, zero),
                            _mm256_add_epi32(e, _mm256_andnot_si256(small, _mm256_set1_epi32(8))));
    wa = _mm256_add_epi64(wa, _mm256_and_si256(f, lo32));
    wb = _mm256_add_epi64(wb, _mm256_srli_epi64(f, 32));
  }
  st.sum += SumLanes(sa, sb);
  st.width_sum += SumLanes(wa, wb);
  alignas(32) uint32_t m[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(m), mx);
  for (uint32_t x : m) st.max = x > st.max ? x : st.max;
  for (; j < c; ++j) {
    const uint64_t g = idx[j] - idx[j - 1] - 1;
    st.sum += g;
    st.width_sum += static_cast<uint64_t>(std::bit_width(g));
    st.max = g > st.max ? g : st.max;
  }
  return st;
}

ADACOMP_TARGET_AVX2 uint32_t MaxAbsBitsBytesAvx2(const uint8_t* src, size_t n) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i m0 = _mm256_setzero_si256(), m1 = m0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 4 * i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 4 * i + 32));
    m0 = _mm256_max_epi32(m0, _mm256_and_si256(a, abs_mask));
    m1 = _mm256_max_epi32(m1, _mm256_and_si256(b, abs_mask));
  }
  m0 = _mm256_max_epi32(m0, m1);
  alignas(32) uint32_t l[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(l), m0);
  uint32_t m = MaxAbsBitsBytesScalar(src + 4 * i, n - i);
  for (uint32_t x : l) m = x > m ? x : m;
  return m;
}

ADACOMP_TARGET_AVX2 void AddFloatsFromBytesAvx2(float* dst, const uint8_t* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v =
        _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 4 * i)));
    _mm256_storeu_ps(dst + i, _mm256_add_ps(_mm256_loadu_ps(dst + i), v));
  }
  AddFloatsFromBytesScalar(dst + i, src + 4 * i, n - i);
}

ADACOMP_TARGET_AVX2 void AddSignBitsAvx2(float* dst, const uint8_t* bits, size_t n, float pos,
                                         float neg) {
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256 vp = _mm256_set1_ps(pos), vn = _mm256_set1_ps(neg);
  size_t b = 0;
  for (; 8 * b + 8 <= n; ++b) {
    const __m256i m =
        _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(bits[b]), lane_bit), lane_bit);
    const __m256 v = _mm256_blendv_ps(vp, vn, _mm256_castsi256_ps(m));
    _mm256_storeu_ps(dst + 8 * b, _mm256_add_ps(_mm256_loadu_ps(dst + 8 * b), v));
  }
  if (8 * b < n) AddSignBitsScalar(dst + 8 * b, bits + b, n - 8 * b, pos, neg);
}

ADACOMP_TARGET_AVX2 void DivideFloatsAvx2(float* x, size_t n, float d) {
  const __m256 vd = _mm256_set1_ps(d);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_div_ps(_mm256_loadu_ps(x + i), vd));
  DivideFloatsScalar(x + i, n - i, d);
}

namespace {
ADACOMP_TARGET_AVX2 void MultiplyFloatsAvx2(float* x, size_t n, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vm));
  for (; i < n; ++i) x[i] = x[i] * m;
}
}  // namespace

uint32_t MaxAbsBitsBytes(const uint8_t* src, size_t n) {
  return CpuHasAvx2() ? MaxAbsBitsBytesAvx2(src, n) : MaxAbsBitsBytesScalar(src, n);
}
void AddFloatsFromBytes(float* dst, const uint8_t* src, size_t n) {
  if (CpuHasAvx2()) {
    AddFloatsFromBytesAvx2(dst, src, n);
  } else {
    AddFloatsFromBytesScalar(dst, src, n);
  }
}
void AddSignBits(float* dst, const uint8_t* bits, size_t n, float pos, float neg) {
  if (CpuHasAvx2()) {
    AddSignBitsAvx2(dst, bits, n, pos, neg);
  } else {
    AddSignBitsScalar(dst, bits, n, pos, neg);
  }
}
void DivideFloats(float* x, size_t n, float d) {
  if (!CpuHasAvx2()) return DivideFloatsScalar(x, n, d);
  const float inv = 1.0f / d;
  if (std::isfinite(d) && d != 0.0f && std::isnormal(inv) &&
      (std::bit_cast<uint32_t>(d) & 0x7FFFFF) == 0) {
    MultiplyFloatsAvx2(x, n, inv);  // d = +-2^e: x * (1/d) is exactly x / d
  } else {
    DivideFloatsAvx2(x, n, d);
  }
}
GapStats SumGaps(const uint32_t* idx, size_t c) {
  return CpuHasAvx2() ? SumGapsAvx2(idx, c) : SumGapsScalar(idx, c);
}
uint32_t MaxAbsBits(const float* v, size_t n) {
  return CpuHasAvx2() ? MaxAbsBitsAvx2(v, n) : MaxAbsBitsScalar(v, n);
}
uint64_t RiceSum(const uint32_t* idx, size_t c, int k) {
  return CpuHasAvx2() ? RiceSumAvx2(idx, c, k) : RiceSumScalar(idx, c, k);
}
uint64_t EgSum(const uint32_t* idx, size_t c, int k) {
  return CpuHasAvx2() ? EgSumAvx2(idx, c, k) : EgSumScalar(idx, c, k);
}

#else

uint32_t MaxAbsBits(const float* v, size_t n) { return MaxAbsBitsScalar(v, n); }
uint64_t RiceSum(const uint32_t* idx, size_t c, int k) { return RiceSumScalar(idx, c, k); }
uint64_t EgSum(const uint32_t* idx, size_t c, int k) { return EgSumScalar(idx, c, k); }
GapStats SumGaps(const uint32_t* idx, size_t c) { return SumGapsScalar(idx, c); }
uint32_t MaxAbsBitsBytes(const uint8_t* src, size_t n) { return MaxAbsBitsBytesScalar(src, n); }
void AddFloatsFromBytes(float* dst, const uint8_t* src, size_t n) {
  AddFloatsFromBytesScalar(dst, src, n);
}
void AddSignBits(float* dst, const uint8_t* bits, size_t n, float pos, float neg) {
  AddSignBitsScalar(dst, bits, n, pos, neg);
}
void DivideFloats(float* x, size_t n, float d) { DivideFloatsScalar(x, n, d); }

#endif

}  // namespace adacomp::internal
