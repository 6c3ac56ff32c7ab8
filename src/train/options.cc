// Option resolution and the checkpoint fingerprint (see options.h).
#include "options.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace adacomp::train {

std::string ShortDouble(double v) {
  char b[32];
  std::snprintf(b, sizeof(b), "%g", v);
  return b;
}

double DefaultLr(Model model, Optimizer optimizer) {
  if (optimizer == Optimizer::kAdam) return model == Model::kCharLstm ? 2e-3 : 1e-3;
  if (model == Model::kCharLstm) return 1.0;
  if (model == Model::kFcDnn) return 0.05;
  return 0.02;
}

Result<TrainOptions> Resolve(const TrainOptions& in) {
  TrainOptions o = in;
  auto bad = [](const std::string& m) { return Status::InvalidArgument(m); };
  if (static_cast<uint8_t>(o.model.kind) > static_cast<uint8_t>(Model::kCharLstm)) {
    return bad("model " + std::to_string(static_cast<int>(o.model.kind)) +
               " is unknown (expected mnist-cnn, cifar-cnn, fc-dnn or char-lstm)");
  }
  if (o.run.learners < 1 || o.run.learners > 4096)
    return bad("--learners must be between 1 and 4096");
  if (o.run.batch_size < o.run.learners) {
    return bad("--batch-size " + std::to_string(o.run.batch_size) + " is smaller than --learners " +
               std::to_string(o.run.learners));
  }
  if (o.run.batch_size % o.run.learners != 0) {
    return bad("--batch-size " + std::to_string(o.run.batch_size) +
               " is not a multiple of --learners " + std::to_string(o.run.learners) +
               " (every learner takes an equal shard)");
  }
  if (o.run.steps < 0) return bad("--steps must be >= 0");
  if (o.run.steps == 0 && o.run.epochs < 1) return bad("--epochs must be >= 1");
  if (o.optim.kind != Optimizer::kSgd && o.optim.kind != Optimizer::kAdam) {
    return bad("optimizer " + std::to_string(static_cast<int>(o.optim.kind)) +
               " is unknown (expected sgd or adam)");
  }
  if (o.optim.lr == 0) o.optim.lr = DefaultLr(o.model.kind, o.optim.kind);
  if (!(o.optim.lr > 0) || !std::isfinite(o.optim.lr)) return bad("--lr must be a positive number");
  if (o.optim.momentum < 0 || o.optim.momentum >= 1) return bad("--momentum must be in [0, 1)");
  if (o.optim.weight_decay < 0) return bad("--weight-decay must be >= 0");
  if (!(o.optim.lr_decay_factor > 0)) return bad("--lr-decay-factor must be > 0");
  if (o.optim.lr_warmup_steps < 0) return bad("--lr-warmup-steps must be >= 0 (0 = off)");
  if (o.run.threads < 0) return bad("--threads must be >= 0");
  if (o.run.log_every < 1) return bad("--log-every must be >= 1");
  if (!(o.run.stop_at_accuracy >= 0 && o.run.stop_at_accuracy <= 1)) {
    return bad("--stop-at-accuracy must be in [0, 1] (0 = off)");
  }
  if (o.run.eval_every < 0) return bad("--eval-every must be >= 0 (0 = epoch ends only)");
  if (!o.run.link_counters.empty() && o.run.metrics_out.empty()) {
    return bad("--link-counters needs --metrics-out (its lines carry them)");
  }
  if (o.run.max_bad_steps < 1) return bad("--max-bad-steps must be >= 1");
  if (o.run.checkpoint_every < 0) return bad("--checkpoint-every must be >= 0");
  if (o.run.resume && o.run.checkpoint_dir.empty()) return bad("--resume needs --checkpoint-dir");
  if (o.run.keep_checkpoints < 1) return bad("--keep-checkpoints must be >= 1");
  if (o.model.seq_len < 2 || o.model.seq_len > 4096)
    return bad("--seq-len must be between 2 and 4096");
  if (o.model.hidden < 1 || o.model.embed < 1) return bad("--hidden and --embed must be >= 1");
  if (o.codec.dense_below < 0) return bad("--dense-below must be >= 0");
  if (o.codec.dense_warmup_steps < 0) return bad("--dense-warmup-steps must be >= 0");
  if (!(o.optim.clip_grad_norm >= 0) || !std::isfinite(o.optim.clip_grad_norm)) {
    return bad("--clip-grad-norm must be a finite number >= 0 (0 = off)");
  }
  if (o.codec.local_optimizer && o.optim.kind == Optimizer::kSgd && !(o.optim.momentum > 0)) {
    return bad(
        "--local-optimizer with SGD needs --momentum > 0 (without momentum there is no "
        "state to keep on the learner)");
  }
  if (!o.codec.local_mask && !(o.codec.local_optimizer && o.optim.kind == Optimizer::kSgd)) {
    return bad(
        "--no-local-mask needs the local optimizer with SGD (--local-optimizer "
        "--optimizer sgd): only its velocity is masked");
  }
  constexpr uint32_t kAllTypes = (1u << kLayerTypeCount) - 1;
  if (o.codec.local_optimizer_types & ~kAllTypes) {
    return bad("local_optimizer_types has bits beyond the " + std::to_string(kLayerTypeCount) +
               " layer types");
  }
  if (o.codec.local_optimizer_types && !o.codec.local_optimizer) {
    return bad("--local-optimizer-types needs the local optimizer (--local-optimizer)");
  }
  if (o.codec.local_optimizer_types == kAllTypes)
    o.codec.local_optimizer_types = 0;  // every tensor
  Status codec_ok = o.codec.config.Validate();
  if (!codec_ok.ok()) return bad(codec_ok.message());
  if (o.codec.bin_schedule.enabled() && o.codec.config.codec != Codec::kAdaComp) {
    return bad("a bin-size schedule (--ramp-steps, --adapt-threshold) needs --codec adacomp, not " +
               std::string(CodecName(o.codec.config.codec)));
  }
  if (o.codec.auto_dense) {
    if (o.codec.config.codec == Codec::kDense) {
      return bad(
          "--codec auto chooses between dense and a codec; it takes the codec's settings "
          "(adacomp by default), not dense");
    }
    if (o.codec.dense_warmup_steps) {
      return bad("--codec auto starts dense by itself; leave out --dense-warmup-steps");
    }
    if (o.codec.bin_schedule.enabled()) {
      return bad("--codec auto runs the fixed bin sizes; leave out the bin-size schedule");
    }
    Status speed_ok = o.codec.speed.Validate();
    if (!speed_ok.ok()) return bad(speed_ok.message());
  }
  Status schedule_ok = o.codec.bin_schedule.Validate();
  if (!schedule_ok.ok()) return bad("bin-size schedule: " + schedule_ok.message());
  return o;
}

// Settings a checkpoint must agree with to be resumed.
std::string Fingerprint(const TrainOptions& o, const std::string& data) {
  std::ostringstream s;
  s.precision(17);
  s << "model=" << ModelName(o.model.kind) << ";data=" << data
    << ";codec=" << CodecName(o.codec.config.codec)
    << ";values=" << ValueModeName(o.codec.config.values) << ";density=" << o.codec.config.density
    << ";tau=" << o.codec.config.tau << ";codec_seed=" << o.codec.config.seed
    << ";bin=" << o.codec.bin_size << ";learners=" << o.run.learners
    << ";batch=" << o.run.batch_size << ";seed=" << o.run.seed
    << ";optimizer=" << OptimizerName(o.optim.kind) << ";lr=" << o.optim.lr
    << ";momentum=" << o.optim.momentum << ";wd=" << o.optim.weight_decay
    << ";betas=" << o.optim.adam_beta1 << "," << o.optim.adam_beta2 << ";eps=" << o.optim.adam_eps
    << ";decay=" << o.optim.lr_decay_factor << "@";
  for (auto e : o.optim.lr_decay_epochs) s << e << ",";
  s << ";train_limit=" << o.run.train_limit << ";seq=" << o.model.seq_len
    << ";hidden=" << o.model.hidden << ";embed=" << o.model.embed;
  // Appended only when set, so checkpoints written before these options
  // existed still match.
  for (int t = 0; t < kLayerTypeCount; ++t) {
    if (o.codec.bin_size_by_type[t]) {
      s << ";bin_" << LayerTypeName(static_cast<LayerType>(t)) << "="
        << o.codec.bin_size_by_type[t];
    }
  }
  if (o.codec.dense_below) s << ";dense_below=" << o.codec.dense_below;
  if (o.codec.auto_dense) {
    s << ";auto=" << o.codec.speed.probe_steps << "," << o.codec.speed.reprobe_every << ","
      << o.codec.speed.probe_cost << "," << o.codec.speed.drift << "," << o.codec.speed.min_settled
      << "," << o.codec.speed.margin;
  }
  if (o.codec.dense_warmup_steps) s << ";dense_warmup=" << o.codec.dense_warmup_steps;
  if (o.optim.clip_grad_norm > 0) s << ";clip=" << o.optim.clip_grad_norm;
  if (o.optim.lr_warmup_steps > 0) s << ";lr_warmup=" << o.optim.lr_warmup_steps;
  if (o.codec.local_optimizer) s << ";local_optimizer=1";
  if (!o.codec.local_mask) s << ";local_mask=0";
  if (o.codec.local_optimizer_types) s << ";local_types=" << o.codec.local_optimizer_types;
  if (o.codec.bin_schedule.enabled()) s << ";bin_schedule=" << o.codec.bin_schedule.ToString();
  if (o.codec.summed_values == ValueMode::kFp16 && o.codec.exchange != ExchangeKind::kAllGather) {
    s << ";summed=fp16";
  }
  return s.str();
}

bool LocalOptimizerFor(const TrainOptions& o, LayerType type) {
  return o.codec.local_optimizer &&
         (!o.codec.local_optimizer_types ||
          (o.codec.local_optimizer_types >> static_cast<int>(type) & 1u));
}

uint32_t BinSizeFor(const TrainOptions& o, LayerType type) {
  const uint32_t by_type = o.codec.bin_size_by_type[static_cast<int>(type)];
  if (by_type) return by_type;
  return o.codec.bin_size ? o.codec.bin_size : DefaultBinSize(type);
}

std::string BinSizeText(const TrainOptions& o) {
  bool per_type = o.codec.bin_size == 0;
  for (uint32_t b : o.codec.bin_size_by_type) per_type = per_type || b != 0;
  if (!per_type) return std::to_string(o.codec.bin_size);
  std::string s = "per layer type:";
  for (int t = 0; t < kLayerTypeCount; ++t) {
    const auto type = static_cast<LayerType>(t);
    s += std::string(t ? ", " : " ") + LayerTypeName(type) + " " +
         std::to_string(BinSizeFor(o, type));
    if (type == LayerType::kOther) s += " (biases, embeddings)";
  }
  return s;
}

Status CheckHooks(const TrainOptions& o, const TrainTestHooks& hooks) {
  for (const auto& inj : hooks.inject_nan) {
    if (inj.learner < 0 || inj.learner >= o.run.learners || inj.step < 0 || inj.tensor < 0) {
      return Status::InvalidArgument(
          "a NaN injection names a learner, step or tensor that does not exist");
    }
  }
  return Status::OK();
}

}  // namespace adacomp::train
