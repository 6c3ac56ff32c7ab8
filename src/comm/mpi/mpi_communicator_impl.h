// src/comm/mpi/mpi_communicator_impl.h: the declaration of MpiCommunicator,
// the Communicator of include/adacomp/mpi_communicator.h, with the wire
// format its collectives share (kinds, header, tags). Internal to
// adacomp_comm_mpi, not installed; its members are defined in
//   mpi_communicator.cc      lifetime, Abort, polling, the collectives
//   mpi_collective_start.cc  Begin: the header exchange and its checks
//   mpi_ring.cc              the ring all-reduce
#pragma once

// The C API only: OpenMPI's deprecated C++ bindings are not used.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../collective_kinds.h"
#include "../messages.h"
#include "adacomp/mpi_communicator.h"

namespace adacomp::mpi_internal {

using Clock = std::chrono::steady_clock;

// The collectives' kinds as they travel in the headers (collective_kinds.h;
// kLeave: the handshake a communicator's destructor runs with every peer).
using comm_internal::CollectiveKind;
inline constexpr int64_t kAllGatherV = static_cast<int64_t>(CollectiveKind::kAllGatherV);
inline constexpr int64_t kAllReduceSum = static_cast<int64_t>(CollectiveKind::kAllReduceSum);
inline constexpr int64_t kBroadcast = static_cast<int64_t>(CollectiveKind::kBroadcast);
inline constexpr int64_t kBarrier = static_cast<int64_t>(CollectiveKind::kBarrier);
inline constexpr int64_t kLeave = static_cast<int64_t>(CollectiveKind::kLeave);
inline constexpr int64_t kAllReduceSumHalf =
    static_cast<int64_t>(CollectiveKind::kAllReduceSumHalf);
inline constexpr int64_t kAllToAllV = static_cast<int64_t>(CollectiveKind::kAllToAllV);

inline const char* KindName(int64_t kind) {
  if (kind < kAllGatherV || kind > kAllToAllV) return "unknown collective";
  return comm_internal::CollectiveName(static_cast<CollectiveKind>(kind));
}

// Exchanged by every rank with every peer at the start of each collective.
struct Header {
  int64_t kind = 0;
  int64_t sequence = 0;
  int64_t count = 0;  // bytes or floats
  int64_t root = 0;
};
static_assert(sizeof(Header) == 4 * sizeof(int64_t));

inline constexpr int kHeaderTag = 7301;
inline constexpr int kRingTag = 7302;
// Large Broadcast payloads move in pieces (MPI counts are int); so do the
// ring's chunks, in pieces of at most 2^24 values.
inline constexpr size_t kBroadcastChunkBytes = size_t{1} << 30;
inline constexpr size_t kRingPieceValues = size_t{1} << 24;

using comm_internal::RankList;
using comm_internal::Seconds;

class Heartbeat;  // heartbeat.h

class MpiCommunicator final : public Communicator {
 public:
  // beat_comm: the heartbeat's own communicator, or MPI_COMM_NULL for none;
  // hosts: every rank's processor name.
  MpiCommunicator(MPI_Comm comm, MPI_Comm beat_comm, int rank, int size,
                  std::vector<std::string> hosts, const MpiOptions& options);

  // Runs the leave handshake: a last collective in which every rank says it
  // is done. If a peer is instead still inside another collective (this rank
  // left early, e.g. on an error path without Abort), or a collective failed
  // before, this rank aborts the job with a message naming the mismatch.
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status AllGatherV(std::span<const uint8_t> mine, GatheredBuffers* out) override;
  Status AllToAllV(std::span<const uint8_t> mine, std::span<const size_t> offsets,
                   GatheredBuffers* out) override;
  Status AllReduceSum(std::span<float> data) override { return RingAllReduce(kAllReduceSum, data); }

  Status AllReduceSumHalf(std::span<float> data) override {
    return RingAllReduce(kAllReduceSumHalf, data);
  }

  Status Broadcast(std::span<uint8_t> data, int root) override;
  Status Barrier() override;
  void Abort(const Status& why) override;

 private:
  struct Collective {
    int64_t kind = 0;
    int64_t sequence = 0;
    Clock::time_point deadline;
  };

  std::string Where(const Collective& c) const {
    return std::string("MPI ") + KindName(c.kind) + " #" + std::to_string(c.sequence) +
           " on rank " + std::to_string(rank_);
  }

  Status Fail(Status status);
  Status Check(const Collective& c, const char* call, int rc);

  // Runs one MPI call (a function returning its code) with the MPI mutex
  // held, then Check()s it.
  template <typename F>
  Status Call(const Collective& c, const char* call, F&& f) {
    int rc;
    {
      std::lock_guard<std::mutex> lock(mpi_mu_);
      rc = f();
    }
    return Check(c, call, rc);
  }

  // Unavailable naming a peer the heartbeat found silent, if any.
  Status CheckAlive(const Collective& c);

  // Polls `count` requests until all are complete or the deadline passes.
  // Completed requests become MPI_REQUEST_NULL; *timed_out says which case.
  Status Poll(const Collective& c, MPI_Request* requests, int count, bool* timed_out);

  // Poll() for one data request; Unavailable when the deadline passes.
  Status WaitData(const Collective& c, MPI_Request* request);

  // mpi_collective_start.cc
  // Starts a collective: exchanges headers with every peer, point to point,
  // and checks that every rank called the same collective with matching
  // sizes. On OK, headers_[r] holds rank r's header.
  Status Begin(int64_t kind, int64_t count, int64_t root, Collective* c);

  // A peer that left (destroyed its communicator) while this rank is in a
  // collective, or this rank leaving while a peer is in one: the job cannot
  // go on, and the Status says who left and where.
  Status CheckNobodyLeft(const Collective& c);

  // Every rank sees the same headers, so every rank reaches the same verdict.
  Status CheckHeaders(const Collective& c) const;

  // mpi_ring.cc
  // The ring all-reduce of ring.h, point to point with the neighbours
  // (rank - 1 sends to us, we send to rank + 1), every value in a buffer
  // this object owns.
  Status RingAllReduce(int64_t kind, std::span<float> data);

  // Sends send_count values of value_bytes each to `to` while receiving
  // recv_count from `from`, in pieces, polled against the deadline. Both
  // buffers belong to this object.
  Status Exchange(const Collective& c, const void* send, size_t send_count, void* recv,
                  size_t recv_count, size_t value_bytes, int to, int from);

  MPI_Comm comm_;
  const int rank_;
  const int size_;
  const double timeout_seconds_;
  const std::vector<std::string> hosts_;
  // Held around every MPI call, so that the heartbeat thread and the
  // caller's thread take turns (MPI_THREAD_SERIALIZED).
  std::mutex mpi_mu_;
  std::unique_ptr<Heartbeat> heartbeat_;  // null when off or P == 1
  int64_t sequence_ = 0;
  Status failure_;  // sticky
  std::atomic<bool> aborting_{false};

  // Buffers MPI reads or writes; members so that they outlive any request.
  Header my_header_;
  std::vector<Header> headers_;
  std::vector<MPI_Request> requests_;  // [0, P): header receives; [P, 2P): sends
  std::vector<int> indices_;
  std::vector<uint8_t> send_bytes_;
  std::vector<uint8_t> recv_bytes_;
  std::vector<int> counts_;
  std::vector<int> displs_;
  std::vector<int> send_counts_;                      // AllToAllV
  std::vector<int> send_displs_;                      // AllToAllV
  std::vector<int64_t> send_lengths_, recv_lengths_;  // AllToAllV
  std::vector<float> ring_work_;
  std::vector<float> ring_recv_;
  std::vector<uint16_t> ring_send_half_;
  std::vector<uint16_t> ring_recv_half_;
  std::vector<uint8_t> bcast_bytes_;
};

}  // namespace adacomp::mpi_internal
