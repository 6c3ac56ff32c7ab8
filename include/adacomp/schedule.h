// adacomp/schedule.h: a compression schedule, the AdaComp bin size L_T of
// each tensor as a function of the training step (docs/algorithm.md
// section 6).
//
// Two parts, each off by default (the paper's fixed L_T):
//   ramp      for the first ramp_steps steps the bin size climbs from
//             ramp_start to the tensor's own bin size in ramp_stages equal
//             stages of geometric growth (start x (target/start)^(s/stages)
//             in stage s), then stays at the target: light compression while
//             the weights move fast, as Deep Gradient Compression's warm-up
//             stages do.
//   adaptive  every adapt_window steps the mean L2 norm of each tensor's
//             AVERAGED gradient over the window is compared with the previous
//             window's; where it changed by at least adapt_threshold
//             (|m_w - m_{w-1}| / m_{w-1}), that tensor is sent with the light
//             bin size adapt_bin_size for the next adapt_hold steps, and so is
//             every tensor after a learning-rate drop (Accordion's rule, in
//             steps rather than epochs).
// The averaged gradient is the same on every learner, so every learner
// picks the same bin sizes without talking; a frame names its own L_T, so
// the wire format does not change. Compressor::SetBinSize applies a new
// bin size with the residue carried over whole.
//
// Thread safety: BinSchedule is a value; a BinScheduler belongs to one
// learner (one thread).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "adacomp/status.h"

namespace adacomp {

struct BinSchedule {
  int64_t ramp_steps = 0;       // 0 = no ramp
  uint32_t ramp_start = 8;      // >= 1: the bin size of the first stage
  int ramp_stages = 4;          // >= 1
  double adapt_threshold = 0;   // > 0 turns the adaptive part on
  int64_t adapt_window = 16;    // >= 1 steps
  int64_t adapt_hold = 32;      // >= 1 steps lightened
  uint32_t adapt_bin_size = 0;  // the light bin size; 0 = ramp_start

  bool ramp() const { return ramp_steps > 0; }
  bool adaptive() const { return adapt_threshold > 0; }
  bool enabled() const { return ramp() || adaptive(); }
  uint32_t light_bin_size() const { return adapt_bin_size ? adapt_bin_size : ramp_start; }

  // InvalidArgument naming the bad field, or OK.
  Status Validate() const;
  // "fixed", or the settings in words (summaries, checkpoint fingerprints):
  // e.g. "ramp 8 -> L_T over 200 steps in 4 stages; adaptive 0.5 every 16
  // steps, 32 steps at 8".
  std::string ToString() const;
};

// The ramp's bin size at 0-based step `step` for a tensor whose bin size is
// `target` (>= 1): the target once the ramp is over or without one; never
// above the target.
uint32_t RampBinSize(const BinSchedule& schedule, uint32_t target, int64_t step);

// The schedule of a learner's tensors, with the adaptive part's state.
class BinScheduler {
 public:
  // targets[k]: tensor k's bin size after the ramp; 0 for a tensor that is
  // not binned (its bin size stays 0).
  BinScheduler(const BinSchedule& schedule, std::vector<uint32_t> targets);

  // Tensor k's bin size for 0-based step `step`.
  uint32_t BinSize(size_t k, int64_t step) const;
  // Whether the adaptive part has lightened tensor k at step `step`.
  bool Lightened(size_t k, int64_t step) const;

  // After step `step` was applied: norms[k] is the L2 norm of tensor k's
  // averaged gradient (one value per tensor). At the last step of a window
  // the window's mean is compared with the previous one's, and a tensor
  // that changed by the threshold or more is lightened for steps
  // step + 1 .. step + adapt_hold. Skipped steps are simply not observed.
  // No-op without the adaptive part.
  void Observe(int64_t step, std::span<const double> norms);
  // The learning rate of step `step` is lower than the last one's: every
  // binned tensor is lightened for steps step .. step + adapt_hold - 1.
  void LrDropped(int64_t step);

  // The adaptive state as bytes (checkpoints) and its inverse, which checks
  // the tensor count and sizes and leaves the state unchanged on error.
  std::vector<uint8_t> Save() const;
  Status Load(std::span<const uint8_t> bytes);

  size_t tensors() const { return targets_.size(); }
  const BinSchedule& schedule() const { return schedule_; }

 private:
  struct Window {
    double sum = 0;  // norms observed in the current window
    int64_t count = 0;
    double previous = -1;      // the last window's mean; < 0 = none yet
    int64_t light_until = -1;  // lightened for steps < light_until
  };
  BinSchedule schedule_;
  std::vector<uint32_t> targets_;
  std::vector<Window> windows_;
};

}  // namespace adacomp
