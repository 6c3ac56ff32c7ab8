// The fused AdaComp selection kernel (internal to adacomp_core): one pass per
// bin that forms G = R + dW, the bin's max |G|, the selection and the
// compaction of the selected entries, with the bin in L1 between the two
// inner loops. A non-finite R + dW makes its bin's maximum and *gtop
// non-finite (the maxima are taken on the bits of |G|, so a NaN is not
// skipped); r is then written as for finite values, and a caller that did
// not check the gradient first sees it in *gtop and discards the pass.
//
// FusedSelectScalar is the plain definition (the twin the tests compare the
// vector version with); FusedSelectAvx2 is used when the CPU has AVX2
// (chosen at run time, so the library runs on any x86-64). Both are
// reentrant and bit-identical.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/cpu.h"

namespace adacomp::internal {

// Processes bins [first_bin, last_bin) of a tensor of n elements cut into
// bins of `bin` elements (the last may be shorter). For each bin b:
//   first the pending corrections of the previous step that fall in the bin
//   (*pend advances over them; pend_end bounds the list): r[i] -= s_prev
//   with the sign of r[i], i.e. R = G - sign(G) s_prev, deferred from the
//   previous step until its scale was known (compress/adacomp.cc);
//   gmax[b] = max |r[j] + g[j]| over the bin (on the bits: a NaN is the
//   largest); *gsum += gmax[b] (in double, in bin order: the sum the scale
//   is the mean of); *gtop = max(*gtop, gmax[b]) (also on the bits);
//   r[j] = G = r[j] + g[j] for every j of the bin;
//   each j with |G + g[j]| >= gmax[b] and G != 0 is appended: idx[c] = j,
//   val[c] = G, in increasing j;
//   hist[min(count of the bin, 16)] += 1.
// Returns the number of entries appended. idx and val must have room for
// every element of the bins plus 8 (the vector version stores 8 at a time).
using FusedSelectFn = size_t (*)(float* r, const float* g, size_t n, size_t bin, size_t first_bin,
                                 size_t last_bin, const uint32_t** pend, const uint32_t* pend_end,
                                 float s_prev, float* gmax, double* gsum, float* gtop,
                                 uint32_t* idx, float* val, uint64_t* hist);

// How far past the end of the bin it reads a fused kernel may apply the
// deferred corrections (in elements; FusedSelectAvx2 applies them ahead in
// batches). A caller that fills r chunk by chunk (adacomp.cc's first
// compression after Mark()) fills this much more before each call.
inline constexpr size_t kFusedCorrectionsAhead = 1024;

// The deferred update of one selected element: R = G - sign(G) s (G != 0).
inline float ApplyScale(float stored_g, float s) { return stored_g - std::copysign(s, stored_g); }

// The larger of two non-negative floats (or NaNs with the sign bit clear),
// compared as bits: for finite values the float maximum, and a NaN wins.
inline float MaxAbsBitsOf(float a, float b) {
  const uint32_t x = std::bit_cast<uint32_t>(a), y = std::bit_cast<uint32_t>(b);
  return std::bit_cast<float>(x > y ? x : y);
}

template <bool kStore>
inline size_t FusedSelectScalarT(float* r, const float* g, size_t n, size_t bin, size_t first_bin,
                                 size_t last_bin, const uint32_t** pend, const uint32_t* pend_end,
                                 float s_prev, float* gmax, double* gsum, float* gtop,
                                 uint32_t* idx, float* val, uint64_t* hist) {
  size_t c = 0;
  const uint32_t* p = *pend;
  for (size_t b = first_bin; b < last_bin; ++b) {
    const size_t begin = b * bin;
    const size_t end = n - begin < bin ? n : begin + bin;
    for (; p != pend_end && *p < end; ++p) r[*p] = ApplyScale(r[*p], s_prev);
    float m = 0.0f;
    for (size_t j = begin; j < end; ++j) m = MaxAbsBitsOf(m, std::fabs(r[j] + g[j]));
    gmax[b] = m;
    *gsum += m;
    *gtop = MaxAbsBitsOf(*gtop, m);
    const size_t c0 = c;
    for (size_t j = begin; j < end; ++j) {
      const float gj = r[j] + g[j];
      const float hj = gj + g[j];
      if constexpr (kStore) r[j] = gj;
      idx[c] = static_cast<uint32_t>(j);
      val[c] = gj;
      c += (std::fabs(hj) >= m) & (gj != 0.0f);
    }
    const size_t k = c - c0;
    hist[k < 16 ? k : 16] += 1;
  }
  *pend = p;
  return c;
}

inline size_t FusedSelectScalar(float* r, const float* g, size_t n, size_t bin, size_t first_bin,
                                size_t last_bin, const uint32_t** pend, const uint32_t* pend_end,
                                float s_prev, float* gmax, double* gsum, float* gtop, uint32_t* idx,
                                float* val, uint64_t* hist) {
  return FusedSelectScalarT<true>(r, g, n, bin, first_bin, last_bin, pend, pend_end, s_prev, gmax,
                                  gsum, gtop, idx, val, hist);
}

// The same without storing G: r only receives the deferred corrections (so
// it ends as the previous step's residue, materialized), and the caller
// writes G = r + g elsewhere (AddStream; adacomp.cc's first compression
// after Mark()).
inline size_t FusedSelectNoStoreScalar(float* r, const float* g, size_t n, size_t bin,
                                       size_t first_bin, size_t last_bin, const uint32_t** pend,
                                       const uint32_t* pend_end, float s_prev, float* gmax,
                                       double* gsum, float* gtop, uint32_t* idx, float* val,
                                       uint64_t* hist) {
  return FusedSelectScalarT<false>(r, g, n, bin, first_bin, last_bin, pend, pend_end, s_prev, gmax,
                                   gsum, gtop, idx, val, hist);
}

// out[j] = a[j] + b[j] (out apart from a and b).
inline void AddScalar(const float* a, const float* b, float* out, size_t n) {
  for (size_t j = 0; j < n; ++j) out[j] = a[j] + b[j];
}

// onebit, pass 1 (read only): G = r + g; for lane l = j % 4 (the tail, j >=
// n - n % 4, goes to lane 0) pos[l] += G where G >= 0 (or -0), neg[l] += G
// where G < 0, in double, in element order; *neg_n += count of G < 0.
// Returns false if some G is not finite (sums then meaningless).
inline bool OneBitSumsScalar(const float* r, const float* g, size_t n, double* pos, double* neg,
                             uint64_t* neg_n) {
  uint32_t acc = 0;
  uint64_t cnt = 0;
  size_t j = 0;
  for (; j + 4 <= n; j += 4) {
    for (int l = 0; l < 4; ++l) {
      const float G = r[j + l] + g[j + l];
      acc |= (std::bit_cast<uint32_t>(G) & 0x7FFFFFFFu) + 0x00800000u;
      const bool minus = G < 0.0f;
      neg[l] += minus ? static_cast<double>(G) : 0.0;
      pos[l] += minus ? 0.0 : static_cast<double>(G);
      cnt += minus;
    }
  }
  for (; j < n; ++j) {
    const float G = r[j] + g[j];
    acc |= (std::bit_cast<uint32_t>(G) & 0x7FFFFFFFu) + 0x00800000u;
    const bool minus = G < 0.0f;
    neg[0] += minus ? static_cast<double>(G) : 0.0;
    pos[0] += minus ? 0.0 : static_cast<double>(G);
    cnt += minus;
  }
  *neg_n += cnt;
  return (acc & 0x80000000u) == 0;
}

// onebit, pass 2: G = r + g; bit j of bits (ceil(n / 8) bytes, padding
// zero) = G < 0; r = G - (G < 0 ? neg_mean : pos_mean).
inline void OneBitApplyScalar(float* r, const float* g, size_t n, float pos_mean, float neg_mean,
                              uint8_t* bits) {
  for (size_t b = 0; b * 8 < n; ++b) {
    unsigned byte = 0;
    for (size_t j = 8 * b; j < n && j < 8 * b + 8; ++j) {
      const float G = r[j] + g[j];
      const bool minus = G < 0.0f;
      byte |= static_cast<unsigned>(minus) << (j % 8);
      r[j] = G - (minus ? neg_mean : pos_mean);
    }
    bits[b] = static_cast<uint8_t>(byte);
  }
}

// threshold: appends to idx every j with |g[j]| >= tau (increasing);
// returns the count. idx needs room for n + 8.
inline size_t CompactAtLeastScalar(const float* g, size_t n, float tau, uint32_t* idx) {
  size_t c = 0;
  for (size_t j = 0; j < n; ++j) {
    idx[c] = static_cast<uint32_t>(j);
    c += std::fabs(g[j]) >= tau;
  }
  return c;
}

#if ADACOMP_X86_SIMD
bool OneBitSumsAvx2(const float* r, const float* g, size_t n, double* pos, double* neg,
                    uint64_t* neg_n);
void OneBitApplyAvx2(float* r, const float* g, size_t n, float pos_mean, float neg_mean,
                     uint8_t* bits);
size_t CompactAtLeastAvx2(const float* g, size_t n, float tau, uint32_t* idx);
size_t FusedSelectAvx2(float* r, const float* g, size_t n, size_t bin, size_t first_bin,
                       size_t last_bin, const uint32_t** pend, const uint32_t* pend_end,
                       float s_prev, float* gmax, double* gsum, float* gtop, uint32_t* idx,
                       float* val, uint64_t* hist);
size_t FusedSelectNoStoreAvx2(float* r, const float* g, size_t n, size_t bin, size_t first_bin,
                              size_t last_bin, const uint32_t** pend, const uint32_t* pend_end,
                              float s_prev, float* gmax, double* gsum, float* gtop, uint32_t* idx,
                              float* val, uint64_t* hist);
void AddStreamAvx2(const float* a, const float* b, float* out, size_t n);
#endif

// The fastest kernel this CPU runs, and its twin that does not store G.
FusedSelectFn BestFusedSelect();
FusedSelectFn BestFusedSelectNoStore();
// AddScalar's result, with streaming stores where the CPU has them (out's
// lines are not read first and leave the cache); StreamFence() orders them
// before what follows (call it before another thread reads out).
void AddStream(const float* a, const float* b, float* out, size_t n);
void StreamFence();
// Dispatching versions of the baselines' kernels.
bool OneBitSums(const float* r, const float* g, size_t n, double* pos, double* neg,
                uint64_t* neg_n);
void OneBitApply(float* r, const float* g, size_t n, float pos_mean, float neg_mean, uint8_t* bits);
size_t CompactAtLeast(const float* g, size_t n, float tau, uint32_t* idx);

}  // namespace adacomp::internal
