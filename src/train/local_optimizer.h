// src/train/local_optimizer.h: the optimizer's moments kept on each learner,
// before compression (--local-optimizer), an option beside the paper's
// default.
//
// The paper applies the optimizer after aggregation, to the averaged sparse
// update. With --local-optimizer each learner runs the optimizer's moment
// estimates on its OWN gradient and hands the resulting step direction, not
// the gradient, to its compressor, whose residue then accumulates steps; the
// averaged step is applied as it is (w -= lr avg).
//
//   SGD   the velocity u = m u + dW is compressed (momentum correction, as
//         in Deep Gradient Compression), with factor masking: an element
//         the compressor sent has its velocity zeroed, so momentum from
//         before the send does not keep pushing it from the residue.
//   Adam  the first and second moments of this learner's gradient give the
//         step d = m_hat / (sqrt(v_hat) + eps) that is compressed (bias
//         corrections with the step count); nothing is masked. Every element
//         then accumulates about one unit of step per step in the residue,
//         however rarely it is sent, where Adam after a sparse exchange
//         divides each rare spike by its own running mean square.
//
// For a tensor without a residue (sent dense) nothing is masked, and the
// update is the optimizer's own: for SGD exactly (the average of the
// velocities is the velocity of the average), for Adam with each learner's
// moments of its own gradient in place of the moments of the average.
//
// An element was sent iff the residue after compression differs from the
// residue before it plus the step (G = R + step is what every residue codec
// starts from; an unsent element keeps all of G), the same test as the
// residue diagnostics (diagnostics.h).
//
// A step commits nothing until Commit(): Prepare() computes the next
// moments beside the current ones, so a skipped step (a NaN anywhere)
// leaves them as they were. Torch-free. Thread safety: one object per
// learner thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "adacomp/status.h"

namespace adacomp::train {

class LocalOptimizer {
 public:
  struct Settings {
    bool adam = false;
    double momentum = 0.9;                          // SGD, in [0, 1)
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // Adam
  };
  // Moments for tensors of these sizes, all zero, step count 0.
  LocalOptimizer(const Settings& settings, std::vector<size_t> sizes);

  // The step direction of tensor k for this learner's gradient (grad.size()
  // == its size): SGD u_next = momentum u + grad; Adam d from m_next, v_next
  // and step count steps() + 1. Valid until the next Prepare of k.
  std::span<const float> Prepare(size_t k, std::span<const float> grad);
  // Makes tensor k's prepared moments its moments; SGD zeroes the velocity
  // of the elements the compressor sent: those j with residue_after[j] !=
  // residue_before[j] + step[j]. Empty residues (a tensor without one) mask
  // nothing.
  void Commit(size_t k, std::span<const float> residue_before,
              std::span<const float> residue_after);
  // After every tensor's Commit: the step count goes up by one.
  void EndStep() { ++steps_; }

  size_t tensors() const { return first_.size(); }
  int64_t steps() const { return steps_; }
  // SGD: the velocity; Adam: the first moment. Adam's second moment.
  std::span<const float> first(size_t k) const { return first_[k]; }
  std::span<const float> second(size_t k) const { return second_[k]; }
  // Elements masked by the Commit() calls so far (SGD).
  uint64_t masked() const { return masked_; }

  // The step count and every moment as bytes (checkpoints), and the
  // inverse: Corruption on a count or size that does not match, everything
  // unchanged then.
  std::vector<uint8_t> Save() const;
  Status Load(std::span<const uint8_t> bytes, const std::string& origin);

 private:
  Settings s_;
  int64_t steps_ = 0;
  // first_: velocity (SGD) or m (Adam); second_: v (Adam only, else empty).
  std::vector<std::vector<float>> first_, second_;
  std::vector<std::vector<float>> next_first_, next_second_, step_;
  uint64_t masked_ = 0;
};

}  // namespace adacomp::train
