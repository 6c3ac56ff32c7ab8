// src/comm/collective_test_data.h: the inputs and expected results that the
// in-process and MPI communicator tests share, so that both check the same
// formulas (the MPI test also compares its sums with the in-process ones).
// Test-only header; pure functions.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../core/half.h"

namespace adacomp::comm_test {

inline uint32_t Mix(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t h = a * 0x9E3779B1u ^ (b + 0x7F4A7C15u) * 0x85EBCA77u ^ c * 0xC2B2AE3Du;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  return h;
}

inline uint8_t ByteOf(int rank, size_t i, int salt) {
  return static_cast<uint8_t>(
      Mix(static_cast<uint32_t>(rank), static_cast<uint32_t>(i), static_cast<uint32_t>(salt)) >> 8);
}

// Values of very different magnitudes, so that a different summation order
// would change the low bits of many sums.
inline float FloatOf(int rank, size_t i, int salt) {
  const uint32_t h = Mix(static_cast<uint32_t>(rank) + 1000, static_cast<uint32_t>(i),
                         static_cast<uint32_t>(salt));
  const float unit = static_cast<float>(h & 0xFFFFFF) / 16777216.0f - 0.5f;
  static const float kScales[4] = {1.0f, 1e3f, 1e-3f, 3e6f};
  return unit * kScales[h >> 30];
}

// Rank r contributes this many bytes to an AllGatherV of nominal size n:
// some ranks contribute half (0 when n is 1), so lengths vary across ranks.
inline size_t GatherLength(int rank, size_t n) { return rank % 3 == 1 ? n / 2 : n; }

inline std::vector<uint8_t> GatherInput(int rank, size_t n, int salt) {
  std::vector<uint8_t> v(GatherLength(rank, n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = ByteOf(rank, i, salt);
  return v;
}

// AllToAllV: the piece rank `from` addresses to rank `to`, of nominal size
// n; lengths vary with the pair (some n / 2, some empty).
inline size_t PieceLength(int from, int to, size_t n) {
  if ((from + to) % 4 == 3) return 0;
  return (from + 2 * to) % 3 == 1 ? n / 2 : n;
}

inline uint8_t PieceByteOf(int from, int to, size_t i, int salt) {
  return ByteOf(from * 4096 + to, i, salt);
}

// Every piece of rank `from`, for ranks 0 .. ranks - 1 in order, and their
// offsets (ranks + 1 entries).
inline std::vector<uint8_t> PiecesOf(int from, int ranks, size_t n, int salt,
                                     std::vector<size_t>* offsets) {
  std::vector<uint8_t> v;
  offsets->assign(1, 0);
  for (int to = 0; to < ranks; ++to) {
    for (size_t i = 0; i < PieceLength(from, to, n); ++i)
      v.push_back(PieceByteOf(from, to, i, salt));
    offsets->push_back(v.size());
  }
  return v;
}

// Inputs for the half-precision all-reduce: magnitudes up to 50, so that
// sums over 16 ranks stay far below half's 65504, and some tiny ones.
inline float HalfInputOf(int rank, size_t i, int salt) {
  const uint32_t h = Mix(static_cast<uint32_t>(rank) + 2000, static_cast<uint32_t>(i),
                         static_cast<uint32_t>(salt));
  const float unit = static_cast<float>(h & 0xFFFFFF) / 16777216.0f - 0.5f;
  static const float kScales[4] = {1.0f, 100.0f, 1e-3f, 1e-6f};
  return unit * kScales[h >> 30];
}

using InputFn = float (*)(int rank, size_t i, int salt);

// The first element of chunk c when n elements are cut into `ranks`
// chunks, the first n % ranks of them one element longer (c = ranks: n).
inline size_t ChunkStart(size_t n, int ranks, int c) {
  size_t start = 0;
  for (int k = 0; k < c; ++k) start += n / ranks + (static_cast<size_t>(k) < n % ranks ? 1 : 0);
  return start;
}

inline float RoundHalf(float x) { return internal::HalfToFloat(internal::FloatToHalf(x)); }

// The reference ring sum, scalar: element i of chunk c is the left fold
// that starts at rank c and goes round, ((x_c + x_{c+1}) + ...) mod P; with
// `half`, the partial sum is rounded to half before each addition and the
// result once more at the end.
inline std::vector<float> ExpectedSum(int ranks, size_t n, int salt, InputFn input = FloatOf,
                                      bool half = false) {
  std::vector<float> sum(n);
  for (int c = 0; c < ranks; ++c) {
    for (size_t i = ChunkStart(n, ranks, c); i < ChunkStart(n, ranks, c + 1); ++i) {
      float acc = input(c, i, salt);
      for (int k = 1; k < ranks; ++k) {
        acc = (half ? RoundHalf(acc) : acc) + input((c + k) % ranks, i, salt);
      }
      sum[i] = half ? RoundHalf(acc) : acc;
    }
  }
  return sum;
}

inline std::vector<float> ExpectedHalfSum(int ranks, size_t n, int salt) {
  return ExpectedSum(ranks, n, salt, HalfInputOf, true);
}

// The largest difference from the exact (double) sum that float rounding
// allows, per element: P - 1 float additions (each off by at most 2^-24 of
// the sum of magnitudes so far) and, with `half`, P roundings to half (2^-11
// relative, or 2^-25 absolute among half's subnormals). Returns the index of
// the first element outside it, or n.
inline size_t FirstOutsideRounding(const std::vector<float>& got, int ranks, int salt,
                                   InputFn input = FloatOf, bool half = false) {
  for (size_t i = 0; i < got.size(); ++i) {
    double exact = 0, magnitude = 0;
    for (int r = 0; r < ranks; ++r) {
      exact += input(r, i, salt);
      magnitude += std::fabs(input(r, i, salt));
    }
    double tol = 1.01 * (ranks - 1) * 0x1p-24 * magnitude;
    if (half) tol += 1.01 * ranks * (0x1p-11 * magnitude + 0x1p-25);
    if (!(std::fabs(got[i] - exact) <= tol)) return i;
  }
  return got.size();
}

}  // namespace adacomp::comm_test
