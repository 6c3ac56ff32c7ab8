// adacomp/communicator.h: the collectives learners use to exchange gradients.
//
// One Communicator object per learner (rank). Every collective is called by
// every rank of the group, in the same order, with matching arguments (same
// sizes for AllReduceSum and Broadcast); that ordering is the contract every
// implementation relies on. A collective that fails on one rank (a peer left,
// a timeout, a rank reporting an error) returns a non-OK Status on every
// rank that can still be reached, naming the rank and cause.
//
// Implementations: in-process (one thread per rank, src/comm/inprocess) and
// MPI (one process per rank, src/comm/mpi).
// Thread safety: a Communicator is used by its own rank's thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "adacomp/status.h"

namespace adacomp {

// The result of a variable-length all-gather: rank r's bytes are
// data[offsets[r] .. offsets[r+1]); offsets has size() + 1 entries.
struct GatheredBuffers {
  std::vector<uint8_t> data;
  std::vector<size_t> offsets;

  size_t ranks() const { return offsets.empty() ? 0 : offsets.size() - 1; }
  std::span<const uint8_t> rank(size_t r) const {
    return std::span<const uint8_t>(data).subspan(offsets[r], offsets[r + 1] - offsets[r]);
  }
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Every rank contributes `mine` (any length, including 0); on return `out`
  // holds every rank's bytes in rank order. No padding to the longest.
  virtual Status AllGatherV(std::span<const uint8_t> mine, GatheredBuffers* out) = 0;

  // Element-wise sum over ranks, in place; the summation order is rank
  // order 0,1,...,P-1 on every rank, so all ranks get bit-identical results.
  virtual Status AllReduceSum(std::span<float> data) = 0;

  // Copies root's `data` into every other rank's `data` (same size everywhere).
  virtual Status Broadcast(std::span<uint8_t> data, int root) = 0;

  virtual Status Barrier() = 0;

  // Tells every peer that this rank is failing with `why`, so that their
  // pending and next collectives return Aborted naming this rank, rather than
  // hanging. Best effort; safe to call more than once.
  virtual void Abort(const Status& why) = 0;
};

// An in-process group of `ranks` communicators sharing memory; hand one to
// each learner thread. `timeout_seconds` bounds how long a collective waits
// for the slowest rank before returning Unavailable.
std::vector<std::unique_ptr<Communicator>> CreateInProcessGroup(int ranks,
                                                                double timeout_seconds = 300.0);

}  // namespace adacomp
