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

// Bytes a rank's collectives put on the transport and took from it,
// cumulative. Counted alike by every implementation (the in-process group
// counts what the MPI communicator sends for the same calls), per
// collective with P > 1:
//   every collective   a 32-byte header to and from each of the P - 1 peers;
//   AllGatherV         received: the other ranks' bytes; sent: this rank's
//                      bytes x (P - 1) (each must reach every peer once, so
//                      the totals over ranks are exact for any algorithm);
//   AllReduceSum(Half) the ring's chunks, exactly: 4 (2 for half) bytes x
//                      2 (P - 1) chunks each way;
//   Broadcast          received: the buffer (non-roots); sent: the buffer x
//                      (P - 1) (the root);
//   AllToAllV          an 8-byte piece length to and from each peer, then
//                      sent: the pieces for the other ranks; received: the
//                      pieces from them (a rank's piece for itself is free).
// TCP/IP and MPI framing are not included.
struct CommTraffic {
  uint64_t sent_bytes = 0;
  uint64_t received_bytes = 0;
  uint64_t collectives = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Every rank contributes `mine` (any length, including 0); on return `out`
  // holds every rank's bytes in rank order. No padding to the longest.
  virtual Status AllGatherV(std::span<const uint8_t> mine, GatheredBuffers* out) = 0;

  // Personalized exchange: this rank's bytes for rank d are
  // mine[offsets[d] .. offsets[d + 1]) (offsets: size() + 1 entries,
  // non-decreasing, offsets[0] == 0, offsets[size()] == mine.size(); else
  // InvalidArgument before anything is sent). On return out->rank(s) holds
  // the bytes rank s addressed to this rank, this rank's own piece included.
  // Ranks may pass different totals; each learns its pieces' lengths from
  // the senders.
  virtual Status AllToAllV(std::span<const uint8_t> mine, std::span<const size_t> offsets,
                           GatheredBuffers* out) = 0;

  // Element-wise sum over ranks, in place, by a ring all-reduce
  // (reduce-scatter, then all-gather): every rank sends and receives
  // 2 (P-1)/P of the buffer. The buffer is cut into P chunks (the first
  // n % P of them one element longer); every element of chunk c is summed
  // as the left fold that starts at rank c and goes round the ring,
  //   ((x_c + x_{c+1}) + x_{c+2}) + ... + x_{c+P-1}   (ranks mod P),
  // identically on every rank and in every implementation, so all ranks get
  // bit-identical results.
  virtual Status AllReduceSum(std::span<float> data) = 0;

  // The same ring with IEEE binary16 values on the wire (half the bytes):
  // each hop rounds the partial sum to half (nearest, ties to even) as it is
  // sent, and the receiver adds its own float32 values to the widened half;
  // the finished chunk is rounded to half once more, and every rank returns
  // that half widened to float. Bit-identical on every rank and in every
  // implementation; for P = 1 it rounds `data` to half. Sums beyond +-65504
  // become +-Inf (scale the inputs first, e.g. by 1/P).
  virtual Status AllReduceSumHalf(std::span<float> data) = 0;

  // Copies root's `data` into every other rank's `data` (same size everywhere).
  virtual Status Broadcast(std::span<uint8_t> data, int root) = 0;

  virtual Status Barrier() = 0;

  // Tells every peer that this rank is failing with `why`, so that their
  // pending and next collectives return Aborted naming this rank, rather than
  // hanging. Best effort; safe to call more than once.
  virtual void Abort(const Status& why) = 0;

  // The bytes this rank's collectives have moved since the communicator was
  // made, counted by the communicator itself (see CommTraffic).
  CommTraffic traffic() const { return traffic_; }

 protected:
  CommTraffic traffic_;
};

// An in-process group of `ranks` communicators sharing memory; hand one to
// each learner thread. `timeout_seconds` bounds how long a collective waits
// for the slowest rank before returning Unavailable.
std::vector<std::unique_ptr<Communicator>> CreateInProcessGroup(int ranks,
                                                                double timeout_seconds = 300.0);

}  // namespace adacomp
