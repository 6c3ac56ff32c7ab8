// src/train/options.h: the trainer's option resolution: defaults filled in
// (the learning rate per model and optimizer), every option checked with a
// message naming it, and the fingerprint a checkpoint must match to be
// resumed. Torch-free. Thread safety: pure functions.
#pragma once

#include <string>

#include "adacomp/status.h"
#include "adacomp/trainer.h"

namespace adacomp::train {

// %g of v, for messages.
std::string ShortDouble(double v);

// The learning rate a model trains with by default under an optimizer.
double DefaultLr(const std::string& model, const std::string& optimizer);

// The options with defaults filled in, or InvalidArgument naming the option.
Result<TrainOptions> Resolve(const TrainOptions& in);

// Settings a checkpoint must agree with to be resumed (`data`: the data set's
// description).
std::string Fingerprint(const TrainOptions& o, const std::string& data);

}  // namespace adacomp::train
