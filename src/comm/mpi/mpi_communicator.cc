// The MPI Communicator: see include/adacomp/mpi_communicator.h for the
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
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../collective_kinds.h"
#include "../messages.h"
#include "../pieces.h"
#include "../ring.h"
#include "heartbeat.h"
#include "mpi_setup.h"

namespace adacomp {
namespace {

using Clock = std::chrono::steady_clock;

// The collectives' kinds as they travel in the headers (collective_kinds.h;
// kLeave: the handshake a communicator's destructor runs with every peer).
using comm_internal::CollectiveKind;
constexpr int64_t kAllGatherV = static_cast<int64_t>(CollectiveKind::kAllGatherV);
constexpr int64_t kAllReduceSum = static_cast<int64_t>(CollectiveKind::kAllReduceSum);
constexpr int64_t kBroadcast = static_cast<int64_t>(CollectiveKind::kBroadcast);
constexpr int64_t kBarrier = static_cast<int64_t>(CollectiveKind::kBarrier);
constexpr int64_t kLeave = static_cast<int64_t>(CollectiveKind::kLeave);
constexpr int64_t kAllReduceSumHalf = static_cast<int64_t>(CollectiveKind::kAllReduceSumHalf);
constexpr int64_t kAllToAllV = static_cast<int64_t>(CollectiveKind::kAllToAllV);

const char* KindName(int64_t kind) {
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

constexpr int kHeaderTag = 7301;
constexpr int kRingTag = 7302;
// Large Broadcast payloads move in pieces (MPI counts are int); so do the
// ring's chunks, in pieces of at most 2^24 values.
constexpr size_t kBroadcastChunkBytes = size_t{1} << 30;
constexpr size_t kRingPieceValues = size_t{1} << 24;

using comm_internal::RankList;
using comm_internal::Seconds;

using mpi_internal::Heartbeat;
using mpi_internal::MpiErrorText;

class MpiCommunicator final : public Communicator {
 public:
  // beat_comm: the heartbeat's own communicator, or MPI_COMM_NULL for none;
  // hosts: every rank's processor name.
  MpiCommunicator(MPI_Comm comm, MPI_Comm beat_comm, int rank, int size,
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

  // Runs the leave handshake: a last collective in which every rank says it
  // is done. If a peer is instead still inside another collective (this rank
  // left early, e.g. on an error path without Abort), or a collective failed
  // before, this rank aborts the job with a message naming the mismatch.
  ~MpiCommunicator() override {
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

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status AllGatherV(std::span<const uint8_t> mine, GatheredBuffers* out) override {
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
      return Status::OutOfRange(Where(c) + ": the ranks' frames add up to " +
                                std::to_string(total) + " bytes, over MPI's int limit of " +
                                std::to_string(INT_MAX));
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

  Status AllToAllV(std::span<const uint8_t> mine, std::span<const size_t> offsets,
                   GatheredBuffers* out) override {
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
      return MPI_Ialltoall(send_lengths_.data(), 1, MPI_INT64_T, recv_lengths_.data(), 1,
                           MPI_INT64_T, comm_, &request);
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

  Status AllReduceSum(std::span<float> data) override { return RingAllReduce(kAllReduceSum, data); }

  Status AllReduceSumHalf(std::span<float> data) override {
    return RingAllReduce(kAllReduceSumHalf, data);
  }

  Status Broadcast(std::span<uint8_t> data, int root) override {
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
        return MPI_Ibcast(bcast_bytes_.data(), static_cast<int>(n), MPI_BYTE, root, comm_,
                          &request);
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

  Status Barrier() override {
    Collective c;
    return Begin(kBarrier, 0, 0, &c);
  }

  void Abort(const Status& why) override {
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

  Status Fail(Status status) {
    failure_ = status;
    mpi_internal::SetJobFailed();
    return status;
  }

  Status Check(const Collective& c, const char* call, int rc) {
    if (rc == MPI_SUCCESS) return Status::OK();
    return Fail(Status::Unavailable(Where(c) + ": " + call + " failed: " + MpiErrorText(rc)));
  }

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
  Status CheckAlive(const Collective& c) {
    if (!heartbeat_) return Status::OK();
    double quiet = 0;
    const int r = heartbeat_->SilentPeer(&quiet);
    if (r < 0) return Status::OK();
    return Fail(Status::Unavailable(
        Where(c) + ": rank " + std::to_string(r) + " (host " + hosts_[r] +
        ") sent no heartbeat for " + Seconds(std::floor(quiet * 10) / 10) + " s (limit " +
        Seconds(heartbeat_->silence_seconds()) + " s): it died, is stopped, or its link is down"));
  }

  // Polls `count` requests until all are complete or the deadline passes.
  // Completed requests become MPI_REQUEST_NULL; *timed_out says which case.
  Status Poll(const Collective& c, MPI_Request* requests, int count, bool* timed_out) {
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

  Status WaitData(const Collective& c, MPI_Request* request) {
    bool timed_out = false;
    ADACOMP_RETURN_IF_ERROR(Poll(c, request, 1, &timed_out));
    if (timed_out) {
      return Fail(Status::Unavailable(
          Where(c) + ": every rank arrived but the data exchange did not finish within " +
          Seconds(timeout_seconds_) + " s (a peer stalled or died)"));
    }
    return Status::OK();
  }

  // Starts a collective: exchanges headers with every peer, point to point,
  // and checks that every rank called the same collective with matching
  // sizes. On OK, headers_[r] holds rank r's header.
  Status Begin(int64_t kind, int64_t count, int64_t root, Collective* c) {
    c->kind = kind;
    c->sequence = sequence_++;
    c->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(timeout_seconds_));
    if (!failure_.ok()) return failure_;
    ADACOMP_RETURN_IF_ERROR(CheckAlive(*c));
    my_header_ = Header{kind, c->sequence, count, root};
    headers_[rank_] = my_header_;
    if (size_ > 1) {
      std::fill(requests_.begin(), requests_.end(), MPI_REQUEST_NULL);
      for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        ADACOMP_RETURN_IF_ERROR(Call(*c, "MPI_Irecv", [&] {
          return MPI_Irecv(&headers_[r], 4, MPI_INT64_T, r, kHeaderTag, comm_, &requests_[r]);
        }));
        ADACOMP_RETURN_IF_ERROR(Call(*c, "MPI_Isend", [&] {
          return MPI_Isend(&my_header_, 4, MPI_INT64_T, r, kHeaderTag, comm_,
                           &requests_[size_ + r]);
        }));
      }
      bool timed_out = false;
      ADACOMP_RETURN_IF_ERROR(Poll(*c, requests_.data(), 2 * size_, &timed_out));
      if (timed_out) {
        std::vector<int> missing;
        for (int r = 0; r < size_; ++r) {
          if (r != rank_ && requests_[r] != MPI_REQUEST_NULL) missing.push_back(r);
        }
        if (missing.empty()) {
          return Fail(Status::Unavailable(Where(*c) +
                                          ": peers did not take this rank's header within " +
                                          Seconds(timeout_seconds_) + " s"));
        }
        return Fail(Status::Unavailable(Where(*c) + " timed out after " +
                                        Seconds(timeout_seconds_) + " s: " + RankList(missing) +
                                        " did not arrive"));
      }
    }
    if (size_ > 1) {
      const uint64_t peers = static_cast<uint64_t>(size_ - 1);
      traffic_.sent_bytes += comm_internal::kHeaderBytes * peers;
      traffic_.received_bytes += comm_internal::kHeaderBytes * peers;
    }
    ++traffic_.collectives;
    ADACOMP_RETURN_IF_ERROR(CheckNobodyLeft(*c));
    return CheckHeaders(*c);
  }

  // A peer that left (destroyed its communicator) while this rank is in a
  // collective, or this rank leaving while a peer is in one: the job cannot
  // go on, and the Status says who left and where.
  Status CheckNobodyLeft(const Collective& c) {
    std::vector<int> others;
    for (int r = 0; r < size_; ++r) {
      if ((headers_[r].kind == kLeave) != (c.kind == kLeave)) others.push_back(r);
    }
    if (!others.empty()) {
      if (c.kind == kLeave) {
        return Fail(Status::Aborted(
            "MPI rank " + std::to_string(rank_) + " left the job (its communicator was " +
            "destroyed) after " + std::to_string(c.sequence) + " collectives, while " +
            RankList(others) + " called " + KindName(headers_[others[0]].kind) + " #" +
            std::to_string(c.sequence)));
      }
      return Fail(Status::Unavailable(
          Where(c) + ": " + RankList(others) +
          " left the job (destroyed the communicator, e.g. returned early) instead of calling " +
          KindName(c.kind)));
    }
    return Status::OK();
  }

  // Every rank sees the same headers, so every rank reaches the same verdict.
  Status CheckHeaders(const Collective& c) const {
    const Header& h0 = headers_[0];
    bool same_kind = true;
    bool same_count = true;
    bool same_root = true;
    for (int r = 0; r < size_; ++r) {
      same_kind &= headers_[r].kind == h0.kind && headers_[r].sequence == h0.sequence;
      same_count &= headers_[r].count == h0.count;
      same_root &= headers_[r].root == h0.root;
    }
    auto list = [&](auto&& describe) {
      std::string s;
      for (int r = 0; r < size_; ++r) s += std::string(r == 0 ? " " : ", ") + describe(r);
      return s;
    };
    if (!same_kind) {
      return Status::InvalidArgument(
          Where(c) + ": ranks called different collectives:" + list([&](int r) {
            return "rank " + std::to_string(r) + " " + KindName(headers_[r].kind) + " #" +
                   std::to_string(headers_[r].sequence);
          }));
    }
    if (c.kind == kAllToAllV) {
      for (int r = 0; r < size_; ++r) {
        if (headers_[r].count < 0) {
          return Status::InvalidArgument(Where(c) + ": rank " + std::to_string(r) +
                                         " passed bad piece offsets");
        }
      }
    }
    if ((c.kind == kAllReduceSum || c.kind == kAllReduceSumHalf) && !same_count) {
      return Status::InvalidArgument(
          Where(c) +
          ": sizes differ across ranks (every rank must pass the same):" + list([&](int r) {
            return "rank " + std::to_string(r) + " " + std::to_string(headers_[r].count) +
                   " floats";
          }));
    }
    if (c.kind == kBroadcast) {
      if (!same_root) {
        return Status::InvalidArgument(
            Where(c) + ": ranks named different roots:" + list([&](int r) {
              return "rank " + std::to_string(r) + " root " + std::to_string(headers_[r].root);
            }));
      }
      if (h0.root < 0 || h0.root >= size_) {
        return Status::InvalidArgument(Where(c) + ": root " + std::to_string(h0.root) +
                                       " is not a rank of a " + std::to_string(size_) +
                                       "-rank job");
      }
      if (!same_count) {
        return Status::InvalidArgument(
            Where(c) +
            ": sizes differ across ranks (every rank must pass the same):" + list([&](int r) {
              return "rank " + std::to_string(r) + " " + std::to_string(headers_[r].count) +
                     " bytes";
            }));
      }
    }
    return Status::OK();
  }

  // The ring all-reduce of ring.h, point to point with the neighbours
  // (rank - 1 sends to us, we send to rank + 1), every value in a buffer
  // this object owns.
  Status RingAllReduce(int64_t kind, std::span<float> data) {
    Collective c;
    ADACOMP_RETURN_IF_ERROR(Begin(kind, static_cast<int64_t>(data.size()), 0, &c));
    const bool half = kind == kAllReduceSumHalf;
    const size_t n = data.size();
    if (size_ == 1) {
      if (half) comm_internal::RoundToHalf(data.data(), n);
      return Status::OK();
    }
    using comm_internal::Mod;
    using comm_internal::RingChunk;
    ring_work_.assign(data.begin(), data.end());
    const size_t max_chunk = RingChunk(n, size_, 0).size;
    if (half) {
      ring_send_half_.resize(max_chunk);
      ring_recv_half_.resize(max_chunk);
    } else {
      ring_recv_.resize(max_chunk);
    }
    const int next = Mod(rank_ + 1, size_);
    const int prev = Mod(rank_ - 1, size_);
    // Reduce-scatter: P - 1 hops; then this rank holds chunk rank + 1.
    for (int s = 0; s + 1 < size_; ++s) {
      const comm_internal::Chunk out = RingChunk(n, size_, Mod(rank_ - s, size_));
      const comm_internal::Chunk in = RingChunk(n, size_, Mod(rank_ - s - 1, size_));
      if (half) {
        comm_internal::ToHalf(ring_work_.data() + out.begin, ring_send_half_.data(), out.size);
        ADACOMP_RETURN_IF_ERROR(Exchange(c, ring_send_half_.data(), out.size,
                                         ring_recv_half_.data(), in.size, 2, next, prev));
        comm_internal::AddHalfPartial(ring_work_.data() + in.begin, ring_recv_half_.data(),
                                      in.size);
      } else {
        ADACOMP_RETURN_IF_ERROR(Exchange(c, ring_work_.data() + out.begin, out.size,
                                         ring_recv_.data(), in.size, 4, next, prev));
        // The partial sum is the left operand, as in the in-process fold.
        float* own = ring_work_.data() + in.begin;
        const float* partial = ring_recv_.data();
        for (size_t i = 0; i < in.size; ++i) own[i] = partial[i] + own[i];
      }
    }
    if (half) {
      const comm_internal::Chunk mine = RingChunk(n, size_, Mod(rank_ + 1, size_));
      comm_internal::RoundToHalf(ring_work_.data() + mine.begin, mine.size);
    }
    // All-gather: P - 1 hops passing the finished chunks on.
    for (int s = 0; s + 1 < size_; ++s) {
      const comm_internal::Chunk out = RingChunk(n, size_, Mod(rank_ + 1 - s, size_));
      const comm_internal::Chunk in = RingChunk(n, size_, Mod(rank_ - s, size_));
      if (half) {
        comm_internal::ToHalf(ring_work_.data() + out.begin, ring_send_half_.data(), out.size);
        ADACOMP_RETURN_IF_ERROR(Exchange(c, ring_send_half_.data(), out.size,
                                         ring_recv_half_.data(), in.size, 2, next, prev));
        comm_internal::FromHalf(ring_recv_half_.data(), ring_work_.data() + in.begin, in.size);
      } else {
        ADACOMP_RETURN_IF_ERROR(Exchange(c, ring_work_.data() + out.begin, out.size,
                                         ring_work_.data() + in.begin, in.size, 4, next, prev));
      }
    }
    if (n > 0) std::memcpy(data.data(), ring_work_.data(), n * sizeof(float));
    const comm_internal::RingTraffic t =
        comm_internal::RingBytes(n, size_, rank_, half ? 2 : sizeof(float));
    traffic_.sent_bytes += t.sent;
    traffic_.received_bytes += t.received;
    return Status::OK();
  }

  // Sends send_count values of value_bytes each to `to` while receiving
  // recv_count from `from`, in pieces, polled against the deadline. Both
  // buffers belong to this object.
  Status Exchange(const Collective& c, const void* send, size_t send_count, void* recv,
                  size_t recv_count, size_t value_bytes, int to, int from) {
    const auto* out = static_cast<const uint8_t*>(send);
    auto* in = static_cast<uint8_t*>(recv);
    size_t sent = 0;
    size_t received = 0;
    while (sent < send_count || received < recv_count) {
      MPI_Request pair[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
      const size_t rn = std::min(kRingPieceValues, recv_count - received);
      const size_t sn = std::min(kRingPieceValues, send_count - sent);
      if (rn > 0) {
        ADACOMP_RETURN_IF_ERROR(Call(c, "MPI_Irecv", [&] {
          return MPI_Irecv(in + received * value_bytes, static_cast<int>(rn * value_bytes),
                           MPI_BYTE, from, kRingTag, comm_, &pair[0]);
        }));
      }
      if (sn > 0) {
        ADACOMP_RETURN_IF_ERROR(Call(c, "MPI_Isend", [&] {
          return MPI_Isend(out + sent * value_bytes, static_cast<int>(sn * value_bytes), MPI_BYTE,
                           to, kRingTag, comm_, &pair[1]);
        }));
      }
      bool timed_out = false;
      ADACOMP_RETURN_IF_ERROR(Poll(c, pair, 2, &timed_out));
      if (timed_out) {
        return Fail(Status::Unavailable(
            Where(c) + ": every rank arrived but the ring exchange with rank " +
            std::to_string(from) + " and rank " + std::to_string(to) + " did not finish within " +
            Seconds(timeout_seconds_) + " s (a peer stalled or died)"));
      }
      received += rn;
      sent += sn;
    }
    return Status::OK();
  }

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

}  // namespace

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
    return Status::Unavailable("MPI communicator: MPI_Comm_dup failed: " + MpiErrorText(rc));
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
                               MpiErrorText(rc));
  }
  if (limits[0] != -limits[1]) {
    return Status::InvalidArgument("MPI communicator: the ranks' heartbeat limits differ (from " +
                                   Seconds(limits[0]) + " to " + Seconds(-limits[1]) +
                                   " s): give every rank the same --mpi-heartbeat");
  }
  // The heartbeat needs a second thread to call MPI, serialized with this one.
  int level = 0;
  MPI_Query_thread(&level);
  MPI_Comm beat_comm = MPI_COMM_NULL;
  if (size > 1 && options.heartbeat_seconds > 0 && level >= MPI_THREAD_SERIALIZED) {
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &beat_comm);
    if (rc != MPI_SUCCESS) {
      return Status::Unavailable("MPI communicator: MPI_Comm_dup failed: " + MpiErrorText(rc));
    }
    MPI_Comm_set_errhandler(beat_comm, MPI_ERRORS_RETURN);
  }
  return std::unique_ptr<Communicator>(
      std::make_unique<MpiCommunicator>(comm, beat_comm, rank, size, std::move(hosts), options));
}

}  // namespace adacomp
