// src/train/batches.h: minibatches as LibTorch tensors (normalised images
// or byte sequences with their next-character targets) and the
// cross-entropy loss over them. Includes torch: include it only from the
// few .cc files that need it. Thread safety: reentrant.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "dataset.h"

namespace adacomp::train {

// Builds the inputs *x and targets *y of examples idx[0..n) of the training
// (train) or test set.
void FillBatch(const Data& d, bool train, const int64_t* idx, int64_t n, torch::Tensor* x,
               torch::Tensor* y);

// Cross-entropy of logits against y, summed (sum) or averaged over targets.
torch::Tensor Loss(const torch::Tensor& logits, const torch::Tensor& y, bool sum);

}  // namespace adacomp::train
