// adacomp/local_optimizer.h: the optimizer's moments kept on each learner,
// before compression. One implementation, torch-free, for `adacomp train
// --local-optimizer` and the DDP hook's local optimizer
// (python/adacomp/torch/local_optimizer.py).
//
// The paper applies the optimizer after aggregation, to the averaged sparse
// update. A local optimizer instead runs the optimizer's moments on each
// learner's OWN gradient and hands the step they give, not the gradient, to
// the compressor, whose residue then accumulates steps; the caller applies
// the average of the steps as it is (w -= lr x average).
//
//   SGD   the velocity u = momentum u + (g + weight_decay w) is compressed
//         (the momentum correction of Deep Gradient Compression), with
//         factor masking: an element the compressor sent has its velocity
//         zeroed, so momentum from before the send does not push it again
//         from the residue. With nesterov, the step (g + weight_decay w) +
//         momentum u of the new velocity is compressed instead (torch's
//         SGD(nesterov=True); linear in the gradients too, so the average of
//         the learners' steps is Nesterov's step on the averaged gradient);
//         masking then zeroes the velocity where the step was sent.
//   Adam  the bias-corrected step d = m_hat / (sqrt(v_hat) + eps) of this
//         learner's gradient is compressed; nothing is masked.
//
// The choices, one for both callers:
//   - Arithmetic: float32, each operation rounded in the order written
//     (u: momentum x u, then plus (g + weight_decay x w); Adam: m = b1 m +
//     (1 - b1) g, v = b2 v + (1 - b2) g g, d = (m / bc1) / (sqrt(v / bc2) +
//     eps)); no multiply-add is fused. The bias corrections bc = 1 - beta^t
//     are computed in double once per step and rounded to float32. For SGD
//     these are torch's own roundings (torch.optim.SGD gives the same bits
//     on one learner); a tensor's first step starts from no moments (u = g
//     exactly, as torch's SGD does), not from zeros.
//   - Weight decay: SGD takes it inside the velocity (torch's SGD: the
//     velocity is linear in the gradients, so the average of the learners'
//     velocities is SGD with momentum and weight decay on the averaged
//     gradient). Adam takes it, when given, inside the gradient, wd w + g
//     before the moments (torch's Adam's L2 term); AdamW's decoupled decay
//     belongs to whoever applies the averaged step (give none here).
//   - Masking: an element is masked when this learner's frame of the step
//     carries a non-zero value for it (MaskSent: a sparse frame's entries,
//     never a pass over the tensor). A step sent whole masks nothing: a
//     frame of a codec that keeps no residue (dense, TernGrad) is not
//     masked by (MaskSent reads its codec), and a step sent dense by the
//     caller's choice (a dense warm-up, auto) is not given to MaskSent.
//   - Clipping is the caller's: it spans tensors (or DDP buckets), so the
//     gradient handed to Prepare is already clipped.
//   - Step scale: Adam's d is multiplied by adam_step_scale (rounded
//     after d, one more float32 multiply; 1 leaves d's bits as above).
//   - Frozen second moment (1-bit Adam): with freeze_second_moment_after =
//     F > 0, once F steps are committed Adam leaves the second moment of a
//     tensor that has one as it is, with the bias correction of its last
//     update; a tensor without one yet runs plain Adam. A dense warm-up of F steps that
//     runs Adam on the exact average gives every learner the same second
//     moment to freeze.
//
// A step commits nothing until Commit(): Prepare() writes the next moments
// beside the current ones, so a step dropped (a NaN anywhere, a failed
// exchange) leaves them as they were. Buffers are allocated at a tensor's
// first Prepare and reused (swapped at Commit), so no later step allocates.
// Each tensor counts its own steps, as torch's Adam counts each
// parameter's: a tensor first used at step 100 starts its bias corrections
// at 1. The optimizer's own count (steps()) counts every Commit and decides
// when the second moment freezes.
//
// Thread safety: one object per learner thread; const methods may be used
// concurrently with each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "adacomp/status.h"

namespace adacomp {

struct LocalOptimizerSettings {
  enum class Kind : uint8_t { kSgd = 0, kAdam = 1 };
  Kind kind = Kind::kSgd;
  double momentum = 0.9;                          // sgd: in [0, 1)
  bool nesterov = false;                          // sgd: Nesterov's step (see above)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam: betas in [0, 1), eps > 0
  // adam: the second moment is frozen from this many committed steps on
  // (see above); 0: never. >= 0.
  int64_t freeze_second_moment_after = 0;
  // adam: each step d is multiplied by this (finite, > 0; 1: Adam's own
  // step). A learner's second moment is of its own batch, P times smaller
  // than the average's: where batch noise dominates it is up to P times the
  // averaged gradient's, so the average of the learners' steps is up to
  // sqrt(P) times smaller than Adam's on the averaged gradient; sqrt(P)
  // gives that back (the DDP hook's one call sets it). Not with a frozen
  // second moment, which is already the average's (refused).
  double adam_step_scale = 1.0;

  // InvalidArgument naming the bad field, or OK.
  Status Validate() const;
};

const char* LocalOptimizerKindName(LocalOptimizerSettings::Kind kind);  // "sgd", "adam"

class LocalOptimizer {
 public:
  // An optimizer with one tensor per entry of `sizes` (elements; 0 is a
  // tensor never prepared), no moments yet, step count 0. InvalidArgument
  // on bad settings.
  static Result<std::unique_ptr<LocalOptimizer>> Create(const LocalOptimizerSettings& settings,
                                                        std::span<const size_t> sizes = {});

  // Adds a tensor of `elements` floats; returns its index.
  size_t AddTensor(size_t elements);

  // The step direction of tensor k for this learner's gradient (grad.size()
  // == elements(k)): SGD u_next = momentum u + (grad + weight_decay param)
  // (param: the tensor's weights, needed when weight_decay > 0), or with
  // nesterov (grad + weight_decay param) + momentum u_next; Adam d
  // from m_next and v_next of grad + weight_decay param, with step count
  // steps() + 1. Valid until the next Prepare of k or Commit/Drop.
  // InvalidArgument (nothing changed) on a size that does not match, a
  // weight decay < 0 or not finite, a weight decay without param.
  Result<std::span<float>> Prepare(size_t k, std::span<const float> grad,
                                   std::span<const float> param = {}, double weight_decay = 0);

  // SGD: zeroes tensor k's prepared velocity where `frame` (this learner's
  // frame of the prepared step) carries a non-zero value; they count as
  // masked at Commit. Adam, or a frame of a codec without residue (dense,
  // TernGrad): nothing. InvalidArgument unless k is
  // prepared; the frame's own error (nothing changed) if it does not decode
  // to elements(k) floats.
  Status MaskSent(size_t k, std::span<const uint8_t> frame);

  // Moves the decay rates from the next Prepare on, as a schedule does
  // (torch's OneCycleLR and CyclicLR set SGD's momentum, or Adam's beta1,
  // at every step): SGD's momentum, or Adam's beta1 and beta2 (the other
  // kind's values are ignored). As in torch, the moments are kept and the
  // next step decays them by the new rate, and Adam's bias corrections use
  // the betas of the step they correct (1 - beta^t with the current beta).
  // InvalidArgument, nothing changed, on a rate outside [0, 1), on a beta2
  // that differs once a frozen second moment keeps its last correction, or
  // while a step is in progress (a tensor prepared: its step was made with
  // the old rates).
  Status SetRates(double momentum, double beta1, double beta2);

  // Adam's step scale (adam_step_scale) from the next Prepare on: a scale
  // measured as the run goes (the DDP hook's measured scale). Checked as
  // Validate() checks the setting; InvalidArgument, nothing changed, on a bad
  // scale, on SGD or a frozen second moment (unless 1), or while a step is
  // in progress.
  Status SetStepScale(double scale);

  // The step was applied: every prepared tensor's next moments become its
  // moments, and the step count goes up by one.
  void Commit();
  // The step was not applied: the prepared moments are forgotten.
  void Drop();

  const LocalOptimizerSettings& settings() const { return s_; }
  size_t tensors() const { return t_.size(); }
  size_t elements(size_t k) const { return t_[k].elements; }
  int64_t steps() const { return steps_; }
  // Elements masked by the committed steps (SGD).
  uint64_t masked() const { return masked_; }
  // Whether tensor k has moments (a committed step, or set), and whether it
  // is prepared in the step in progress.
  bool started(size_t k) const { return t_[k].steps > 0; }
  bool prepared(size_t k) const { return t_[k].prepared; }
  // SGD: the velocity; Adam: the first moment. Adam's second moment (empty
  // for SGD). Empty for a tensor not started.
  std::span<const float> first(size_t k) const;
  std::span<const float> second(size_t k) const;
  // Tensor k's committed steps, and those that updated its second moment
  // (Adam; fewer once frozen): its bias corrections' counts.
  int64_t steps(size_t k) const { return t_[k].steps; }
  int64_t second_steps(size_t k) const { return t_[k].second_steps; }

  // Puts tensor k's moments and counts in place (a state a caller saved in
  // its own form): first.size() == elements(k), second.size() the same for
  // Adam and 0 for SGD, 1 <= second_steps <= steps (SGD: second_steps ==
  // steps); InvalidArgument, nothing changed, otherwise. Ends any step in
  // progress for k.
  Status SetMoments(size_t k, std::span<const float> first, std::span<const float> second,
                    int64_t steps, int64_t second_steps);
  // Forgets every tensor's moments (not the tensors) and sets the counts.
  void Reset(int64_t steps = 0, uint64_t masked = 0);

  // The settings' kind, the counts and every started tensor's moments as
  // bytes (checkpoints), and the inverse, checked whole before anything
  // changes: Corruption naming `origin` on another kind, tensor count or
  // size, a truncated record or trailing bytes.
  std::vector<uint8_t> Save() const;
  Status Load(std::span<const uint8_t> bytes, const std::string& origin);

 private:
  explicit LocalOptimizer(const LocalOptimizerSettings& settings) : s_(settings) {}
  struct Tensor {
    size_t elements = 0;
    int64_t steps = 0, second_steps = 0;   // committed steps; those that updated v
    bool prepared = false, froze = false;  // froze: the step in progress keeps v
    uint64_t masking = 0;                  // elements MaskSent zeroed in the step in progress
    // first/second: the moments; next_*: the step in progress's; step: Adam's d.
    std::vector<float> first, second, next_first, next_second, step;
  };
  void Allocate(Tensor& t) const;
  // InvalidArgument saying that `what` changes between steps when a tensor is
  // prepared (a step in progress), else OK.
  Status BetweenSteps(const char* what) const;

  LocalOptimizerSettings s_;
  std::vector<Tensor> t_;
  int64_t steps_ = 0;
  uint64_t masked_ = 0;
};

}  // namespace adacomp
