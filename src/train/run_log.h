// src/train/run_log.h: rank 0's per-step outputs: --metrics-out (one JSON
// line per logged step), --diagnostics-out (a ResidueProbe over the
// exchange's compressors, one JSON line per logged step) and the on_step
// callback. Torch-free. Thread safety: rank 0's learner thread only.
#pragma once

#include <fstream>
#include <memory>
#include <span>
#include <vector>

#include "adacomp/exchange.h"
#include "adacomp/status.h"
#include "adacomp/trainer.h"
#include "diagnostics.h"

namespace adacomp::train {

// A step skipped for non-finite gradients (xr.skipped()): the warning that
// names every learner and layer, and, at o.max_bad_steps steps in a row
// (`consecutive`), the InvalidArgument that stops the run.
Status SkippedStep(const TrainOptions& o, const GradientExchange& x, const ExchangeResult& xr,
                   int64_t step, int64_t consecutive, std::string* warning);

class RunLog {
 public:
  // Opens the files the options name (the metrics file is appended to when
  // `append`, i.e. on resume). IOError naming the file if one cannot be
  // written.
  Status Open(const TrainOptions& o, bool append, std::vector<ResidueProbe::Tensor> tensors);

  // Around one step's exchange (no-ops without --diagnostics-out): the
  // residues before, and this learner's gradients with the residues after.
  void BeforeExchange(GradientExchange& x);
  void AfterExchange(GradientExchange& x, std::span<const std::span<const float>> grads);

  // After every step: the lines at log points, the callback always.
  void Step(const StepMetrics& m, bool log_point);

 private:
  const TrainOptions* o_ = nullptr;
  std::unique_ptr<std::ofstream> metrics_, diagnostics_;
  std::unique_ptr<ResidueProbe> probe_;
};

}  // namespace adacomp::train
