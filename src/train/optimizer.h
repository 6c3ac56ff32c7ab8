// src/train/optimizer.h: the update every learner applies to its replica
// with the averaged gradient: SGD (with momentum and weight decay) or Adam,
// and the optimizer state as bytes for checkpoints and digests. The same
// torch operations in the same order on every learner, one intra-op
// thread each, so replicas stay bit-identical. Includes torch.
// Thread safety: one object per learner thread.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "adacomp/status.h"
#include "adacomp/trainer.h"
#include "models.h"

namespace adacomp::train {

class OptimizerState {
 public:
  // Zero state for `params` (momentum, or Adam's two moments). Tensors t
  // with plain[t] (empty: none) take the plain step params[t] -= lr
  // (grads[t] + weight decay params[t]) and keep no state (--local-optimizer:
  // their moments are on the learners); with plain_decay false they take no
  // weight decay (a local SGD's decay is inside its velocity).
  OptimizerState(const TrainOptions& o, const std::vector<Param>& params,
                 std::vector<bool> plain = {}, bool plain_decay = true);

  // One step with learning rate lr: params[t] -= update(grads[t]).
  void Apply(std::vector<Param>& params, const std::vector<torch::Tensor>& grads, double lr);

  // {int64 Adam step, uint64 buffer count, each buffer length-prefixed}.
  std::vector<uint8_t> State() const;
  // The inverse of State(); Corruption naming `origin` (and the state
  // unchanged) when the bytes do not fit this model.
  Status LoadState(std::span<const uint8_t> bytes, const std::string& origin);

 private:
  bool adam_;
  double momentum_, weight_decay_, beta1_, beta2_, eps_;
  std::vector<torch::Tensor> buf1_, buf2_;  // momentum / Adam moments (empty where plain_)
  std::vector<bool> plain_;
  bool plain_decay_;
  int64_t adam_step_ = 0;
};

}  // namespace adacomp::train
