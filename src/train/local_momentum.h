// src/train/local_momentum.h: momentum correction with factor masking
// (--momentum-correction), an option beside the paper's default.
//
// The paper applies SGD's momentum after aggregation, to the averaged
// sparse update. With momentum correction each learner instead keeps its own
// velocity u (u = m u + dW) and hands u, not dW, to its compressor, whose
// residue then accumulates velocities; the averaged update is applied
// without momentum (w -= lr avg). Factor masking: an element the compressor
// sent has its velocity zeroed, so momentum from before the send does not
// keep pushing the same element from the residue. For a tensor without a
// residue (sent dense) nothing is masked, and the update is exactly SGD with
// momentum m (the average of the velocities is the velocity of the average).
//
// An element was sent iff the residue after compression differs from the
// residue before it plus u (G = R + u is what every residue codec starts
// from; an unsent element keeps all of G), the same test as the residue
// diagnostics (diagnostics.h).
//
// A step commits nothing until Commit(): Prepare() computes the next
// velocities beside the current ones, so a skipped step (a NaN anywhere)
// leaves the velocities as they were. Torch-free. Thread safety: one object
// per learner thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "adacomp/status.h"

namespace adacomp::train {

class LocalMomentum {
 public:
  // Velocities for tensors of these sizes, all zero; 0 <= momentum < 1.
  LocalMomentum(double momentum, std::vector<size_t> sizes);

  // u_next = momentum * u + grad for tensor k (grad.size() == its size);
  // returns u_next, which stays valid until the next Prepare of k.
  std::span<const float> Prepare(size_t k, std::span<const float> grad);
  // Makes tensor k's u_next its velocity, zeroing the elements the
  // compressor sent: those j with residue_after[j] != residue_before[j] +
  // u_next[j]. Empty residues (a tensor without one) mask nothing.
  void Commit(size_t k, std::span<const float> residue_before,
              std::span<const float> residue_after);

  size_t tensors() const { return velocity_.size(); }
  std::span<const float> velocity(size_t k) const { return velocity_[k]; }
  // Elements masked by the Commit() calls so far (all tensors).
  uint64_t masked() const { return masked_; }

  // All velocities as bytes (checkpoints), and the inverse: Corruption on a
  // count or size that does not match, velocities unchanged then.
  std::vector<uint8_t> Save() const;
  Status Load(std::span<const uint8_t> bytes, const std::string& origin);

 private:
  float momentum_;
  std::vector<std::vector<float>> velocity_, next_;
  uint64_t masked_ = 0;
};

}  // namespace adacomp::train
