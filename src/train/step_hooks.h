// src/train/step_hooks.h: where the trainer's test hooks (test_hooks.h) act
// on one learner's step, kept out of the training loop so that it reads
// compute -> exchange -> update: the learner that kills or freezes its own
// process, the straggler's sleep, the NaN written into a gradient, and the
// byte flipped in a message in transit. Each action says on stderr what it
// does and when (wall clock), so a failure test can time the job's end.
// Torch-free. Thread safety: const methods, one object per learner.
#pragma once

#include <cstdint>
#include <span>

#include "adacomp/exchange.h"
#include "test_hooks.h"

namespace adacomp::train {

class StepHooks {
 public:
  StepHooks(const TrainTestHooks& hooks, int rank) : hooks_(hooks), rank_(rank) {}

  // At the start of 0-based step `step`: SIGKILL or SIGSTOP this process if
  // this learner is the one to die there.
  void AtStepStart(int64_t step) const;
  // The straggler's sleep (this learner only); returns the seconds slept.
  double Straggle() const;
  // Writes a NaN into grad[0] of tensor `tensor` if an injection names this
  // learner, step and tensor.
  void Poison(int64_t step, size_t tensor, std::span<float> grad) const;
  // Arms `exchange` to flip one byte of this learner's message of step
  // `step`, if this learner is the one to corrupt it (the caller clears the
  // send hook after the step).
  void ArmCorruption(int64_t step, GradientExchange& exchange) const;

 private:
  void Note(const char* what, int64_t step) const;

  const TrainTestHooks& hooks_;
  int rank_;
};

}  // namespace adacomp::train
