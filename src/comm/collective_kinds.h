// src/comm/collective_kinds.h: the collectives a Communicator runs, named
// once for both communicators (the in-process group's generations, the MPI
// communicator's headers, whose kind field carries these values), so that
// both describe a mismatch with the same words. Internal header.
#pragma once

#include <cstdint>

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

inline const char* CollectiveName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGatherV:
      return "AllGatherV";
    case CollectiveKind::kAllReduceSum:
      return "AllReduceSum";
    case CollectiveKind::kBroadcast:
      return "Broadcast";
    case CollectiveKind::kBarrier:
      return "Barrier";
    case CollectiveKind::kLeave:
      return "Leave";
    case CollectiveKind::kAllReduceSumHalf:
      return "AllReduceSumHalf";
    case CollectiveKind::kAllToAllV:
      return "AllToAllV";
  }
  return "unknown collective";
}

}  // namespace adacomp::comm_internal
