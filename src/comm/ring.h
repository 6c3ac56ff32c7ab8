// src/comm/ring.h: the ring all-reduce that both Communicator
// implementations follow exactly (internal to adacomp_comm), and the byte
// counts both report in Communicator::traffic().
//
// The buffer of n floats is cut into P chunks (RingChunk: the first n % P
// chunks hold one element more). Reduce-scatter: at step s = 0 .. P-2 rank r
// sends chunk (r - s) mod P to rank r + 1 and adds the chunk (r - s - 1) mod
// P it receives from rank r - 1 into its own values; after P - 1 steps rank
// r holds the whole sum of chunk (r + 1) mod P. All-gather: at step s rank r
// sends chunk (r + 1 - s) mod P on and stores the chunk (r - s) mod P it
// receives. So every element of chunk c is the left fold that starts at
// rank c and goes round the ring:
//     ((x_c + x_{c+1}) + x_{c+2}) + ... + x_{c+P-1}   (indices mod P)
// the same on every rank and in both implementations (float addition is
// commutative bit for bit; the partial sum is always the left operand).
// Every rank sends and receives 2 (P - 1) chunks: 2 (P - 1) / P of the buffer
// (to within a chunk's rounding).
//
// Half mode (AllReduceSumHalf): the values on the wire are IEEE binary16
// (src/core/half.h, round to nearest even, software, identical on every
// CPU). A rank rounds the partial sum to half as it sends it; the receiver
// widens it and adds its own float: acc = float(half(acc)) + x. The finished
// chunk is rounded to half once more by its owner, and that half is what every
// rank returns (widened), so results are bit-identical everywhere; for P = 1
// the result is the input rounded to half. Values beyond +-65504 become +-Inf.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../core/half.h"

namespace adacomp::comm_internal {

struct Chunk {
  size_t begin = 0;
  size_t size = 0;
};

// Chunk c of a buffer of n elements cut into p chunks.
inline Chunk RingChunk(size_t n, int p, int c) {
  const size_t base = n / static_cast<size_t>(p);
  const size_t extra = n % static_cast<size_t>(p);
  const size_t uc = static_cast<size_t>(c);
  return {uc * base + (uc < extra ? uc : extra), base + (uc < extra ? 1 : 0)};
}

inline int Mod(int a, int p) { return ((a % p) + p) % p; }

// acc[i] = acc[i] + own[i]: one hop of the fp32 ring (acc is the partial sum).
inline void AddPartial(float* acc, const float* own, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = acc[i] + own[i];
}

// work[i] = float(partial[i]) + work[i]: one hop of the half ring, where the
// rank's own values are in work and the received partial sum in partial.
inline void AddHalfPartial(float* work, const uint16_t* partial, size_t n) {
  for (size_t i = 0; i < n; ++i) work[i] = internal::HalfToFloat(partial[i]) + work[i];
}

// acc[i] = float(half(acc[i])) + own[i]: the same hop written from the
// partial sum's side (the in-process group's fold).
inline void AddPartialViaHalf(float* acc, const float* own, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    acc[i] = internal::HalfToFloat(internal::FloatToHalf(acc[i])) + own[i];
  }
}

inline void ToHalf(const float* x, uint16_t* h, size_t n) {
  for (size_t i = 0; i < n; ++i) h[i] = internal::FloatToHalf(x[i]);
}
inline void FromHalf(const uint16_t* h, float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = internal::HalfToFloat(h[i]);
}
inline void RoundToHalf(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = internal::HalfToFloat(internal::FloatToHalf(x[i]));
}

// Bytes one rank's collective moves; both implementations add these to
// Communicator::traffic() (the in-process group counts what the MPI
// communicator sends for the same call, so both report the same figures).
inline constexpr uint64_t kHeaderBytes = 32;  // per peer per collective, each way

// Rank `rank`'s bytes sent and received by a ring all-reduce of n values
// of value_bytes each, headers not included: it sends every chunk but
// (rank + 1) and (rank + 2) mod P once, and receives every chunk but rank
// and (rank + 1) mod P once.
struct RingTraffic {
  uint64_t sent = 0;
  uint64_t received = 0;
};
inline RingTraffic RingBytes(size_t n, int p, int rank, uint64_t value_bytes) {
  RingTraffic t;
  if (p <= 1) return t;
  for (int s = 0; s + 1 < p; ++s) {
    t.sent += RingChunk(n, p, Mod(rank - s, p)).size;  // reduce-scatter
    t.received += RingChunk(n, p, Mod(rank - s - 1, p)).size;
    t.sent += RingChunk(n, p, Mod(rank + 1 - s, p)).size;  // all-gather
    t.received += RingChunk(n, p, Mod(rank - s, p)).size;
  }
  t.sent *= value_bytes;
  t.received *= value_bytes;
  return t;
}

}  // namespace adacomp::comm_internal
