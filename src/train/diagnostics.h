// src/train/diagnostics.h: what the residue does, tensor by tensor, on one
// learner (--diagnostics-out; docs/results.md uses it to find where AdaComp
// loses accuracy). Torch-free.
//
// For every tensor whose codec keeps a residue, each step gives the residue R
// before the exchange, this learner's gradient dW and the residue R' after
// it. With G = R + dW, an element was sent iff R' != G (what was sent is
// G - R'). Over a window of steps the probe reports, per tensor: the share
// of elements sent, the mean |G - R'| of the sent elements (AdaComp's scale
// s) against their mean |G| (s < |G| means the quantized update is smaller
// than what it replaces), the norms of R' and dW, and how long elements wait
// in the residue (steps since each was last sent: mean, max, share waiting
// more than 100 steps, and the mean wait weighted by |R'|, i.e. how old the
// residue's mass is).
//
// Thread safety: one probe per learner thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace adacomp::train {

class ResidueProbe {
 public:
  struct Tensor {
    std::string name;
    std::string type;  // "conv", "fc", "lstm", "other"
    size_t elements = 0;
  };
  explicit ResidueProbe(std::vector<Tensor> tensors);

  // The residue of tensor k before this step's exchange.
  void Before(size_t k, std::span<const float> residue);
  // This learner's gradient of tensor k and its residue after the exchange.
  void After(size_t k, std::span<const float> grad, std::span<const float> residue);
  // Ends a step (the wait counters advance by one).
  void EndStep() { ++steps_; }

  // One JSON object (no newline) with the window's figures per tensor that
  // has a residue (After() was called for it), at `step` (1-based); starts a
  // new window.
  std::string Line(int64_t step);

  // For tests: the current wait of element j of tensor k, in steps.
  uint32_t Wait(size_t k, size_t j) const { return state_[k].wait[j]; }

 private:
  struct State {
    std::vector<float> before;
    std::vector<uint32_t> wait;
    // Window sums.
    double sent = 0, scale_sum = 0, abs_g_sum = 0;
    uint64_t sent_elements = 0, steps = 0;
    // The last step's figures.
    double residue_norm = 0, grad_norm = 0, mass_wait = 0;
    bool probed = false;  // After() was called at least once (tensors sent dense never are)
  };
  std::vector<Tensor> tensors_;
  std::vector<State> state_;
  int64_t steps_ = 0;
};

}  // namespace adacomp::train
