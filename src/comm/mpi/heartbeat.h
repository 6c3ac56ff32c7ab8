// src/comm/mpi/heartbeat.h: the MPI communicator's liveness channel, a
// thread that beats to every peer and names the first one that falls
// silent (MpiOptions::heartbeat_seconds). Internal to adacomp_comm_mpi;
// included by mpi_communicator.cc only.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace adacomp::mpi_internal {

inline constexpr int kBeatTag = 7303;

// The liveness channel (MpiOptions::heartbeat_seconds): a thread that sends
// every peer an 8-byte beat each interval on a communicator of its own, notes
// when it last heard from each peer, and names the first peer silent for
// longer than the limit. Every MPI call it makes holds *mpi_mu, as do the
// communicator's own (MPI_THREAD_SERIALIZED).
class Heartbeat {
 public:
  Heartbeat(MPI_Comm comm, int rank, int size, double silence_seconds, std::mutex* mpi_mu)
      : comm_(comm),
        rank_(rank),
        size_(size),
        silence_(silence_seconds),
        interval_(std::min(1.0, silence_seconds / 5)),
        mpi_mu_(mpi_mu),
        in_(size),
        out_(size),
        recv_(size, MPI_REQUEST_NULL),
        send_(size, MPI_REQUEST_NULL),
        heard_(size, std::chrono::steady_clock::now()),
        finished_(size, false),
        sent_last_(size, false) {
    std::lock_guard<std::mutex> lock(*mpi_mu_);
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) PostReceive(r);
    }
    thread_ = std::thread([this] { Run(); });
  }

  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Without Stop() (the job failed and aborts), the thread is left running:
  // the process is about to end.
  ~Heartbeat() {
    if (thread_.joinable()) thread_.detach();
  }

  double silence_seconds() const { return silence_; }

  // The first peer found silent for longer than the limit, or -1;
  // *silent_for receives for how long it had been silent then.
  int SilentPeer(double* silent_for) const {
    const int r = silent_rank_.load(std::memory_order_acquire);
    if (r >= 0) *silent_for = silent_for_;
    return r;
  }

  // Ends the heartbeat after a clean leave: sends every peer a last beat
  // (-1) and waits, up to drain_seconds, for every peer's last beat, so that
  // no beat is left unmatched; then frees the communicator. False when some
  // peer's last beat did not come in time (the communicator is not freed).
  // A negative drain_seconds ends the thread at once without another MPI
  // call (MPI is already finalized).
  bool Stop(double drain_seconds) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      drain_seconds_ = drain_seconds;
    }
    cv_.notify_all();
    thread_.join();
    if (!drained_ || drain_seconds < 0) return false;
    std::lock_guard<std::mutex> lock(*mpi_mu_);
    MPI_Comm_free(&comm_);
    return true;
  }

 private:
  void PostReceive(int r) {
    if (MPI_Irecv(&in_[r], 1, MPI_INT64_T, r, kBeatTag, comm_, &recv_[r]) != MPI_SUCCESS) {
      recv_[r] = MPI_REQUEST_NULL;  // this peer will be found silent
    }
  }

  // Takes in every beat that has arrived and posts this interval's beats
  // (or the last ones); with *mpi_mu_ held.
  void Exchange(bool beat, bool last, std::chrono::steady_clock::time_point now) {
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      while (recv_[r] != MPI_REQUEST_NULL) {
        int arrived = 0;
        if (MPI_Test(&recv_[r], &arrived, MPI_STATUS_IGNORE) != MPI_SUCCESS || !arrived) break;
        heard_[r] = now;
        if (in_[r] < 0) {
          finished_[r] = true;  // its last beat: post no other receive
        } else {
          PostReceive(r);
        }
      }
      if (send_[r] != MPI_REQUEST_NULL) {
        int done = 0;
        MPI_Test(&send_[r], &done, MPI_STATUS_IGNORE);
      }
      if (send_[r] == MPI_REQUEST_NULL && (beat || last) && !sent_last_[r]) {
        out_[r] = last ? -1 : ++beats_;
        if (MPI_Isend(&out_[r], 1, MPI_INT64_T, r, kBeatTag, comm_, &send_[r]) != MPI_SUCCESS) {
          send_[r] = MPI_REQUEST_NULL;
        } else if (last) {
          sent_last_[r] = true;
        }
      }
    }
  }

  void Run() {
    const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(interval_));
    auto next_beat = std::chrono::steady_clock::now();
    bool draining = false;
    std::chrono::steady_clock::time_point drain_deadline;
    for (;;) {
      const auto now = std::chrono::steady_clock::now();
      if (!draining) {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) {
          if (drain_seconds_ < 0) return;
          draining = true;
          drain_deadline = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                     std::chrono::duration<double>(drain_seconds_));
        }
      }
      const bool beat = now >= next_beat;
      {
        std::lock_guard<std::mutex> lock(*mpi_mu_);
        Exchange(beat, draining, now);
      }
      if (beat) next_beat = now + interval;
      if (draining) {
        bool done = true;
        for (int r = 0; r < size_; ++r) {
          if (r != rank_ && (!finished_[r] || !sent_last_[r] || send_[r] != MPI_REQUEST_NULL)) {
            done = false;
          }
        }
        if (done) {
          drained_ = true;
          return;
        }
        if (now >= drain_deadline) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      if (silent_rank_.load(std::memory_order_relaxed) < 0) {
        for (int r = 0; r < size_; ++r) {
          const double quiet = std::chrono::duration<double>(now - heard_[r]).count();
          if (r != rank_ && !finished_[r] && quiet > silence_) {
            silent_for_ = quiet;
            silent_rank_.store(r, std::memory_order_release);
            break;
          }
        }
      }
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_until(lock, next_beat, [this] { return stop_; });
    }
  }

  MPI_Comm comm_;
  const int rank_;
  const int size_;
  const double silence_;
  const double interval_;
  std::mutex* const mpi_mu_;

  // The thread's own (read by others only after join).
  std::vector<int64_t> in_;
  std::vector<int64_t> out_;
  std::vector<MPI_Request> recv_;
  std::vector<MPI_Request> send_;
  std::vector<std::chrono::steady_clock::time_point> heard_;
  std::vector<bool> finished_;
  std::vector<bool> sent_last_;
  int64_t beats_ = 0;
  bool drained_ = false;

  // Published by the thread.
  std::atomic<int> silent_rank_{-1};
  double silent_for_ = 0;  // written before silent_rank_ (release)

  std::mutex mu_;  // stop_, drain_seconds_
  std::condition_variable cv_;
  bool stop_ = false;
  double drain_seconds_ = 0;
  std::thread thread_;
};

}  // namespace adacomp::mpi_internal
