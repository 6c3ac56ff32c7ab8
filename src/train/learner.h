// src/train/learner.h: one learner's training loop, and the gate that lets
// the learners of one process take turns on its cores. The loop
// (learner.cc, the only place that sees torch here) computes this learner's
// gradient, hands it to the GradientExchange (include/adacomp/exchange.h),
// applies the averaged gradient with the Optimizer, evaluates, logs and
// checkpoints. Train() and TrainLearner() (train.cc) host learners on
// threads or over a caller's communicator. Torch-free header.
// Thread safety: RunLearner runs on its learner's thread; a Gate is shared.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>

#include "adacomp/communicator.h"
#include "adacomp/exchange.h"
#include "adacomp/status.h"
#include "adacomp/trainer.h"
#include "dataset.h"
#include "test_hooks.h"

namespace adacomp::train {

// Limits how many learner threads compute at once (never held across a
// collective).
// A mutex and a condition variable, not std::counting_semaphore: libstdc++
// 12's semaphore can lose a wake-up (GCC bug 104928), and a learner then
// waited for a free slot forever while none was held (seen in a stack dump
// of a hung `adacomp train` and a timed-out trainer test).
class Gate : public ExchangeThrottle {
 public:
  explicit Gate(int slots) : free_(slots) {}
  void Acquire() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return free_ > 0; });
    --free_;
  }
  void Release() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++free_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
};

// Holds a gate (if any) for a scope.
using GateHold = ExchangeThrottleHold;

// Runs the learner of comm.rank() over resolved options `o` to the end of
// the run; on an error other than a peer's abort, aborts the group. One
// torch intra-op thread per learner, so results do not depend on how many
// learners compute at once. `gate` may be null.
Result<TrainSummary> RunLearner(const TrainOptions& o, const TrainTestHooks& hooks,
                                Communicator& comm, std::shared_ptr<const Data> data, Gate* gate);

}  // namespace adacomp::train
