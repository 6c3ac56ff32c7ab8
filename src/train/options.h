// src/train/options.h: the trainer's option resolution: defaults filled in
// (the learning rate per model and optimizer), every option checked with a
// message naming it, and the fingerprint a checkpoint must match to be
// resumed. Torch-free. Thread safety: pure functions.
#pragma once

#include <string>

#include "adacomp/status.h"
#include "adacomp/trainer.h"
#include "test_hooks.h"

namespace adacomp::train {

// %g of v, for messages.
std::string ShortDouble(double v);

// The learning rate a model trains with by default under an optimizer.
double DefaultLr(Model model, Optimizer optimizer);

// The options with defaults filled in, or InvalidArgument naming the option.
Result<TrainOptions> Resolve(const TrainOptions& in);

// The AdaComp bin size of a tensor of this layer type under these options.
uint32_t BinSizeFor(const TrainOptions& o, LayerType type);

// Whether a tensor of this layer type runs the local optimizer under these
// (resolved) options: local_optimizer, and its type among
// local_optimizer_types (0 = every type).
bool LocalOptimizerFor(const TrainOptions& o, LayerType type);

// The bin-size setting in words, for the summary.
std::string BinSizeText(const TrainOptions& o);

// Settings a checkpoint must agree with to be resumed (`data`: the data set's
// description).
std::string Fingerprint(const TrainOptions& o, const std::string& data);

// InvalidArgument if a hook names a learner, step or tensor that cannot
// exist for these (resolved) options.
Status CheckHooks(const TrainOptions& o, const TrainTestHooks& hooks);

}  // namespace adacomp::train
