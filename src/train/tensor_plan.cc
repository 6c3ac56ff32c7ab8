// The per-tensor plan of a run (see tensor_plan.h).
#include "tensor_plan.h"

#include <algorithm>

#include "options.h"
#include "rng.h"

namespace adacomp::train {

bool TensorPlan::any_local() const {
  return std::find(local.begin(), local.end(), true) != local.end();
}

bool TensorPlan::all_local() const {
  return !local.empty() && std::find(local.begin(), local.end(), false) == local.end();
}

TensorPlan PlanTensors(const TrainOptions& o, std::span<const TensorSpec> tensors, int rank) {
  TensorPlan plan;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const TensorSpec& spec = tensors[t];
    ExchangeTensor x;
    x.name = spec.name;
    x.elements = static_cast<uint64_t>(spec.elements);
    x.codec = o.codec.config;
    if (o.codec.config.codec != Codec::kDense && spec.elements <= o.codec.dense_below) {
      x.codec = CodecConfig{};
      x.codec.codec = Codec::kDense;
      ++plan.dense_tensors;
    }
    const bool binned = x.codec.codec == Codec::kAdaComp;
    plan.bin_sizes.push_back(binned ? BinSizeFor(o, spec.type) : 0);
    if (binned) x.codec.bin_size = plan.bin_sizes.back();
    x.codec.seed =
        MixSeed(MixSeed(o.codec.config.seed ^ o.run.seed, static_cast<uint64_t>(rank)), t);
    ExchangeTensor d = x;
    d.codec = CodecConfig{};
    d.codec.codec = Codec::kDense;
    plan.exchange.push_back(std::move(x));
    plan.dense.push_back(std::move(d));
    plan.local.push_back(LocalOptimizerFor(o, spec.type));
  }
  return plan;
}

}  // namespace adacomp::train
