// src/train/models.h: the LibTorch models `adacomp train` trains, and their
// parameter list tagged by layer type. Includes torch: include it only from
// the few .cc files that need it.
//
// Models: mnist-cnn (28x28x1), cifar-cnn (32x32x3), fc-dnn (flattened image),
// char-lstm (embedding, 2-layer LSTM, linear head over 256 byte values).
// Initial weights come from InitWeights(seed), a generator of our own, so
// they do not depend on torch's global generator or on thread scheduling.
// Thread safety: a model is used by one learner thread.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "adacomp/status.h"
#include "adacomp/trainer.h"

namespace adacomp::train {

struct ModelShape {
  int64_t channels = 1, height = 28, width = 28;  // image models
  int64_t classes = 10;
  int64_t vocab = 256, embed = 32, hidden = 128;  // char-lstm
};

class Net : public torch::nn::Module {
 public:
  // Images: x [B, C, H, W] float -> logits [B, classes].
  // Text: x [B, T] int64 -> logits [B, T, vocab].
  virtual torch::Tensor Forward(const torch::Tensor& x) = 0;
};

struct Param {
  std::string name;
  LayerType type;
  torch::Tensor tensor;  // the parameter (requires grad)
  int64_t elements;
  float init_bound;  // uniform(-b, b); b < 0 means normal(0, 1)
};

struct Replica {
  std::shared_ptr<Net> net;
  std::vector<Param> params;
  bool text = false;
};

Result<Replica> CreateModel(const std::string& name, const ModelShape& shape);

// Deterministic initialisation from (seed, parameter index).
void InitWeights(Replica& model, uint64_t seed);

}  // namespace adacomp::train
