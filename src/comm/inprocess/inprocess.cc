// In-process communicator group: P Communicator objects, one per learner
// thread, meeting at a shared rendezvous.
//
// Each collective is one "generation": every rank posts a pointer to its input
// (valid while that rank waits), the last rank to arrive combines all inputs
// into a shared, immutable Outcome while holding the lock and wakes the others,
// and each rank then copies its result out of the Outcome without the lock.
// The Outcome of generation g stays published until generation g+1 completes,
// which needs every rank to have arrived again, so no rank can miss it.
//
// Failures are sticky: an Abort, a timeout or a rank leaving the group (its
// Communicator destroyed while a peer waits) poisons the group, wakes every
// waiter, and every later collective on any rank returns the same Status.
// A mismatch (different collectives, sizes or roots in one generation) fails
// only that collective, with InvalidArgument on every rank; the group stays
// usable because every rank is still at the same point of the call order.
#include <algorithm>
#include <cassert>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "../collective_kinds.h"
#include "../messages.h"
#include "../pieces.h"
#include "../ring.h"
#include "adacomp/communicator.h"

namespace adacomp {
namespace {

using Op = comm_internal::CollectiveKind;
using comm_internal::CollectiveName;

// One rank's contribution to the current generation. `data` points into the
// caller's memory and stays valid while that rank waits for the generation.
struct Slot {
  Op op = Op::kBarrier;
  const void* data = nullptr;
  size_t count = 0;                 // bytes (AllGatherV, Broadcast) or floats (AllReduceSum*)
  int root = 0;                     // Broadcast only
  const size_t* offsets = nullptr;  // AllToAllV: size + 1 piece offsets into data
  std::string problem = {};         // AllToAllV: what is wrong with this rank's pieces
};

// The combined result of one generation, shared read-only by every rank.
struct Outcome {
  Status status;
  std::vector<uint8_t> bytes;           // AllGatherV: all ranks' bytes; Broadcast: root's bytes
  std::vector<size_t> offsets;          // AllGatherV
  std::vector<float> sum;               // AllReduceSum, AllReduceSumHalf
  std::vector<GatheredBuffers> pieces;  // AllToAllV: per destination, from each rank
};

using comm_internal::RankList;
using comm_internal::Seconds;

// Longer timeouts are clamped so that deadlines cannot overflow the clock.
constexpr double kMaxTimeoutSeconds = 1e9;

class Group {
 public:
  Group(int ranks, double timeout_seconds)
      : ranks_(ranks),
        timeout_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(std::min(timeout_seconds, kMaxTimeoutSeconds)))),
        timeout_seconds_(timeout_seconds),
        slots_(ranks),
        present_(ranks, false),
        left_(ranks, false) {}

  int ranks() const { return ranks_; }

  // Posts `slot` for `rank` and waits until every rank has posted (or the
  // group fails). On OK, *outcome holds the generation's combined result.
  Status Run(int rank, const Slot& slot, std::shared_ptr<const Outcome>* outcome) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!failure_.ok()) return failure_;
    for (int r = 0; r < ranks_; ++r) {
      if (left_[r]) {
        Fail(Status::Unavailable("in-process " + std::string(CollectiveName(slot.op)) + " #" +
                                 std::to_string(generation_) + " on rank " + std::to_string(rank) +
                                 ": rank " + std::to_string(r) +
                                 " left the group (its Communicator was destroyed)"));
        return failure_;
      }
    }
    assert(!present_[rank] && "a rank entered two collectives at once");
    slots_[rank] = slot;
    present_[rank] = true;
    ++arrived_;
    const uint64_t my_generation = generation_;
    if (arrived_ == ranks_) {
      outcome_ = Combine();
      arrived_ = 0;
      std::fill(present_.begin(), present_.end(), false);
      ++generation_;
      cv_.notify_all();
      *outcome = outcome_;
      return outcome_->status;
    }
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + timeout_;
    while (generation_ == my_generation && failure_.ok()) {
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
          generation_ == my_generation && failure_.ok()) {
        std::vector<int> missing;
        for (int r = 0; r < ranks_; ++r) {
          if (!present_[r]) missing.push_back(r);
        }
        Fail(Status::Unavailable("in-process " + std::string(CollectiveName(slot.op)) + " #" +
                                 std::to_string(my_generation) + " timed out after " +
                                 Seconds(timeout_seconds_) + " s on rank " + std::to_string(rank) +
                                 ": " + RankList(missing) + " did not arrive"));
      }
    }
    if (generation_ != my_generation) {
      *outcome = outcome_;
      return outcome_->status;
    }
    return failure_;
  }

  void Abort(int rank, const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) return;  // the first failure wins; later ones add nothing
    Fail(Status::Aborted("rank " + std::to_string(rank) + " aborted the group: " + why.ToString()));
  }

  void Leave(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    left_[rank] = true;
    if (arrived_ > 0 && failure_.ok()) {
      std::vector<int> waiting;
      for (int r = 0; r < ranks_; ++r) {
        if (present_[r]) waiting.push_back(r);
      }
      Fail(Status::Unavailable("in-process collective #" + std::to_string(generation_) + ": rank " +
                               std::to_string(rank) +
                               " left the group (its Communicator was destroyed) while " +
                               RankList(waiting) + " waited for it"));
    }
  }

 private:
  void Fail(Status status) {
    failure_ = std::move(status);
    cv_.notify_all();
  }

  // " rank 0 <describe(0)>, rank 1 <describe(1)>, ...": what each rank
  // brought, for a mismatch message.
  template <typename Describe>
  std::string EachRank(Describe describe) const {
    std::string list;
    for (int q = 0; q < ranks_; ++q) {
      list += std::string(q == 0 ? " " : ", ") + "rank " + std::to_string(q) + " " + describe(q);
    }
    return list;
  }

  // Called with mu_ held by the last rank to arrive; every other rank is
  // blocked in Run, so every slot's data pointer is valid.
  std::shared_ptr<const Outcome> Combine() {
    auto out = std::make_shared<Outcome>();
    const std::string where = "in-process collective #" + std::to_string(generation_);
    const Op op = slots_[0].op;
    for (int r = 1; r < ranks_; ++r) {
      if (slots_[r].op != op) {
        out->status = Status::InvalidArgument(
            where + ": ranks called different collectives:" + EachRank([&](int q) {
              return std::string(CollectiveName(slots_[q].op));
            }));
        return out;
      }
    }
    switch (op) {
      case Op::kBarrier:
      case Op::kLeave:  // the MPI communicator's only; a group has no leave handshake
        break;
      case Op::kAllGatherV: {
        size_t total = 0;
        for (int r = 0; r < ranks_; ++r) total += slots_[r].count;
        out->bytes.resize(total);
        out->offsets.resize(ranks_ + 1);
        size_t at = 0;
        for (int r = 0; r < ranks_; ++r) {
          out->offsets[r] = at;
          if (slots_[r].count > 0) {
            std::memcpy(out->bytes.data() + at, slots_[r].data, slots_[r].count);
          }
          at += slots_[r].count;
        }
        out->offsets[ranks_] = at;
        break;
      }
      case Op::kAllToAllV: {
        for (int r = 0; r < ranks_; ++r) {
          if (!slots_[r].problem.empty()) {
            out->status = Status::InvalidArgument(
                where + " (AllToAllV): rank " + std::to_string(r) + " passed " + slots_[r].problem);
            return out;
          }
        }
        out->pieces.resize(ranks_);
        for (int d = 0; d < ranks_; ++d) {
          GatheredBuffers& to = out->pieces[d];
          to.offsets.assign(ranks_ + 1, 0);
          for (int r = 0; r < ranks_; ++r) {
            const size_t* off = slots_[r].offsets;
            const size_t n = off[d + 1] - off[d];
            to.offsets[r + 1] = to.offsets[r] + n;
            if (n > 0) {
              const auto* from = static_cast<const uint8_t*>(slots_[r].data) + off[d];
              to.data.insert(to.data.end(), from, from + n);
            }
          }
        }
        break;
      }
      case Op::kAllReduceSum:
      case Op::kAllReduceSumHalf: {
        const size_t n = slots_[0].count;
        if (Status s = CheckSameCount(where + " (" + CollectiveName(op) + ")", "floats"); !s.ok()) {
          out->status = std::move(s);
          return out;
        }
        // The ring's arithmetic (ring.h): chunk c is the left fold that
        // starts at rank c, ((x_c + x_{c+1}) + ...) mod P, in half mode with
        // the partial sum rounded to half before every hop and at the end.
        const bool half = op == Op::kAllReduceSumHalf;
        out->sum.resize(n);
        for (int c = 0; c < ranks_; ++c) {
          const comm_internal::Chunk chunk = comm_internal::RingChunk(n, ranks_, c);
          if (chunk.size == 0) continue;
          float* acc = out->sum.data() + chunk.begin;
          std::memcpy(acc, static_cast<const float*>(slots_[c].data) + chunk.begin,
                      chunk.size * sizeof(float));
          for (int k = 1; k < ranks_; ++k) {
            const float* own =
                static_cast<const float*>(slots_[(c + k) % ranks_].data) + chunk.begin;
            if (half) {
              comm_internal::AddPartialViaHalf(acc, own, chunk.size);
            } else {
              comm_internal::AddPartial(acc, own, chunk.size);
            }
          }
          if (half) comm_internal::RoundToHalf(acc, chunk.size);
        }
        break;
      }
      case Op::kBroadcast: {
        const int root = slots_[0].root;
        for (int r = 1; r < ranks_; ++r) {
          if (slots_[r].root != root) {
            out->status = Status::InvalidArgument(
                where + " (Broadcast): ranks named different roots:" + EachRank([&](int q) {
                  return "root " + std::to_string(slots_[q].root);
                }));
            return out;
          }
        }
        if (root < 0 || root >= ranks_) {
          out->status = Status::InvalidArgument(where + " (Broadcast): root " +
                                                std::to_string(root) + " is not a rank of a " +
                                                std::to_string(ranks_) + "-rank group");
          return out;
        }
        if (Status s = CheckSameCount(where + " (Broadcast)", "bytes"); !s.ok()) {
          out->status = std::move(s);
          return out;
        }
        const size_t n = slots_[root].count;
        out->bytes.resize(n);
        if (n > 0) std::memcpy(out->bytes.data(), slots_[root].data, n);
        break;
      }
    }
    return out;
  }

  Status CheckSameCount(const std::string& where, const char* unit) const {
    for (int r = 1; r < ranks_; ++r) {
      if (slots_[r].count != slots_[0].count) {
        std::string msg = where + ": sizes differ across ranks (every rank must pass the same):";
        for (int q = 0; q < ranks_; ++q) {
          msg += std::string(q == 0 ? " " : ", ") + "rank " + std::to_string(q) + " " +
                 std::to_string(slots_[q].count) + " " + unit;
        }
        return Status::InvalidArgument(msg);
      }
    }
    return Status::OK();
  }

  const int ranks_;
  const std::chrono::steady_clock::duration timeout_;
  const double timeout_seconds_;

  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;  // index of the collective being assembled
  int arrived_ = 0;
  std::vector<Slot> slots_;
  std::vector<bool> present_;
  std::vector<bool> left_;
  std::shared_ptr<const Outcome> outcome_;  // result of generation_ - 1
  Status failure_;                          // sticky: abort, timeout, a rank left
};

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  ~InProcessCommunicator() override { group_->Leave(rank_); }

  int rank() const override { return rank_; }
  int size() const override { return group_->ranks(); }

  Status AllGatherV(std::span<const uint8_t> mine, GatheredBuffers* out) override {
    assert(out != nullptr);
    std::shared_ptr<const Outcome> outcome;
    const Status st =
        group_->Run(rank_, Slot{Op::kAllGatherV, mine.data(), mine.size(), 0}, &outcome);
    CountHeaders(outcome);
    ADACOMP_RETURN_IF_ERROR(st);
    out->data.assign(outcome->bytes.begin(), outcome->bytes.end());
    out->offsets = outcome->offsets;
    const int p = size();
    if (p > 1) {
      traffic_.sent_bytes += static_cast<uint64_t>(mine.size()) * static_cast<uint64_t>(p - 1);
      traffic_.received_bytes += out->data.size() - mine.size();
    }
    return Status::OK();
  }

  Status AllToAllV(std::span<const uint8_t> mine, std::span<const size_t> offsets,
                   GatheredBuffers* out) override {
    assert(out != nullptr);
    Slot slot{Op::kAllToAllV, mine.data(), mine.size(), 0};
    slot.problem = comm_internal::PieceOffsetsProblem(offsets, size(), mine.size());
    if (slot.problem.empty()) slot.offsets = offsets.data();
    std::shared_ptr<const Outcome> outcome;
    const Status st = group_->Run(rank_, slot, &outcome);
    CountHeaders(outcome);
    ADACOMP_RETURN_IF_ERROR(st);
    *out = outcome->pieces[rank_];
    traffic_.sent_bytes +=
        comm_internal::PieceTraffic(size(), mine.size(), offsets[rank_ + 1] - offsets[rank_]);
    traffic_.received_bytes += comm_internal::PieceTraffic(
        size(), out->data.size(), out->offsets[rank_ + 1] - out->offsets[rank_]);
    return Status::OK();
  }

  Status AllReduceSum(std::span<float> data) override { return Reduce(Op::kAllReduceSum, data); }
  Status AllReduceSumHalf(std::span<float> data) override {
    return Reduce(Op::kAllReduceSumHalf, data);
  }

  Status Broadcast(std::span<uint8_t> data, int root) override {
    std::shared_ptr<const Outcome> outcome;
    const Status st =
        group_->Run(rank_, Slot{Op::kBroadcast, data.data(), data.size(), root}, &outcome);
    CountHeaders(outcome);
    ADACOMP_RETURN_IF_ERROR(st);
    if (rank_ != root && !data.empty()) {
      std::memcpy(data.data(), outcome->bytes.data(), data.size());
    }
    if (size() > 1) {
      if (rank_ == root) {
        traffic_.sent_bytes += static_cast<uint64_t>(data.size()) * (size() - 1);
      } else {
        traffic_.received_bytes += data.size();
      }
    }
    return Status::OK();
  }

  Status Barrier() override {
    std::shared_ptr<const Outcome> outcome;
    const Status st = group_->Run(rank_, Slot{Op::kBarrier, nullptr, 0, 0}, &outcome);
    CountHeaders(outcome);
    return st;
  }

  void Abort(const Status& why) override { group_->Abort(rank_, why); }

 private:
  Status Reduce(Op op, std::span<float> data) {
    std::shared_ptr<const Outcome> outcome;
    const Status st = group_->Run(rank_, Slot{op, data.data(), data.size(), 0}, &outcome);
    CountHeaders(outcome);
    ADACOMP_RETURN_IF_ERROR(st);
    if (!data.empty()) std::memcpy(data.data(), outcome->sum.data(), data.size_bytes());
    const comm_internal::RingTraffic t = comm_internal::RingBytes(
        data.size(), size(), rank_, op == Op::kAllReduceSumHalf ? 2 : sizeof(float));
    traffic_.sent_bytes += t.sent;
    traffic_.received_bytes += t.received;
    return Status::OK();
  }

  // A generation that completed (OK or a mismatch) exchanged headers, as
  // the MPI communicator's would have.
  void CountHeaders(const std::shared_ptr<const Outcome>& outcome) {
    if (!outcome) return;
    ++traffic_.collectives;
    const uint64_t peers = static_cast<uint64_t>(size() - 1);
    traffic_.sent_bytes += comm_internal::kHeaderBytes * peers;
    traffic_.received_bytes += comm_internal::kHeaderBytes * peers;
  }

  std::shared_ptr<Group> group_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> CreateInProcessGroup(int ranks, double timeout_seconds) {
  assert(ranks >= 1 && "a group needs at least one rank");
  assert(timeout_seconds > 0);
  auto group = std::make_shared<Group>(ranks, timeout_seconds);
  std::vector<std::unique_ptr<Communicator>> comms;
  comms.reserve(ranks);
  for (int r = 0; r < ranks; ++r) {
    comms.push_back(std::make_unique<InProcessCommunicator>(group, r));
  }
  return comms;
}

}  // namespace adacomp
