// src/train/learner_impl.h: the Learner, one learner's training loop and
// state (learner.cc: set-up, the step, evaluation, the run; learner_state.cc:
// its weights, digests and checkpoints). Private to src/train/learner*.cc;
// includes LibTorch. Thread safety: one object per learner thread.
#pragma once

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include "adacomp/exchange.h"
#include "adacomp/local_optimizer.h"
#include "adacomp/trainer.h"
#include "batches.h"
#include "byte_io.h"
#include "learner.h"
#include "models.h"
#include "optimizer.h"
#include "options.h"
#include "rng.h"
#include "run_checkpoint.h"
#include "run_log.h"
#include "scheduled_bins.h"
#include "sha256.h"
#include "step_hooks.h"
#include "summary.h"
#include "tensor_plan.h"
#include "totals.h"

namespace adacomp::train::learner_internal {

using Clock = std::chrono::steady_clock;
inline double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Timing {
  double compute = 0, compress = 0, communicate = 0, decompress = 0, update = 0;
};

class Learner {
 public:
  Learner(const TrainOptions& o, const TrainTestHooks& hooks, Communicator& comm,
          std::shared_ptr<const Data> data, Gate* gate)
      : o_(o),
        hooks_(hooks),
        step_hooks_(hooks_, comm.rank()),
        comm_(comm),
        data_(std::move(data)),
        gate_(gate),
        rank_(comm.rank()),
        p_(comm.size()) {}

  Result<TrainSummary> Run();

 private:
  Status Setup();
  Status Resume();
  Status SaveCheckpoint();
  std::vector<uint8_t> OwnState() const;
  Status LoadOwnState(std::span<const uint8_t> bytes);
  Status DoStep(int64_t step, StepMetrics* m);
  // This learner's gradient L2 norm over all tensors (grad_spans_); with
  // --clip-grad-norm it then scales the gradients so that the norm is at
  // most o_.optim.clip_grad_norm (a non-finite norm leaves them for the NaN
  // policy). Returns the norm before any scaling.
  double GradNormThenClip();
  Status Evaluate(double* accuracy, double* loss);
  void Message(const std::string& m) const {
    if (rank_ != 0) return;
    if (o_.run.on_message) {
      o_.run.on_message(m);
    } else {
      std::fprintf(stderr, "%s\n", m.c_str());
    }
  }
  // The learning rate of step `step` (0-based) in epoch `epoch`: the step
  // decay, and the linear warm-up over the first lr_warmup_steps steps.
  double LrAt(int64_t epoch, int64_t step) const {
    double lr = o_.optim.lr;
    for (auto e : o_.optim.lr_decay_epochs) {
      if (epoch >= e) lr *= o_.optim.lr_decay_factor;
    }
    if (step < o_.optim.lr_warmup_steps) {
      lr *= static_cast<double>(step + 1) / static_cast<double>(o_.optim.lr_warmup_steps);
    }
    return lr;
  }
  RunState State() const {
    return {steps_done_,   skipped_,        consecutive_bad_, run_totals_,
            epoch_totals_, epoch_loss_sum_, epoch_loss_count_};
  }
  std::string WeightsDigest() const;
  std::string StateDigest() const;
  std::vector<uint8_t> WeightsBytes() const;
  Status SetWeights(std::span<const uint8_t> bytes, const std::string& origin);

  TrainOptions o_;
  TrainTestHooks hooks_;
  StepHooks step_hooks_;
  Communicator& comm_;
  std::shared_ptr<const Data> data_;
  Gate* gate_;
  int rank_, p_;

  Replica model_;
  std::unique_ptr<GradientExchange> exchange_;
  std::unique_ptr<GradientExchange> warmup_exchange_;  // --dense-warmup-steps; else null
  std::unique_ptr<OptimizerState> optimizer_;
  // --local-optimizer: this learner's own moments (adacomp/local_optimizer.h).
  std::unique_ptr<LocalOptimizer> local_;
  TensorPlan plan_;                    // plan_.local: per tensor, its moments are in local_
  std::optional<ScheduledBins> bins_;  // this step's bin sizes (--ramp-steps, --adapt-threshold)
  std::vector<float> agg_;  // the averaged gradient, flat (tensor k at exchange_->offset(k))
  std::vector<torch::Tensor> agg_views_;
  std::vector<std::span<const float>> grad_spans_;
  bool present_[kLayerTypeCount] = {};
  std::string fingerprint_;

  int64_t steps_per_epoch_ = 0, total_steps_ = 0;
  int64_t steps_done_ = 0, skipped_ = 0, consecutive_bad_ = 0, resumed_from_ = -1;
  std::vector<int64_t> perm_;
  int64_t perm_epoch_ = -1;

  Totals run_totals_, epoch_totals_;
  double epoch_loss_sum_ = 0;
  int64_t epoch_loss_count_ = 0;
  double window_loss_sum_ = 0;
  int64_t window_loss_count_ = 0;
  double last_window_loss_ = NAN;
  Timing timing_;
  // This learner's communicator bytes over the exchanges of the steps run
  // in this process (ExchangeResult::transport_*).
  uint64_t transport_sent_ = 0, transport_received_ = 0;
  // Compressed tensors x steps by each exchange (TrainSummary).
  int64_t allgather_tensor_steps_ = 0, reduce_scatter_tensor_steps_ = 0;
  int64_t auto_dense_steps_ = 0, auto_codec_steps_ = 0;  // --codec auto
  std::vector<std::string> auto_choices_;
  std::vector<EpochMetrics> epochs_;
  double train_seconds_ = 0;   // in DoStep, since the start or the resume
  int64_t reached_step_ = -1;  // stop_at_accuracy reached at this step (the last evaluation)
  RunLog log_;                 // rank 0's metrics and diagnostics files
};

}  // namespace adacomp::train::learner_internal
