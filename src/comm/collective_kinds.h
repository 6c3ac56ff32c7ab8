// src/comm/collective_kinds.h: the collectives a Communicator runs, named
// once for both communicators (the in-process group's generations, the MPI
// communicator's headers, whose kind field carries these values), so that
// both describe a mismatch with the same words. Internal header.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "../core/names.h"

namespace adacomp::comm_internal {

// The values travel in the MPI communicator's headers: keep them.
enum class CollectiveKind : int64_t {
  kAllGatherV = 1,
  kAllReduceSum = 2,
  kBroadcast = 3,
  kBarrier = 4,
  kLeave = 5,  // the MPI communicator's leave handshake (its destructor)
  kAllReduceSumHalf = 6,
  kAllToAllV = 7,
};

inline constexpr std::array<std::string_view, 7> kCollectiveNames = {
    "AllGatherV", "AllReduceSum", "Broadcast", "Barrier", "Leave", "AllReduceSumHalf", "AllToAllV"};

// The table's entries are literals, so each view is NUL-terminated.
inline const char* CollectiveName(CollectiveKind kind) {
  return names::Of(kind, kCollectiveNames, "unknown collective", 1).data();
}

}  // namespace adacomp::comm_internal
