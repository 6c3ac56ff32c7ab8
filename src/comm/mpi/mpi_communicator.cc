// The MPI Communicator (mpi_communicator_impl.h): its lifetime (creation,
// the leave handshake, Abort), the polled wait every collective uses, and
// the collectives other than the all-reduce (mpi_ring.cc); each starts with
// Begin (mpi_collective_start.cc). See include/adacomp/mpi_communicator.h for the
// contract. Every MPI operation is non-blocking and polled against the
// collective's deadline, so that no call can hang; every buffer MPI reads or
// writes is owned by the communicator, so that a collective that timed out
// (with requests still pending) never leaves MPI pointing at caller memory.
#include "adacomp/mpi_communicator.h"

// The C API only: OpenMPI's deprecated C++ bindings are not used.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../pieces.h"
#include "heartbeat.h"
#include "mpi_communicator_impl.h"
#include "mpi_setup.h"

namespace adacomp::mpi_internal {

MpiCommunicator::MpiCommunicator(MPI_Comm comm, MPI_Comm beat_comm, int rank, int size,
                                 std::vector<std::string> hosts, const MpiOptions& options)
    : comm_(comm),
      rank_(rank),
      size_(size),
      timeout_seconds_(options.timeout_seconds),
      hosts_(std::move(hosts)),
      headers_(size),
      requests_(2 * static_cast<size_t>(size)) {
  if (beat_comm != MPI_COMM_NULL) {
    heartbeat_ =
        std::make_unique<Heartbeat>(beat_comm, rank, size, options.heartbeat_seconds, &mpi_mu_);
  }
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {  // too late to talk to anyone
    if (heartbeat_) heartbeat_->Stop(-1);
    return;
  }
  if (failure_.ok()) {
    Collective c;
    Status s = Begin(kLeave, 0, 0, &c);
    if (s.ok()) {
      // Every peer has left too: end the heartbeats (a peer that does not
      // send its last beat within the collective deadline is gone, and the
      // job cannot be finalized cleanly).
      const bool drained = !heartbeat_ || heartbeat_->Stop(std::min(timeout_seconds_, 30.0));
      std::lock_guard<std::mutex> lock(mpi_mu_);
      MPI_Comm_free(&comm_);
      mpi_internal::SetCleanLeave(drained);
      return;
    }
    if (failure_.ok()) failure_ = s;
  }
  // Peers may be stuck waiting for us: a clean shutdown is impossible.
  Abort(failure_);
}

Status MpiCommunicator::AllGatherV(std::span<const uint8_t> mine, GatheredBuffers* out) {
  assert(out != nullptr);
  Collective c;
  ADACOMP_RETURN_IF_ERROR(Begin(kAllGatherV, static_cast<int64_t>(mine.size()), 0, &c));
  // Counts and displacements come from the headers: no padding.
  out->offsets.assign(size_ + 1, 0);
  for (int r = 0; r < size_; ++r) {
    out->offsets[r + 1] = out->offsets[r] + static_cast<size_t>(headers_[r].count);
  }
  const size_t total = out->offsets[size_];
  if (total > static_cast<size_t>(INT_MAX)) {
    return Status::OutOfRange(Where(c) + ": the ranks' frames add up to " + std::to_string(total) +
                              " bytes, over MPI's int limit of " + std::to_string(INT_MAX));
  }
  if (size_ > 1) {
    send_bytes_.assign(mine.begin(), mine.end());
    send_bytes_.push_back(0);  // never a null send buffer
    recv_bytes_.resize(total + 1);
    counts_.resize(size_);
    displs_.resize(size_);
    for (int r = 0; r < size_; ++r) {
      counts_[r] = static_cast<int>(headers_[r].count);
      displs_[r] = static_cast<int>(out->offsets[r]);
    }
    MPI_Request request = MPI_REQUEST_NULL;
    ADACOMP_RETURN_IF_ERROR(Call(c, "MPI_Iallgatherv", [&] {
      return MPI_Iallgatherv(send_bytes_.data(), static_cast<int>(mine.size()), MPI_BYTE,
                             recv_bytes_.data(), counts_.data(), displs_.data(), MPI_BYTE, comm_,
                             &request);
    }));
    ADACOMP_RETURN_IF_ERROR(WaitData(c, &request));
    out->data.assign(recv_bytes_.begin(), recv_bytes_.begin() + total);
    traffic_.sent_bytes += static_cast<uint64_t>(mine.size()) * static_cast<uint64_t>(size_ - 1);
    traffic_.received_bytes += total - mine.size();
  } else {
    out->data.assign(mine.begin(), mine.end());
  }
  return Status::OK();
}

Status MpiCommunicator::AllToAllV(std::span<const uint8_t> mine, std::span<const size_t> offsets,
                                  GatheredBuffers* out) {
  assert(out != nullptr);
  // A rank with bad offsets still takes part (count -1), so that every
  // rank returns the error instead of waiting for it.
  const std::string problem = comm_internal::PieceOffsetsProblem(offsets, size_, mine.size());
  Collective c;
  const Status begun =
      Begin(kAllToAllV, problem.empty() ? static_cast<int64_t>(mine.size()) : -1, 0, &c);
  if (!begun.ok()) {
    return problem.empty() ? begun : Status(begun.code(), begun.message() + " (" + problem + ")");
  }
  if (size_ == 1) {
    out->data.assign(mine.begin(), mine.end());
    out->offsets = {0, mine.size()};
    return Status::OK();
  }
  if (mine.size() > static_cast<size_t>(INT_MAX)) {
    return Status::OutOfRange(Where(c) + ": " + std::to_string(mine.size()) +
                              " bytes of pieces, over MPI's int limit of " +
                              std::to_string(INT_MAX));
  }
  send_lengths_.resize(size_);
  recv_lengths_.assign(size_, 0);
  for (int d = 0; d < size_; ++d) {
    send_lengths_[d] = static_cast<int64_t>(offsets[d + 1] - offsets[d]);
  }
  MPI_Request request = MPI_REQUEST_NULL;
  ADACOMP_RETURN_IF_ERROR(Call(c, "MPI_Ialltoall", [&] {
    return MPI_Ialltoall(send_lengths_.data(), 1, MPI_INT64_T, recv_lengths_.data(), 1, MPI_INT64_T,
                         comm_, &request);
  }));
  ADACOMP_RETURN_IF_ERROR(WaitData(c, &request));
  out->offsets.assign(size_ + 1, 0);
  for (int r = 0; r < size_; ++r) {
    if (recv_lengths_[r] < 0 || recv_lengths_[r] > INT_MAX) {
      return Fail(Status::Internal(Where(c) + ": rank " + std::to_string(r) +
                                   " announced a piece of " + std::to_string(recv_lengths_[r]) +
                                   " bytes"));
    }
    out->offsets[r + 1] = out->offsets[r] + static_cast<size_t>(recv_lengths_[r]);
  }
  const size_t total = out->offsets[size_];
  if (total > static_cast<size_t>(INT_MAX)) {
    return Status::OutOfRange(Where(c) + ": the pieces for this rank add up to " +
                              std::to_string(total) + " bytes, over MPI's int limit of " +
                              std::to_string(INT_MAX));
  }
  send_bytes_.assign(mine.begin(), mine.end());
  send_bytes_.push_back(0);  // never a null buffer
  recv_bytes_.resize(total + 1);
  counts_.resize(size_);
  displs_.resize(size_);
  send_counts_.resize(size_);
  send_displs_.resize(size_);
  for (int r = 0; r < size_; ++r) {
    counts_[r] = static_cast<int>(recv_lengths_[r]);
    displs_[r] = static_cast<int>(out->offsets[r]);
    send_counts_[r] = static_cast<int>(send_lengths_[r]);
    send_displs_[r] = static_cast<int>(offsets[r]);
  }
  ADACOMP_RETURN_IF_ERROR(Call(c, "MPI_Ialltoallv", [&] {
    return MPI_Ialltoallv(send_bytes_.data(), send_counts_.data(), send_displs_.data(), MPI_BYTE,
                          recv_bytes_.data(), counts_.data(), displs_.data(), MPI_BYTE, comm_,
                          &request);
  }));
  ADACOMP_RETURN_IF_ERROR(WaitData(c, &request));
  out->data.assign(recv_bytes_.begin(), recv_bytes_.begin() + total);
  traffic_.sent_bytes += comm_internal::PieceTraffic(size_, mine.size(), send_lengths_[rank_]);
  traffic_.received_bytes += comm_internal::PieceTraffic(size_, total, recv_lengths_[rank_]);
  return Status::OK();
}

Status MpiCommunicator::Broadcast(std::span<uint8_t> data, int root) {
  Collective c;
  ADACOMP_RETURN_IF_ERROR(Begin(kBroadcast, static_cast<int64_t>(data.size()), root, &c));
  if (size_ == 1) return Status::OK();
  for (size_t begin = 0; begin < data.size(); begin += kBroadcastChunkBytes) {
    const size_t n = std::min(kBroadcastChunkBytes, data.size() - begin);
    if (rank_ == root) {
      bcast_bytes_.assign(data.begin() + begin, data.begin() + begin + n);
    } else {
      bcast_bytes_.resize(n);
    }
    MPI_Request request = MPI_REQUEST_NULL;
    ADACOMP_RETURN_IF_ERROR(Call(c, "MPI_Ibcast", [&] {
      return MPI_Ibcast(bcast_bytes_.data(), static_cast<int>(n), MPI_BYTE, root, comm_, &request);
    }));
    ADACOMP_RETURN_IF_ERROR(WaitData(c, &request));
    if (rank_ != root) std::memcpy(data.data() + begin, bcast_bytes_.data(), n);
  }
  if (rank_ == root) {
    traffic_.sent_bytes += static_cast<uint64_t>(data.size()) * static_cast<uint64_t>(size_ - 1);
  } else {
    traffic_.received_bytes += data.size();
  }
  return Status::OK();
}

Status MpiCommunicator::Barrier() {
  Collective c;
  return Begin(kBarrier, 0, 0, &c);
}

void MpiCommunicator::Abort(const Status& why) {
  mpi_internal::SetJobFailed();
  if (aborting_.exchange(true)) return;
  std::fprintf(stderr, "adacomp: rank %d of %d aborts the MPI job: %s\n", rank_, size_,
               why.ToString().c_str());
  std::fflush(stderr);
  // MPI_Abort hands the job to mpirun, which kills every rank; should
  // mpirun be out of reach (this host cut off), this rank still ends.
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(10));
    std::_Exit(1);
  }).detach();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    std::lock_guard<std::mutex> lock(mpi_mu_);  // never held for long
    MPI_Abort(comm_, 1);
  }
  std::_Exit(1);  // MPI_Abort should not return; make sure this rank stops.
}

Status MpiCommunicator::Fail(Status status) {
  failure_ = status;
  mpi_internal::SetJobFailed();
  return status;
}

Status MpiCommunicator::Check(const Collective& c, const char* call, int rc) {
  if (rc == MPI_SUCCESS) return Status::OK();
  return Fail(Status::Unavailable(Where(c) + ": " + call + " failed: " + MpiErrorText(rc)));
}

Status MpiCommunicator::CheckAlive(const Collective& c) {
  if (!heartbeat_) return Status::OK();
  double quiet = 0;
  const int r = heartbeat_->SilentPeer(&quiet);
  if (r < 0) return Status::OK();
  return Fail(Status::Unavailable(
      Where(c) + ": rank " + std::to_string(r) + " (host " + hosts_[r] +
      ") sent no heartbeat for " + Seconds(std::floor(quiet * 10) / 10) + " s (limit " +
      Seconds(heartbeat_->silence_seconds()) + " s): it died, is stopped, or its link is down"));
}

Status MpiCommunicator::Poll(const Collective& c, MPI_Request* requests, int count,
                             bool* timed_out) {
  *timed_out = false;
  int remaining = 0;
  for (int i = 0; i < count; ++i) remaining += requests[i] != MPI_REQUEST_NULL;
  indices_.resize(std::max(count, 1));
  int polls = 0;
  auto nap = std::chrono::microseconds(10);
  while (remaining > 0) {
    int done = 0;
    int rc;
    {
      std::lock_guard<std::mutex> lock(mpi_mu_);
      rc = MPI_Testsome(count, requests, &done, indices_.data(), MPI_STATUSES_IGNORE);
    }
    if (rc != MPI_SUCCESS) {
      return Fail(Status::Unavailable(Where(c) + ": MPI_Testsome failed: " + MpiErrorText(rc)));
    }
    if (done == MPI_UNDEFINED) break;
    remaining -= done;
    if (remaining == 0) break;
    if (done > 0) {
      polls = 0;
      nap = std::chrono::microseconds(10);
      continue;
    }
    ADACOMP_RETURN_IF_ERROR(CheckAlive(c));
    if (Clock::now() >= c.deadline) {
      *timed_out = true;
      return Status::OK();
    }
    // Spin briefly (latency), then back off so a waiting rank does not take
    // the CPU from a peer that is still computing.
    if (++polls < 200) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(500));
    }
  }
  return Status::OK();
}

Status MpiCommunicator::WaitData(const Collective& c, MPI_Request* request) {
  bool timed_out = false;
  ADACOMP_RETURN_IF_ERROR(Poll(c, request, 1, &timed_out));
  if (timed_out) {
    return Fail(Status::Unavailable(
        Where(c) + ": every rank arrived but the data exchange did not finish within " +
        Seconds(timeout_seconds_) + " s (a peer stalled or died)"));
  }
  return Status::OK();
}

}  // namespace adacomp::mpi_internal

namespace adacomp {

Result<std::unique_ptr<Communicator>> CreateMpiCommunicator(const MpiOptions& options) {
  if (!(options.timeout_seconds > 0)) {
    return Status::InvalidArgument("MPI communicator: timeout_seconds must be > 0, got " +
                                   std::to_string(options.timeout_seconds));
  }
  if (!(options.heartbeat_seconds >= 0) || !std::isfinite(options.heartbeat_seconds)) {
    return Status::InvalidArgument(
        "MPI communicator: heartbeat_seconds must be >= 0 (0 = off), got " +
        std::to_string(options.heartbeat_seconds));
  }
  ADACOMP_RETURN_IF_ERROR(mpi_internal::StartMpi());
  MPI_Comm comm = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rc != MPI_SUCCESS) {
    return Status::Unavailable("MPI communicator: MPI_Comm_dup failed: " +
                               mpi_internal::MpiErrorText(rc));
  }
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // Every rank's host, for messages that name a peer.
  ADACOMP_ASSIGN_OR_RETURN(std::vector<std::string> hosts, mpi_internal::HostNames(comm, size));
  // Every rank must run the heartbeat alike (a rank without it would look
  // dead to the others, and creating its communicator is collective).
  double limits[2] = {options.heartbeat_seconds, -options.heartbeat_seconds};
  rc = MPI_Allreduce(MPI_IN_PLACE, limits, 2, MPI_DOUBLE, MPI_MIN, comm);
  if (rc != MPI_SUCCESS) {
    return Status::Unavailable("MPI communicator: MPI_Allreduce of the heartbeat limits failed: " +
                               mpi_internal::MpiErrorText(rc));
  }
  if (limits[0] != -limits[1]) {
    return Status::InvalidArgument("MPI communicator: the ranks' heartbeat limits differ (from " +
                                   comm_internal::Seconds(limits[0]) + " to " +
                                   comm_internal::Seconds(-limits[1]) +
                                   " s): give every rank the same --mpi-heartbeat");
  }
  // The heartbeat needs a second thread to call MPI, serialized with this one.
  int level = 0;
  MPI_Query_thread(&level);
  MPI_Comm beat_comm = MPI_COMM_NULL;
  if (size > 1 && options.heartbeat_seconds > 0 && level >= MPI_THREAD_SERIALIZED) {
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &beat_comm);
    if (rc != MPI_SUCCESS) {
      return Status::Unavailable("MPI communicator: MPI_Comm_dup failed: " +
                                 mpi_internal::MpiErrorText(rc));
    }
    MPI_Comm_set_errhandler(beat_comm, MPI_ERRORS_RETURN);
  }
  return std::unique_ptr<Communicator>(std::make_unique<mpi_internal::MpiCommunicator>(
      comm, beat_comm, rank, size, std::move(hosts), options));
}

}  // namespace adacomp
