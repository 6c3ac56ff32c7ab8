// src/train/test_hooks.h: the trainer's test hooks, internal to adacomp (the
// trainer's tests and the hidden options of `adacomp train`, which the
// failure tests drive): a non-finite gradient injected on one learner, a
// run stopped early (a simulated kill), the final weights kept, a learner
// that kills its process, a learner that damages its message in transit.
// They are not part of the public TrainOptions. Thread safety: values.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "adacomp/communicator.h"
#include "adacomp/status.h"
#include "adacomp/trainer.h"

namespace adacomp {

// Makes one learner's gradient of one tensor non-finite at a step.
struct NanInjection {
  int64_t step = 0;  // global step (0-based)
  int learner = 0;
  int tensor = 0;  // parameter index in model order
};

struct TrainTestHooks {
  std::vector<NanInjection> inject_nan;
  int64_t stop_after_steps = 0;  // > 0: return after this many steps (simulates a kill)
  // Rank 0's final weights, in model order, go into *weights_out when it is
  // set; keep_weights asks the trainer tests' Run() helper to set it.
  bool keep_weights = false;
  std::vector<float>* weights_out = nullptr;
  // Learner kill_rank raises SIGKILL (ending its whole process) as it starts
  // the 0-based step kill_at_step. Learner corrupt_rank flips one byte of its
  // compressed message of the 0-based step corrupt_at_step after encoding it,
  // so every learner's decode of it fails (ignored with the dense codec,
  // which sends no frames). -1 = off.
  int kill_rank = -1;
  int64_t kill_at_step = 0;
  bool kill_stops = false;  // raise SIGSTOP instead (a frozen process)
  int corrupt_rank = -1;
  int64_t corrupt_at_step = 0;
  // Learner slow_rank sleeps slow_ms milliseconds in every step's compute
  // phase (a straggler). -1 = off.
  int slow_rank = -1;
  int slow_ms = 0;
  // --codec auto: (rank) -> the seconds that learner reports for each step,
  // from the step's result, instead of its wall time (a chosen link speed,
  // the same on every run: resumes can be compared bit for bit).
  std::function<std::function<double(const ExchangeResult&)>(int rank)> auto_step_clock;
};

// ValidateTrainOptions, Train and TrainLearner with test hooks.
Status ValidateTrainOptions(const TrainOptions& options, const TrainTestHooks& hooks);
Result<TrainSummary> Train(const TrainOptions& options, const TrainTestHooks& hooks);
Result<TrainSummary> TrainLearner(const TrainOptions& options, Communicator& comm,
                                  const TrainTestHooks& hooks);

}  // namespace adacomp
