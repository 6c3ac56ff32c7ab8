// src/train/scheduled_bins.h: the bin-size schedule (adacomp/schedule.h)
// applied to one learner's exchange: before each step the schedule's size
// goes into every binned compressor (and an lr drop into the adaptive part),
// after it the adaptive part sees the norms of the averaged gradient. Holds
// this step's bin size of every tensor, which the selected-per-bin figures
// use. Without a schedule the sizes stay the plan's and nothing is done.
// Torch-free. Thread safety: one object per learner thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "adacomp/exchange.h"
#include "adacomp/schedule.h"
#include "adacomp/status.h"

namespace adacomp::train {

class ScheduledBins {
 public:
  // targets[k]: tensor k's bin size after any ramp (TensorPlan::bin_sizes).
  ScheduledBins(const BinSchedule& schedule, std::vector<uint32_t> targets);

  // This step's bin size per tensor; 0 where the tensor is not binned.
  const std::vector<uint32_t>& sizes() const { return sizes_; }
  // Tensor-steps sent lightened by the adaptive part so far in this process.
  int64_t lightened() const { return lightened_; }

  // Before step `step`'s exchange (not a dense warm-up step): `lr_dropped`
  // says its lr is lower than the last step's.
  Status BeforeStep(int64_t step, bool lr_dropped, GradientExchange& exchange);
  // After step `step` was averaged into `averaged` (tensor k at
  // exchange.offset(k)); the adaptive part only.
  void AfterStep(int64_t step, const GradientExchange& exchange, std::span<const float> averaged);

  // Whether there is state to checkpoint (the adaptive windows), and it.
  bool has_state() const { return schedule_.adaptive(); }
  std::vector<uint8_t> Save() const { return scheduler_.Save(); }
  Status Load(std::span<const uint8_t> bytes) { return scheduler_.Load(bytes); }

 private:
  BinSchedule schedule_;
  BinScheduler scheduler_;
  std::vector<uint32_t> sizes_;
  std::vector<double> norms_;  // AfterStep's, kept to avoid an allocation per step
  int64_t lightened_ = 0;
};

}  // namespace adacomp::train
