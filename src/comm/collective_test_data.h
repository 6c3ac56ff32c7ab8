// src/comm/collective_test_data.h: the inputs and expected results that the
// in-process and MPI communicator tests share, so that both check the same
// formulas (the MPI test also compares its sums with the in-process ones).
// Test-only header; pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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

// The reference sum: a scalar left fold in rank order.
inline std::vector<float> ExpectedSum(int ranks, size_t n, int salt) {
  std::vector<float> sum(n);
  for (size_t i = 0; i < n; ++i) {
    float acc = FloatOf(0, i, salt);
    for (int r = 1; r < ranks; ++r) acc = acc + FloatOf(r, i, salt);
    sum[i] = acc;
  }
  return sum;
}

}  // namespace adacomp::comm_test
