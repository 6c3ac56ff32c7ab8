// src/comm/pieces.h: the argument check of Communicator::AllToAllV, shared
// by the in-process and MPI communicators so that both refuse the same
// calls with the same words. Internal header; plain functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace adacomp::comm_internal {

// Bytes each rank sends and receives per peer, besides the pieces, to tell
// the receiver a piece's length (both communicators count them).
inline constexpr uint64_t kPieceLengthBytes = 8;

// The bytes one rank of `ranks` counts for one all-to-all, sent or received
// alike: a length per peer plus the pieces (`bytes` in all), less its own
// piece (`own` bytes), which stays in memory.
inline uint64_t PieceTraffic(int ranks, size_t bytes, size_t own) {
  if (ranks < 2) return 0;
  return kPieceLengthBytes * static_cast<uint64_t>(ranks - 1) + bytes - own;
}

// Empty when `offsets` cuts a buffer of `bytes` bytes into `ranks` pieces
// (ranks + 1 entries, starting at 0, non-decreasing, ending at bytes); else
// what is wrong with it.
inline std::string PieceOffsetsProblem(std::span<const size_t> offsets, int ranks, size_t bytes) {
  if (offsets.size() != static_cast<size_t>(ranks) + 1) {
    return std::to_string(offsets.size()) + " piece offsets for " + std::to_string(ranks) +
           " ranks (needs " + std::to_string(ranks + 1) + ")";
  }
  if (offsets.front() != 0) return "the first piece offset is " + std::to_string(offsets[0]);
  for (size_t d = 0; d + 1 < offsets.size(); ++d) {
    if (offsets[d + 1] < offsets[d]) {
      return "piece offsets decrease at rank " + std::to_string(d) + " (" +
             std::to_string(offsets[d]) + " then " + std::to_string(offsets[d + 1]) + ")";
    }
  }
  if (offsets.back() != bytes) {
    return "the pieces end at " + std::to_string(offsets.back()) + " but the buffer holds " +
           std::to_string(bytes) + " bytes";
  }
  return {};
}

}  // namespace adacomp::comm_internal
