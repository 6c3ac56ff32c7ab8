// Inner loops of the compressors that the compiler does not vectorize well
// on its own (internal to adacomp_core). Each has an SSE2 version where
// available and a plain scalar twin; kernels_test.cc checks they agree.
// Define ADACOMP_NO_SIMD to build the scalar twins only.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__SSE2__) && !defined(ADACOMP_NO_SIMD)
#include <emmintrin.h>
#endif

namespace adacomp::internal {

// max over j < n of |r[j] + g[j]|, for inputs whose sums are finite. Exact.
inline float MaxAbsSumScalar(const float* r, const float* g, size_t n) {
  uint32_t m = 0;
  for (size_t j = 0; j < n; ++j) {
    const uint32_t a = std::bit_cast<uint32_t>(r[j] + g[j]) & 0x7FFFFFFFu;
    m = a > m ? a : m;
  }
  return std::bit_cast<float>(m);
}

// max |r[j] + g[j]| like MaxAbsSumScalar, and sets *bad if some sum is not
// finite (a NaN or Inf input, or an overflow); the max is then meaningless.
inline float MaxAbsSumCheckedScalar(const float* r, const float* g, size_t n, bool* bad) {
  uint32_t m = 0;
  uint32_t acc = 0;
  for (size_t j = 0; j < n; ++j) {
    const uint32_t a = std::bit_cast<uint32_t>(r[j] + g[j]) & 0x7FFFFFFFu;
    m = a > m ? a : m;
    acc |= a + 0x00800000u;  // exponent 255 (Inf, NaN) carries into bit 31
  }
  if (acc & 0x80000000u) *bad = true;
  return std::bit_cast<float>(m);
}

// Pass B of AdaComp over one bin of len elements (docs/algorithm.md section 2, steps 1-6):
// G = r + g, H = G + g, selected iff |H| >= m and G != 0. Ternary: r = G - Gq
// with Gq = sign(G) * s where selected (exactly G - (+-s)), else r = G.
// Keep (fp modes): r = G. Bit j % 64 of sel[j / 64] is set iff element j is
// selected, and of neg[j / 64] iff it is selected and G < 0. Both arrays
// have ceil(len / 64) words.
inline void SelectTernaryScalar(float* r, const float* g, size_t len, float m, float s,
                                uint64_t* sel, uint64_t* neg) {
  for (size_t w = 0; w * 64 < len; ++w) sel[w] = neg[w] = 0;
  for (size_t j = 0; j < len; ++j) {
    const float gj = r[j] + g[j];
    const float hj = gj + g[j];
    const uint64_t pick = (std::fabs(hj) >= m) & (gj != 0.0f);
    const uint64_t minus = std::bit_cast<uint32_t>(gj) >> 31;
    const uint32_t q_bits = (std::bit_cast<uint32_t>(s) | static_cast<uint32_t>(minus << 31)) &
                            (0u - static_cast<uint32_t>(pick));
    r[j] = gj - std::bit_cast<float>(q_bits);
    sel[j / 64] |= pick << (j % 64);
    neg[j / 64] |= (pick & minus) << (j % 64);
  }
}

inline void SelectKeepScalar(float* r, const float* g, size_t len, float m, uint64_t* sel) {
  for (size_t w = 0; w * 64 < len; ++w) sel[w] = 0;
  for (size_t j = 0; j < len; ++j) {
    const float gj = r[j] + g[j];
    const float hj = gj + g[j];
    const uint64_t pick = (std::fabs(hj) >= m) & (gj != 0.0f);
    r[j] = gj;
    sel[j / 64] |= pick << (j % 64);
  }
}

// out[j / 8] bit j % 8 = (g[j] < 0), for ceil(n / 8) bytes (padding bits 0).
inline void NegativeBitsScalar(const float* g, size_t n, uint8_t* out) {
  for (size_t b = 0; b * 8 < n; ++b) {
    unsigned byte = 0;
    for (size_t j = 8 * b; j < n && j < 8 * b + 8; ++j) {
      byte |= static_cast<unsigned>(g[j] < 0.0f) << (j % 8);
    }
    out[b] = static_cast<uint8_t>(byte);
  }
}

// True if some |g[j]| >= 2^127, or some g[j] is Inf or NaN.
inline bool AnyHugeOrNonFiniteScalar(const float* g, size_t n) {
  uint32_t acc = 0;
  for (size_t j = 0; j < n; ++j) {
    // |g| >= 2^127 exactly when its bits are >= 0x7F000000; adding 2^24 then
    // carries into bit 31.
    acc |= (std::bit_cast<uint32_t>(g[j]) & 0x7FFFFFFFu) + 0x01000000u;
  }
  return (acc & 0x80000000u) != 0;
}

#if defined(__SSE2__) && !defined(ADACOMP_NO_SIMD)

inline float MaxAbsSum(const float* r, const float* g, size_t n) {
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7FFFFFFF));
  __m128 m0 = _mm_setzero_ps(), m1 = m0, m2 = m0, m3 = m0;
  size_t j = 0;
  for (; j + 16 <= n; j += 16) {
    m0 = _mm_max_ps(m0, _mm_and_ps(abs_mask, _mm_add_ps(_mm_loadu_ps(r + j), _mm_loadu_ps(g + j))));
    m1 = _mm_max_ps(
        m1, _mm_and_ps(abs_mask, _mm_add_ps(_mm_loadu_ps(r + j + 4), _mm_loadu_ps(g + j + 4))));
    m2 = _mm_max_ps(
        m2, _mm_and_ps(abs_mask, _mm_add_ps(_mm_loadu_ps(r + j + 8), _mm_loadu_ps(g + j + 8))));
    m3 = _mm_max_ps(
        m3, _mm_and_ps(abs_mask, _mm_add_ps(_mm_loadu_ps(r + j + 12), _mm_loadu_ps(g + j + 12))));
  }
  for (; j + 4 <= n; j += 4) {
    m0 = _mm_max_ps(m0, _mm_and_ps(abs_mask, _mm_add_ps(_mm_loadu_ps(r + j), _mm_loadu_ps(g + j))));
  }
  m0 = _mm_max_ps(_mm_max_ps(m0, m1), _mm_max_ps(m2, m3));
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, m0);
  float m = lanes[0];
  for (int i = 1; i < 4; ++i) m = lanes[i] > m ? lanes[i] : m;
  const float tail = MaxAbsSumScalar(r + j, g + j, n - j);
  return tail > m ? tail : m;
}

inline float MaxAbsSumChecked(const float* r, const float* g, size_t n, bool* bad) {
  const __m128i abs_mask = _mm_set1_epi32(0x7FFFFFFF);
  const __m128i bias = _mm_set1_epi32(0x00800000);
  __m128 m0 = _mm_setzero_ps(), m1 = m0, m2 = m0, m3 = m0;
  __m128i acc = _mm_setzero_si128();
  size_t j = 0;
  auto step = [&](size_t o, __m128& m) {
    const __m128i a = _mm_and_si128(
        _mm_castps_si128(_mm_add_ps(_mm_loadu_ps(r + o), _mm_loadu_ps(g + o))), abs_mask);
    acc = _mm_or_si128(acc, _mm_add_epi32(a, bias));
    m = _mm_max_ps(m, _mm_castsi128_ps(a));
  };
  for (; j + 16 <= n; j += 16) {
    step(j, m0);
    step(j + 4, m1);
    step(j + 8, m2);
    step(j + 12, m3);
  }
  for (; j + 4 <= n; j += 4) step(j, m0);
  m0 = _mm_max_ps(_mm_max_ps(m0, m1), _mm_max_ps(m2, m3));
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, m0);
  float m = lanes[0];
  for (int i = 1; i < 4; ++i) m = lanes[i] > m ? lanes[i] : m;
  if (_mm_movemask_ps(_mm_castsi128_ps(acc))) *bad = true;
  const float tail = MaxAbsSumCheckedScalar(r + j, g + j, n - j, bad);
  return tail > m ? tail : m;
}

// Vector versions: groups of 4 elements (a group never straddles a 64-bit
// word, as 64 is a multiple of 4), then the last len % 4 one by one.
// One group of 4 of the selection rule: G = r + g, and the lanes where
// |G + g| >= m and G != 0 (all ones) or not (zero).
struct PickGroup {
  __m128 G;
  __m128 pick;
};
inline PickGroup Pick4(const float* r, const float* g, __m128 vm) {
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7FFFFFFF));
  const __m128 gv = _mm_loadu_ps(g);
  const __m128 G = _mm_add_ps(_mm_loadu_ps(r), gv);
  const __m128 H = _mm_add_ps(G, gv);
  return {
      G, _mm_and_ps(_mm_cmpge_ps(_mm_and_ps(H, abs_mask), vm), _mm_cmpneq_ps(G, _mm_setzero_ps()))};
}

inline void SelectTernary(float* r, const float* g, size_t len, float m, float s, uint64_t* sel,
                          uint64_t* neg) {
  const __m128 sign_mask = _mm_castsi128_ps(_mm_set1_epi32(static_cast<int>(0x80000000u)));
  const __m128 vm = _mm_set1_ps(m);
  const __m128 vs = _mm_set1_ps(s);
  uint64_t sw = 0, nw = 0;
  size_t j = 0;
  for (; j + 4 <= len; j += 4) {
    const auto [G, pick] = Pick4(r + j, g + j, vm);
    const __m128 q = _mm_and_ps(_mm_or_ps(vs, _mm_and_ps(G, sign_mask)), pick);
    _mm_storeu_ps(r + j, _mm_sub_ps(G, q));
    const int t = static_cast<int>(j % 64);
    sw |= static_cast<uint64_t>(_mm_movemask_ps(pick)) << t;
    nw |= static_cast<uint64_t>(_mm_movemask_ps(_mm_and_ps(pick, G))) << t;
    if (t == 60) {
      sel[j / 64] = sw;
      neg[j / 64] = nw;
      sw = nw = 0;
    }
  }
  if (j == len) {
    if (len % 64) {
      sel[len / 64] = sw;
      neg[len / 64] = nw;
    }
    return;
  }
  // The tail shares its word with the preceding groups (len % 64 >= 1).
  uint64_t ts = 0, tn = 0;
  SelectTernaryScalar(r + j, g + j, len - j, m, s, &ts, &tn);
  sel[j / 64] = sw | (ts << (j % 64));
  neg[j / 64] = nw | (tn << (j % 64));
}

inline void SelectKeep(float* r, const float* g, size_t len, float m, uint64_t* sel) {
  const __m128 vm = _mm_set1_ps(m);
  uint64_t sw = 0;
  size_t j = 0;
  for (; j + 4 <= len; j += 4) {
    const auto [G, pick] = Pick4(r + j, g + j, vm);
    _mm_storeu_ps(r + j, G);
    const int t = static_cast<int>(j % 64);
    sw |= static_cast<uint64_t>(_mm_movemask_ps(pick)) << t;
    if (t == 60) {
      sel[j / 64] = sw;
      sw = 0;
    }
  }
  if (j == len) {
    if (len % 64) sel[len / 64] = sw;
    return;
  }
  uint64_t ts = 0;
  SelectKeepScalar(r + j, g + j, len - j, m, &ts);
  sel[j / 64] = sw | (ts << (j % 64));
}

inline void NegativeBits(const float* g, size_t n, uint8_t* out) {
  const __m128 zero = _mm_setzero_ps();
  size_t b = 0;
  for (; 8 * b + 8 <= n; ++b) {
    const int lo = _mm_movemask_ps(_mm_cmplt_ps(_mm_loadu_ps(g + 8 * b), zero));
    const int hi = _mm_movemask_ps(_mm_cmplt_ps(_mm_loadu_ps(g + 8 * b + 4), zero));
    out[b] = static_cast<uint8_t>(lo | (hi << 4));
  }
  if (8 * b < n) NegativeBitsScalar(g + 8 * b, n - 8 * b, out + b);
}

inline bool AnyHugeOrNonFinite(const float* g, size_t n) {
  const __m128i abs_mask = _mm_set1_epi32(0x7FFFFFFF);
  const __m128i bias = _mm_set1_epi32(0x01000000);
  __m128i a0 = _mm_setzero_si128(), a1 = a0;
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + j));
    const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + j + 4));
    a0 = _mm_or_si128(a0, _mm_add_epi32(_mm_and_si128(x0, abs_mask), bias));
    a1 = _mm_or_si128(a1, _mm_add_epi32(_mm_and_si128(x1, abs_mask), bias));
  }
  const int any = _mm_movemask_ps(_mm_castsi128_ps(_mm_or_si128(a0, a1)));
  return any != 0 || AnyHugeOrNonFiniteScalar(g + j, n - j);
}

#else

inline float MaxAbsSum(const float* r, const float* g, size_t n) {
  return MaxAbsSumScalar(r, g, n);
}
inline bool AnyHugeOrNonFinite(const float* g, size_t n) { return AnyHugeOrNonFiniteScalar(g, n); }
inline float MaxAbsSumChecked(const float* r, const float* g, size_t n, bool* bad) {
  return MaxAbsSumCheckedScalar(r, g, n, bad);
}
inline void SelectTernary(float* r, const float* g, size_t len, float m, float s, uint64_t* sel,
                          uint64_t* neg) {
  SelectTernaryScalar(r, g, len, m, s, sel, neg);
}
inline void SelectKeep(float* r, const float* g, size_t len, float m, uint64_t* sel) {
  SelectKeepScalar(r, g, len, m, sel);
}
inline void NegativeBits(const float* g, size_t n, uint8_t* out) { NegativeBitsScalar(g, n, out); }

#endif

}  // namespace adacomp::internal
