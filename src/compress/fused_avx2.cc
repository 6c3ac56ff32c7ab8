// AVX2 version of the fused AdaComp kernel (compress/fused.h), compiled with
// a function-level target attribute so the rest of the library stays
// baseline x86-64; BestFusedSelect picks it only when the CPU has AVX2.
#include <bit>
#include <cstdint>

#include "compress/fused.h"
#include "core/simd.h"

#if ADACOMP_X86_SIMD
#include <immintrin.h>
#endif

namespace adacomp::internal {

#if ADACOMP_X86_SIMD
namespace {

// kCompact[mask]: byte i = the lane of the i-th set bit of mask (8 lanes).
struct CompactTable {
  uint64_t e[256];
  constexpr CompactTable() : e() {
    for (int m = 0; m < 256; ++m) {
      uint64_t v = 0;
      int k = 0;
      for (int lane = 0; lane < 8; ++lane) {
        if (m & (1 << lane)) v |= static_cast<uint64_t>(lane) << (8 * k++);
      }
      e[m] = v;
    }
  }
};
constexpr CompactTable kCompact;

// Lanes [0, k) all ones, the rest zero: load 8 ints at kTailMask + 8 - k.
alignas(64) constexpr int32_t kTailMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                               0,  0,  0,  0,  0,  0,  0,  0};

ADACOMP_TARGET_AVX2 inline __attribute__((always_inline)) size_t Compact(size_t first, __m256 G,
                                                                         int mask, uint32_t* idx,
                                                                         float* val, size_t c) {
  const __m256i lanes =
      _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(kCompact.e[mask])));
  const __m256i ids =
      _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(first))), lanes);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + c), ids);
  _mm256_storeu_ps(val + c, _mm256_permutevar8x32_ps(G, lanes));
  return c + static_cast<size_t>(std::popcount(static_cast<unsigned>(mask)));
}

ADACOMP_TARGET_AVX2 inline __attribute__((always_inline)) int Pick(__m256 G, __m256 gv, __m256 vm) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 H = _mm256_add_ps(G, gv);
  const __m256 pick = _mm256_and_ps(_mm256_cmp_ps(_mm256_and_ps(H, abs_mask), vm, _CMP_GE_OQ),
                                    _mm256_cmp_ps(G, _mm256_setzero_ps(), _CMP_NEQ_OQ));
  return _mm256_movemask_ps(pick);
}

// The largest of 8 non-negative floats, as bits (a NaN wins).
ADACOMP_TARGET_AVX2 inline __attribute__((always_inline)) float HMaxBits(__m256i v) {
  __m128i h = _mm_max_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(1, 0, 3, 2)));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(2, 3, 0, 1)));
  return std::bit_cast<float>(static_cast<uint32_t>(_mm_cvtsi128_si32(h)));
}

}  // namespace

namespace {

// kStore: r[j] = G is stored (FusedSelectAvx2); otherwise r only receives
// the deferred corrections (FusedSelectNoStoreAvx2).
template <bool kStore>
ADACOMP_TARGET_AVX2 inline __attribute__((always_inline)) size_t FusedSelectImpl(
    float* r, const float* g, size_t n, size_t bin, size_t first_bin, size_t last_bin,
    const uint32_t** pend, const uint32_t* pend_end, float s_prev, float* gmax, double* gsum,
    float* gtop, uint32_t* idx, float* val, uint64_t* hist) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 zero = _mm256_setzero_ps();
  const uint32_t* p = *pend;
  size_t c = 0;
  // Software prefetch distance of pass A, and how far ahead of the bin and
  // in what batches the deferred corrections are applied (all in elements;
  // measured on the benchmark, docs/performance.md).
  constexpr size_t kAhead = 2048;
  constexpr size_t kLead = 128;
  constexpr size_t kBatch = 512;
  static_assert(kLead + kBatch <= kFusedCorrectionsAhead);
  size_t applied_upto = 0;
  double sum = *gsum;
  float top = *gtop;
  // |R + dW| as bits, maxima taken on the bits (so a NaN is not skipped).
#define ADACOMP_ABS_SUM(o)           \
  _mm256_castps_si256(_mm256_and_ps( \
      abs_mask, _mm256_add_ps(_mm256_loadu_ps(rb + (o)), _mm256_loadu_ps(gb + (o)))))
  for (size_t b = first_bin; b < last_bin; ++b) {
    const size_t begin = b * bin;
    const size_t len = n - begin < bin ? n - begin : bin;
    const size_t end = begin + len;
    // Corrections are applied kLead elements ahead of the bin being read,
    // so that their stores have retired before the vector loads of the bin
    // (a wide load over a pending narrow store would stall).
    // They are applied in batches of about kBatch elements (one loop exit,
    // so one mispredicted branch, per batch rather than per bin).
    if (end + kLead > applied_upto) {
      applied_upto = end + kLead + kBatch;
      for (; p != pend_end && *p < applied_upto; ++p) r[*p] = ApplyScale(r[*p], s_prev);
    }
    float* rb = r + begin;
    const float* gb = g + begin;
    const size_t full = len & ~size_t{7};
    const size_t rest = len - full;
    const size_t c0 = c;
    if (full) {
      // Max |R + dW|: two accumulators; a partial last vector is read
      // overlapping the one before (max does not mind duplicates).
      __m256i m0 = _mm256_setzero_si256(), m1 = _mm256_setzero_si256();
      size_t j = 0;
      for (; j + 16 <= full; j += 16) {
        _mm_prefetch(reinterpret_cast<const char*>(rb + j + kAhead), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(gb + j + kAhead), _MM_HINT_T0);
        m0 = _mm256_max_epu32(m0, ADACOMP_ABS_SUM(j));
        m1 = _mm256_max_epu32(m1, ADACOMP_ABS_SUM(j + 8));
      }
      if (j < full) m0 = _mm256_max_epu32(m0, ADACOMP_ABS_SUM(j));
      if (rest) m1 = _mm256_max_epu32(m1, ADACOMP_ABS_SUM(len - 8));
      const float m = HMaxBits(_mm256_max_epu32(m0, m1));
      gmax[b] = m;
      sum += m;
      top = MaxAbsBitsOf(top, m);
      const __m256 vm = _mm256_set1_ps(m);
      // A partial last vector: computed first, from the old R, over the 8
      // last elements; stored after the main loop (its overlap with the
      // main loop's stores holds the same G); only its last `rest` lanes are
      // selected.
      __m256 gt = zero, Gt = zero;
      int tail_mask = 0;
      if (rest) {
        gt = _mm256_loadu_ps(gb + len - 8);
        Gt = _mm256_add_ps(_mm256_loadu_ps(rb + len - 8), gt);
        tail_mask = Pick(Gt, gt, vm) & (0xFF << (8 - rest)) & 0xFF;
      }
      for (j = 0; j < full; j += 8) {
        const __m256 gv = _mm256_loadu_ps(gb + j);
        const __m256 G = _mm256_add_ps(_mm256_loadu_ps(rb + j), gv);
        if constexpr (kStore) _mm256_storeu_ps(rb + j, G);
        c = Compact(begin + j, G, Pick(G, gv, vm), idx, val, c);
      }
      if (rest) {
        if constexpr (kStore) _mm256_storeu_ps(rb + len - 8, Gt);
        c = Compact(begin + len - 8, Gt, tail_mask, idx, val, c);
      }
    } else {
      // Fewer than 8 elements: masked loads and store.
      const __m256i tail =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kTailMask + 8 - rest));
      const __m256 gv = _mm256_maskload_ps(gb, tail);
      const __m256 G = _mm256_add_ps(_mm256_maskload_ps(rb, tail), gv);
      const float m = HMaxBits(_mm256_castps_si256(_mm256_and_ps(abs_mask, G)));
      gmax[b] = m;
      sum += m;
      top = MaxAbsBitsOf(top, m);
      if constexpr (kStore) _mm256_maskstore_ps(rb, tail, G);
      c = Compact(begin, G, Pick(G, gv, _mm256_set1_ps(m)) & ((1 << rest) - 1), idx, val, c);
    }
    const size_t k = c - c0;
    hist[k < 16 ? k : 16] += 1;
  }
#undef ADACOMP_ABS_SUM
  *pend = p;
  *gsum = sum;
  *gtop = top;
  return c;
}

}  // namespace

ADACOMP_TARGET_AVX2 size_t FusedSelectAvx2(float* r, const float* g, size_t n, size_t bin,
                                           size_t first_bin, size_t last_bin, const uint32_t** pend,
                                           const uint32_t* pend_end, float s_prev, float* gmax,
                                           double* gsum, float* gtop, uint32_t* idx, float* val,
                                           uint64_t* hist) {
  return FusedSelectImpl<true>(r, g, n, bin, first_bin, last_bin, pend, pend_end, s_prev, gmax,
                               gsum, gtop, idx, val, hist);
}

ADACOMP_TARGET_AVX2 size_t FusedSelectNoStoreAvx2(float* r, const float* g, size_t n, size_t bin,
                                                  size_t first_bin, size_t last_bin,
                                                  const uint32_t** pend, const uint32_t* pend_end,
                                                  float s_prev, float* gmax, double* gsum,
                                                  float* gtop, uint32_t* idx, float* val,
                                                  uint64_t* hist) {
  return FusedSelectImpl<false>(r, g, n, bin, first_bin, last_bin, pend, pend_end, s_prev, gmax,
                                gsum, gtop, idx, val, hist);
}

ADACOMP_TARGET_AVX2 void AddStreamAvx2(const float* a, const float* b, float* out, size_t n) {
  size_t j = 0;
  // Up to the first 32-byte boundary of out with plain stores, then 8 lanes
  // at a time with streaming stores (no read for ownership of out's lines).
  for (; j < n && (reinterpret_cast<uintptr_t>(out + j) & 31) != 0; ++j) out[j] = a[j] + b[j];
  for (; j + 8 <= n; j += 8) {
    _mm256_stream_ps(out + j, _mm256_add_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j)));
  }
  for (; j < n; ++j) out[j] = a[j] + b[j];
}

void StreamFence() { _mm_sfence(); }

ADACOMP_TARGET_AVX2 bool OneBitSumsAvx2(const float* r, const float* g, size_t n, double* pos,
                                        double* neg, uint64_t* neg_n) {
  // One 4-lane double accumulator per side: lane l sums elements j + l, in
  // order, exactly as the scalar twin.
  __m256d p = _mm256_loadu_pd(pos), q = _mm256_loadu_pd(neg);
  const __m256d zero = _mm256_setzero_pd();
  const __m128i abs_mask = _mm_set1_epi32(0x7FFFFFFF);
  const __m128i bias = _mm_set1_epi32(0x00800000);
  __m128i acc = _mm_setzero_si128();
  uint64_t cnt = 0;
  size_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const __m128 G = _mm_add_ps(_mm_loadu_ps(r + j), _mm_loadu_ps(g + j));
    acc = _mm_or_si128(acc, _mm_add_epi32(_mm_and_si128(_mm_castps_si128(G), abs_mask), bias));
    const __m256d d = _mm256_cvtps_pd(G);
    const __m256d minus = _mm256_cmp_pd(d, zero, _CMP_LT_OQ);
    q = _mm256_add_pd(q, _mm256_and_pd(minus, d));
    p = _mm256_add_pd(p, _mm256_andnot_pd(minus, d));
    cnt += static_cast<uint64_t>(std::popcount(static_cast<unsigned>(_mm256_movemask_pd(minus))));
  }
  _mm256_storeu_pd(pos, p);
  _mm256_storeu_pd(neg, q);
  *neg_n += cnt;
  const bool ok = _mm_movemask_ps(_mm_castsi128_ps(acc)) == 0;
  // The tail into lane 0, as the scalar twin does.
  double p0[4] = {pos[0], 0, 0, 0}, q0[4] = {neg[0], 0, 0, 0};
  const bool tail_ok = OneBitSumsScalar(r + j, g + j, n - j, p0, q0, neg_n);
  pos[0] = p0[0];
  neg[0] = q0[0];
  return ok && tail_ok;
}

ADACOMP_TARGET_AVX2 void OneBitApplyAvx2(float* r, const float* g, size_t n, float pos_mean,
                                         float neg_mean, uint8_t* bits) {
  const __m256 vp = _mm256_set1_ps(pos_mean), vn = _mm256_set1_ps(neg_mean);
  const __m256 zero = _mm256_setzero_ps();
  size_t b = 0;
  for (; 8 * b + 8 <= n; ++b) {
    const __m256 G = _mm256_add_ps(_mm256_loadu_ps(r + 8 * b), _mm256_loadu_ps(g + 8 * b));
    const __m256 minus = _mm256_cmp_ps(G, zero, _CMP_LT_OQ);
    _mm256_storeu_ps(r + 8 * b, _mm256_sub_ps(G, _mm256_blendv_ps(vp, vn, minus)));
    bits[b] = static_cast<uint8_t>(_mm256_movemask_ps(minus));
  }
  if (8 * b < n) OneBitApplyScalar(r + 8 * b, g + 8 * b, n - 8 * b, pos_mean, neg_mean, bits + b);
}

ADACOMP_TARGET_AVX2 size_t CompactAtLeastAvx2(const float* g, size_t n, float tau, uint32_t* idx) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 vt = _mm256_set1_ps(tau);
  size_t c = 0, j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 a = _mm256_and_ps(abs_mask, _mm256_loadu_ps(g + j));
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(a, vt, _CMP_GE_OQ));
    const __m256i lanes =
        _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(kCompact.e[mask])));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + c),
                        _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(j)), lanes));
    c += static_cast<size_t>(std::popcount(static_cast<unsigned>(mask)));
  }
  const size_t t = CompactAtLeastScalar(g + j, n - j, tau, idx + c);
  for (size_t e = c; e < c + t; ++e) idx[e] += static_cast<uint32_t>(j);
  return c + t;
}

FusedSelectFn BestFusedSelect() { return CpuHasAvx2() ? &FusedSelectAvx2 : &FusedSelectScalar; }
FusedSelectFn BestFusedSelectNoStore() {
  return CpuHasAvx2() ? &FusedSelectNoStoreAvx2 : &FusedSelectNoStoreScalar;
}
void AddStream(const float* a, const float* b, float* out, size_t n) {
  if (CpuHasAvx2()) {
    AddStreamAvx2(a, b, out, n);
  } else {
    AddScalar(a, b, out, n);
  }
}
bool OneBitSums(const float* r, const float* g, size_t n, double* pos, double* neg,
                uint64_t* neg_n) {
  return CpuHasAvx2() ? OneBitSumsAvx2(r, g, n, pos, neg, neg_n)
                      : OneBitSumsScalar(r, g, n, pos, neg, neg_n);
}
void OneBitApply(float* r, const float* g, size_t n, float pos_mean, float neg_mean,
                 uint8_t* bits) {
  if (CpuHasAvx2()) {
    OneBitApplyAvx2(r, g, n, pos_mean, neg_mean, bits);
  } else {
    OneBitApplyScalar(r, g, n, pos_mean, neg_mean, bits);
  }
}
size_t CompactAtLeast(const float* g, size_t n, float tau, uint32_t* idx) {
  return CpuHasAvx2() ? CompactAtLeastAvx2(g, n, tau, idx) : CompactAtLeastScalar(g, n, tau, idx);
}

#else

FusedSelectFn BestFusedSelect() { return &FusedSelectScalar; }
FusedSelectFn BestFusedSelectNoStore() { return &FusedSelectNoStoreScalar; }
void AddStream(const float* a, const float* b, float* out, size_t n) { AddScalar(a, b, out, n); }
void StreamFence() {}
bool OneBitSums(const float* r, const float* g, size_t n, double* pos, double* neg,
                uint64_t* neg_n) {
  return OneBitSumsScalar(r, g, n, pos, neg, neg_n);
}
void OneBitApply(float* r, const float* g, size_t n, float pos_mean, float neg_mean,
                 uint8_t* bits) {
  OneBitApplyScalar(r, g, n, pos_mean, neg_mean, bits);
}
size_t CompactAtLeast(const float* g, size_t n, float tau, uint32_t* idx) {
  return CompactAtLeastScalar(g, n, tau, idx);
}

#endif

}  // namespace adacomp::internal
