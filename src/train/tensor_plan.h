// src/train/tensor_plan.h: what each of the model's tensors gets on this
// learner, decided once at the start of a run from the (resolved) options:
// its codec settings (dense below --dense-below, the bin size of its layer
// type, a compressor seed per run, learner and tensor), its all-dense twin
// for --dense-warmup-steps, and whether its moments live in the local
// optimizer. Torch-free. Thread safety: pure function, values.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/exchange.h"
#include "adacomp/trainer.h"

namespace adacomp::train {

// One parameter tensor of the model, as the plan sees it.
struct TensorSpec {
  std::string name;
  int64_t elements = 0;
  LayerType type = LayerType::kOther;
};

struct TensorPlan {
  std::vector<ExchangeTensor> exchange;  // this learner's codec settings per tensor
  std::vector<ExchangeTensor> dense;     // the same tensors, all dense
  // Per tensor: the AdaComp bin size after any ramp (the schedule's
  // target); 0 where the tensor is not binned (another codec, or dense).
  std::vector<uint32_t> bin_sizes;
  std::vector<bool> local;    // per tensor: its moments are in the local optimizer
  int64_t dense_tensors = 0;  // tensors sent dense by --dense-below

  bool any_local() const;
  bool all_local() const;  // false for a plan without tensors
};

TensorPlan PlanTensors(const TrainOptions& o, std::span<const TensorSpec> tensors, int rank);

}  // namespace adacomp::train
