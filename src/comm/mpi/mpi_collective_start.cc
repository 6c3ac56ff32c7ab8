// The start of every MPI collective (MpiCommunicator::Begin, declared in
// mpi_communicator_impl.h): the header exchange with every peer and the
// checks that every rank called the same collective with matching sizes,
// and that no rank left the job.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "../ring.h"
#include "mpi_communicator_impl.h"

namespace adacomp::mpi_internal {

Status MpiCommunicator::Begin(int64_t kind, int64_t count, int64_t root, Collective* c) {
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
        return MPI_Isend(&my_header_, 4, MPI_INT64_T, r, kHeaderTag, comm_, &requests_[size_ + r]);
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
      return Fail(Status::Unavailable(Where(*c) + " timed out after " + Seconds(timeout_seconds_) +
                                      " s: " + RankList(missing) + " did not arrive"));
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

Status MpiCommunicator::CheckNobodyLeft(const Collective& c) {
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

Status MpiCommunicator::CheckHeaders(const Collective& c) const {
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
          return "rank " + std::to_string(r) + " " + std::to_string(headers_[r].count) + " floats";
        }));
  }
  if (c.kind == kBroadcast) {
    if (!same_root) {
      return Status::InvalidArgument(Where(c) + ": ranks named different roots:" + list([&](int r) {
                                       return "rank " + std::to_string(r) + " root " +
                                              std::to_string(headers_[r].root);
                                     }));
    }
    if (h0.root < 0 || h0.root >= size_) {
      return Status::InvalidArgument(Where(c) + ": root " + std::to_string(h0.root) +
                                     " is not a rank of a " + std::to_string(size_) + "-rank job");
    }
    if (!same_count) {
      return Status::InvalidArgument(
          Where(c) +
          ": sizes differ across ranks (every rank must pass the same):" + list([&](int r) {
            return "rank " + std::to_string(r) + " " + std::to_string(headers_[r].count) + " bytes";
          }));
    }
  }
  return Status::OK();
}

}  // namespace adacomp::mpi_internal
