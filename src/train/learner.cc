// The per-learner training loop (docs/algorithm.md sections 2, 3 and 5).
//
// One step on every learner:
//   compute     forward/backward on this learner's shard of the global batch
//   exchange    GradientExchange::Step (include/adacomp/exchange.h): agree on
//               finiteness (a NaN/Inf anywhere skips the step everywhere
//               before any residue, weight or optimizer state changes) and
//               share the losses, compress, all-gather, decode-average
//   update      SGD+momentum or Adam on the averaged gradient (optimizer.h)
// All learners apply the same bytes in the same order, so replicas stay
// bit-identical; each uses one torch intra-op thread, so nothing depends on
// how many learners compute at once.
#include "learner.h"

#include "exchange/exchange_hooks.h"
#include "learner_impl.h"

namespace adacomp::train {
namespace learner_internal {

Status Learner::Setup() {
  ModelShape shape;
  if (data_->text) {
    shape.vocab = 256;
    shape.embed = o_.model.embed;
    shape.hidden = o_.model.hidden;
  } else {
    shape.channels = data_->train.channels;
    shape.height = data_->train.height;
    shape.width = data_->train.width;
    shape.classes = data_->train.classes;
  }
  ADACOMP_ASSIGN_OR_RETURN(model_, CreateModel(std::string(ModelName(o_.model.kind)), shape));
  InitWeights(model_, o_.run.seed);
  fingerprint_ = Fingerprint(o_, data_->description);
  for (const auto& inj : hooks_.inject_nan) {
    if (inj.tensor >= static_cast<int>(model_.params.size())) {
      return Status::InvalidArgument("a NaN injection names tensor " + std::to_string(inj.tensor) +
                                     "; the model has " + std::to_string(model_.params.size()));
    }
  }
  // Weights start from rank 0's.
  std::vector<uint8_t> w = WeightsBytes();
  ADACOMP_RETURN_IF_ERROR(comm_.Broadcast(w, 0));
  ADACOMP_RETURN_IF_ERROR(SetWeights(w, "rank 0's initial weights"));

  // One compressor per tensor (tensor_plan.h); --dense-warmup-steps: a
  // second, all-dense exchange (the ring all-reduce) for the first steps.
  std::vector<TensorSpec> specs;
  for (const Param& p : model_.params) {
    present_[static_cast<int>(p.type)] = true;
    specs.push_back({p.name, p.elements, p.type});
  }
  plan_ = PlanTensors(o_, specs, rank_);
  ExchangeOptions xo;
  xo.kind = o_.codec.exchange;
  xo.summed_values = o_.codec.summed_values;
  xo.auto_dense = o_.codec.auto_dense;
  xo.speed = o_.codec.speed;
  ADACOMP_ASSIGN_OR_RETURN(exchange_, GradientExchange::Create(comm_, plan_.exchange, xo));
  if (hooks_.auto_step_clock && exchange_->auto_dense()) {
    exchange_internal::SetStepClock(*exchange_, hooks_.auto_step_clock(rank_));
  }
  if (o_.codec.dense_warmup_steps > 0 && !exchange_->all_reduce()) {
    ADACOMP_ASSIGN_OR_RETURN(warmup_exchange_, GradientExchange::Create(comm_, plan_.dense));
  }
  bins_.emplace(o_.codec.bin_schedule, plan_.bin_sizes);
  if (o_.codec.local_optimizer) {
    // The moments live on each learner; the averaged step is applied as it
    // is (plain SGD, no momentum). With --local-optimizer-types, for those
    // types' tensors only; the others keep the paper's optimizer.
    if (!plan_.any_local()) {
      return Status::InvalidArgument(std::string("--local-optimizer-types: ") +
                                     std::string(ModelName(o_.model.kind)) +
                                     " has no tensor of those layer types");
    }
    std::vector<size_t> sizes;
    for (size_t t = 0; t < model_.params.size(); ++t) {
      sizes.push_back(plan_.local[t] ? static_cast<size_t>(model_.params[t].elements) : 0);
    }
    // A local SGD takes the weight decay inside its velocity (torch's SGD);
    // a local Adam's is decoupled, applied with the averaged step
    // (include/adacomp/local_optimizer.h).
    const bool sgd = o_.optim.kind == Optimizer::kSgd;
    std::vector<bool> plain(plan_.local.begin(), plan_.local.end());
    if (plan_.all_local()) plain.assign(model_.params.size(), true);
    optimizer_ = std::make_unique<OptimizerState>(o_, model_.params, std::move(plain),
                                                  /*plain_decay=*/!sgd);
    LocalOptimizerSettings ls;
    ls.kind = sgd ? LocalOptimizerSettings::Kind::kSgd : LocalOptimizerSettings::Kind::kAdam;
    ls.momentum = o_.optim.momentum;
    ls.beta1 = o_.optim.adam_beta1;
    ls.beta2 = o_.optim.adam_beta2;
    ls.eps = o_.optim.adam_eps;
    ADACOMP_ASSIGN_OR_RETURN(local_, LocalOptimizer::Create(ls, sizes));
  } else {
    optimizer_ = std::make_unique<OptimizerState>(o_, model_.params);
  }
  agg_.assign(exchange_->total_elements(), 0.0f);
  for (size_t t = 0; t < model_.params.size(); ++t) {
    agg_views_.push_back(torch::from_blob(agg_.data() + exchange_->offset(t),
                                          model_.params[t].tensor.sizes(), torch::kFloat32));
  }
  grad_spans_.resize(model_.params.size());
  steps_per_epoch_ = data_->train_count / o_.run.batch_size;
  if (steps_per_epoch_ < 1) {
    return Status::InvalidArgument("--batch-size " + std::to_string(o_.run.batch_size) +
                                   " exceeds the " + std::to_string(data_->train_count) +
                                   " training examples");
  }
  total_steps_ = o_.run.steps > 0 ? o_.run.steps : o_.run.epochs * steps_per_epoch_;
  return Status::OK();
}

double Learner::GradNormThenClip() {
  double sum = 0;  // a plain loop in double: the same on every run and thread count
  for (const auto& g : grad_spans_) {
    for (float v : g) sum += static_cast<double>(v) * v;
  }
  const double norm = std::sqrt(sum);
  if (!(o_.optim.clip_grad_norm > 0) || !std::isfinite(norm) || norm <= o_.optim.clip_grad_norm) {
    return norm;
  }
  const float factor = static_cast<float>(o_.optim.clip_grad_norm / norm);
  for (auto& p : model_.params) {  // the tensors grad_spans_ point into
    auto g = p.tensor.mutable_grad();
    float* w = g.data_ptr<float>();
    const int64_t n = g.numel();
    for (int64_t i = 0; i < n; ++i) w[i] *= factor;
  }
  return norm;
}

Status Learner::DoStep(int64_t step, StepMetrics* m) {
  const int64_t b = o_.run.batch_size / p_;
  const int64_t epoch = step / steps_per_epoch_;
  const int64_t pos = step % steps_per_epoch_;
  if (epoch != perm_epoch_) {
    perm_ = EpochPermutation(data_->train_count, o_.run.seed, epoch);
    perm_epoch_ = epoch;
  }
  const double lr = LrAt(epoch, step);
  m->step = step + 1;
  m->epoch = epoch;
  m->lr = lr;
  auto step_start = Clock::now();
  Timing t;
  step_hooks_.AtStepStart(step);

  // Compute this learner's gradient.
  double loss_value = 0;
  {
    const double slept = step_hooks_.Straggle();  // counts as compute
    GateHold hold(gate_);
    auto t0 = Clock::now();
    torch::Tensor x, y;
    FillBatch(*data_, true, perm_.data() + pos * o_.run.batch_size + rank_ * b, b, &x, &y);
    for (auto& p : model_.params) {
      if (p.tensor.grad().defined()) p.tensor.mutable_grad().zero_();
    }
    auto loss = Loss(model_.net->Forward(x), y, false);
    loss.backward();
    loss_value = loss.item<double>();
    for (size_t k = 0; k < model_.params.size(); ++k) {
      auto& p = model_.params[k];
      if (!p.tensor.grad().defined()) p.tensor.mutable_grad() = torch::zeros_like(p.tensor);
      auto g = p.tensor.grad();
      step_hooks_.Poison(step, k,
                         std::span<float>(g.data_ptr<float>(), static_cast<size_t>(g.numel())));
      grad_spans_[k] = std::span<const float>(g.data_ptr<float>(), static_cast<size_t>(g.numel()));
    }
    // Only rank 0's norm is reported: the others measure it only to clip.
    if (o_.optim.clip_grad_norm > 0 || rank_ == 0) m->grad_norm = GradNormThenClip();
    t.compute = Since(t0) + slept;
  }

  // Exchange: agree on finiteness and share the losses, then the average of
  // every learner's gradient into agg_.
  const bool warmup = warmup_exchange_ && step < o_.codec.dense_warmup_steps;
  GradientExchange& exchange = warmup ? *warmup_exchange_ : *exchange_;
  if (!warmup) {
    const bool lr_dropped = step > 0 && lr < LrAt((step - 1) / steps_per_epoch_, step - 1);
    ADACOMP_RETURN_IF_ERROR(bins_->BeforeStep(step, lr_dropped, exchange));
  }
  step_hooks_.ArmCorruption(step, exchange);
  if (local_) {
    // --local-optimizer: the compressors get this learner's own step.
    const double wd = o_.optim.kind == Optimizer::kSgd ? o_.optim.weight_decay : 0.0;
    for (size_t k = 0; k < grad_spans_.size(); ++k) {
      if (!plan_.local[k]) continue;
      std::span<const float> w;
      if (wd > 0) {
        const torch::Tensor& p = model_.params[k].tensor;
        w = std::span<const float>(p.data_ptr<float>(), static_cast<size_t>(p.numel()));
      }
      ADACOMP_ASSIGN_OR_RETURN(std::span<float> step, local_->Prepare(k, grad_spans_[k], w, wd));
      grad_spans_[k] = step;
    }
  }
  const bool probe = rank_ == 0 && !warmup;
  if (probe) log_.BeforeExchange(exchange);
  ExchangeResult xr;
  const Status exchanged = exchange.Step(grad_spans_, loss_value, agg_, &xr, gate_);
  exchange_internal::SetSendHook(exchange, nullptr);
  ADACOMP_RETURN_IF_ERROR(exchanged);
  transport_sent_ += xr.transport_sent_bytes;
  transport_received_ += xr.transport_received_bytes;
  m->transport_sent_bytes = xr.transport_sent_bytes;
  m->transport_received_bytes = xr.transport_received_bytes;
  t.compress = xr.compress_seconds;
  t.communicate = xr.communicate_seconds;
  t.decompress = xr.decompress_seconds;
  double loss_sum = 0;
  for (double v : xr.values) loss_sum += v;
  m->loss = loss_sum / p_;
  if (xr.skipped()) {
    if (local_) local_->Drop();
    ++skipped_;
    ++consecutive_bad_;
    m->skipped = true;
    m->loss = NAN;
    std::string warning;
    const Status go_on = SkippedStep(o_, exchange, xr, step, consecutive_bad_, &warning);
    Message(warning);
    ADACOMP_RETURN_IF_ERROR(go_on);
    m->step_seconds = Since(step_start);
    return Status::OK();
  }
  consecutive_bad_ = 0;
  // auto: a dense step is a warm-up step for what follows (no bins, no
  // frames to count).
  const bool dense_step = warmup || (exchange.auto_dense() && xr.mode == StepMode::kDense);
  if (exchange.auto_dense()) {
    ++(dense_step ? auto_dense_steps_ : auto_codec_steps_);
    if (!xr.speed_note.empty()) {
      auto_choices_.push_back("step " + std::to_string(step + 1) + ": " + xr.speed_note);
      if (rank_ == 0) Message(auto_choices_.back());
    }
  }
  if (!exchange.all_reduce() && !dense_step) {  // frames, by either exchange
    for (size_t k = 0; k < exchange.tensors(); ++k) {
      const bool rs = !xr.reduce_scatter.empty() && xr.reduce_scatter[k];
      ++(rs ? reduce_scatter_tensor_steps_ : allgather_tensor_steps_);
    }
  }
  if (!dense_step) bins_->AfterStep(step, exchange, agg_);
  if (probe) log_.AfterExchange(exchange, grad_spans_);
  if (local_) {
    // SGD's masking: the elements this learner's frame carried a value for
    // (MaskSent leaves a codec without residue alone; a step sent dense, or
    // --no-local-mask, masks nothing).
    for (size_t k = 0; k < grad_spans_.size() && !dense_step && o_.codec.local_mask; ++k) {
      if (!plan_.local[k] || k >= exchange.compressors()) continue;
      ADACOMP_RETURN_IF_ERROR(local_->MaskSent(k, exchange.frame(k)));
    }
    local_->Commit();
  }

  Totals step_totals;
  for (size_t k = 0; k < model_.params.size(); ++k) {
    const Param& prm = model_.params[k];
    const int type = static_cast<int>(prm.type);
    const uint64_t n = static_cast<uint64_t>(prm.elements);
    step_totals.wire[type] += xr.wire_bytes[k];
    step_totals.dense[type] += n * 4 * static_cast<uint64_t>(p_);
    const uint32_t bin = bins_->sizes()[k];
    if (bin && !dense_step) {  // selected per bin: binned tensors only
      step_totals.selected[type] += xr.selected[k];
      step_totals.bins[type] += static_cast<uint64_t>(p_) * ((n + bin - 1) / bin);
    }
  }
  {
    auto t5 = Clock::now();
    GateHold hold(gate_);
    optimizer_->Apply(model_.params, agg_views_, lr);
    t.update = Since(t5);
  }

  run_totals_.Add(step_totals);
  epoch_totals_.Add(step_totals);
  epoch_loss_sum_ += m->loss;
  ++epoch_loss_count_;
  window_loss_sum_ += m->loss;
  ++window_loss_count_;
  m->bytes_sent = step_totals.WireAll();
  m->dense_bytes = step_totals.DenseAll();
  step_totals.Rates(present_, m->rate, &m->end_to_end_rate);
  step_totals.SelectedPerBin(m->selected_per_bin);
  m->compute_s = t.compute;
  m->compress_s = t.compress;
  m->communicate_s = t.communicate;
  m->decompress_s = t.decompress;
  m->update_s = t.update;
  m->step_seconds = Since(step_start);
  timing_.compute += t.compute;
  timing_.compress += t.compress;
  timing_.communicate += t.communicate;
  timing_.decompress += t.decompress;
  timing_.update += t.update;
  return Status::OK();
}

Status Learner::Evaluate(double* accuracy, double* loss) {
  const int64_t n = data_->test_count;
  const int64_t lo = n * rank_ / p_, hi = n * (rank_ + 1) / p_;
  double correct = 0, loss_sum = 0, count = 0;
  {
    GateHold hold(gate_);
    torch::NoGradGuard no_grad;
    const int64_t batch = data_->text ? 32 : 250;
    std::vector<int64_t> idx;
    for (int64_t start = lo; start < hi; start += batch) {
      int64_t len = std::min(batch, hi - start);
      idx.resize(static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i) idx[static_cast<size_t>(i)] = start + i;
      torch::Tensor x, y;
      FillBatch(*data_, false, idx.data(), len, &x, &y);
      auto logits = model_.net->Forward(x);
      loss_sum += Loss(logits, y, true).item<double>();
      correct += logits.argmax(-1).eq(y).sum().item<double>();
      count += static_cast<double>(y.numel());
    }
  }
  ByteWriter w;
  w.Put(correct);
  w.Put(loss_sum);
  w.Put(count);
  GatheredBuffers all;
  ADACOMP_RETURN_IF_ERROR(comm_.AllGatherV(w.bytes, &all));
  double c = 0, l = 0, k = 0;
  for (int r = 0; r < p_; ++r) {
    ByteReader rd(all.rank(r), "evaluation message of learner " + std::to_string(r));
    double v[3] = {};
    for (double& x : v) ADACOMP_RETURN_IF_ERROR(rd.Get(&x));
    if (!rd.AtEnd()) return Status::Corruption("evaluation message has trailing bytes");
    c += v[0];
    l += v[1];
    k += v[2];
  }
  *accuracy = k > 0 ? c / k : 0;
  *loss = k > 0 ? l / k : 0;
  return Status::OK();
}

Result<TrainSummary> Learner::Run() {
  auto run_start = Clock::now();
  ADACOMP_RETURN_IF_ERROR(Setup());
  if (rank_ == 0) {
    for (const auto& note : data_->notes) Message("note: " + note);
    int64_t params = 0;
    for (const auto& p : model_.params) params += p.elements;
    Message(StartLine(o_, params, static_cast<int64_t>(model_.params.size()), data_->description,
                      data_->train_count, data_->test_count, total_steps_, steps_per_epoch_));
  }
  if (o_.run.resume) ADACOMP_RETURN_IF_ERROR(Resume());
  if (rank_ == 0) {
    std::vector<ResidueProbe::Tensor> probed;
    for (const Param& p : model_.params) {
      probed.push_back({p.name, LayerTypeName(p.type), static_cast<size_t>(p.elements)});
    }
    ADACOMP_RETURN_IF_ERROR(log_.Open(o_, resumed_from_ > 0, std::move(probed)));
  }
  bool evaluated_at_end = false;
  bool stopped_early = false;
  const bool checkpoints = !o_.run.checkpoint_dir.empty();
  while (steps_done_ < total_steps_) {
    StepMetrics m;
    m.total_steps = total_steps_;
    const auto step_begin = Clock::now();
    Status st = DoStep(steps_done_, &m);
    if (!st.ok()) return st;
    train_seconds_ += Since(step_begin);
    ++steps_done_;
    evaluated_at_end = false;
    m.elapsed_seconds = Since(run_start);
    const bool last = steps_done_ == total_steps_;
    if (rank_ == 0) log_.Step(m, steps_done_ % o_.run.log_every == 0 || last);
    if (steps_done_ % o_.run.log_every == 0 || last) {
      if (window_loss_count_ > 0) last_window_loss_ = window_loss_sum_ / window_loss_count_;
      window_loss_sum_ = 0;
      window_loss_count_ = 0;
    }
    const bool epoch_end = steps_done_ % steps_per_epoch_ == 0;
    const bool extra_eval = o_.run.eval_every > 0 && steps_done_ % o_.run.eval_every == 0;
    if (epoch_end || extra_eval || last) {
      EpochMetrics e;
      e.epoch = (steps_done_ - 1) / steps_per_epoch_;
      e.step = steps_done_;
      e.end_of_epoch = epoch_end;
      e.train_seconds = train_seconds_;
      ADACOMP_RETURN_IF_ERROR(Evaluate(&e.test_accuracy, &e.test_loss));
      e.train_loss = epoch_loss_count_ ? epoch_loss_sum_ / epoch_loss_count_ : NAN;
      epoch_totals_.Rates(present_, e.rate, &e.end_to_end_rate);
      epochs_.push_back(e);
      if (rank_ == 0 && o_.run.on_epoch) o_.run.on_epoch(e);
      if (epoch_end) {
        epoch_totals_ = Totals();
        epoch_loss_sum_ = 0;
        epoch_loss_count_ = 0;
      }
      evaluated_at_end = true;
      if (o_.run.stop_at_accuracy > 0 && e.test_accuracy >= o_.run.stop_at_accuracy) {
        reached_step_ = steps_done_;
        if (rank_ == 0) {
          char line[160];
          std::snprintf(line, sizeof(line),
                        "reached test accuracy %.4f (target %.4f) at step %lld after %.2f s of "
                        "training: stopping",
                        e.test_accuracy, o_.run.stop_at_accuracy,
                        static_cast<long long>(steps_done_), e.train_seconds);
          Message(line);
        }
      }
    }
    if (checkpoints &&
        (epoch_end || last ||
         (o_.run.checkpoint_every > 0 && steps_done_ % o_.run.checkpoint_every == 0))) {
      ADACOMP_RETURN_IF_ERROR(SaveCheckpoint());
    }
    if (reached_step_ >= 0) break;
    if (hooks_.stop_after_steps > 0 && steps_done_ >= hooks_.stop_after_steps && !last) {
      stopped_early = true;
      break;
    }
  }

  TrainSummary s;
  if (!evaluated_at_end && !stopped_early) {
    EpochMetrics e;
    ADACOMP_RETURN_IF_ERROR(Evaluate(&e.test_accuracy, &e.test_loss));
    s.test_accuracy = e.test_accuracy;
    s.test_loss = e.test_loss;
  } else if (!epochs_.empty()) {
    s.test_accuracy = epochs_.back().test_accuracy;
    s.test_loss = epochs_.back().test_loss;
  }
  // Every learner's weights and state digests, time split and traffic.
  const std::string digest = WeightsDigest();
  LearnerReport mine{digest,           StateDigest(),       timing_.compute,
                     timing_.compress, timing_.communicate, timing_.decompress,
                     timing_.update,   transport_sent_,     transport_received_};
  ADACOMP_RETURN_IF_ERROR(
      GatherReports(comm_, mine, steps_done_ - std::max<int64_t>(resumed_from_, 0), &s));
  FillSettings(o_, &s);
  RunFacts f;
  f.data = data_->description;
  f.steps_done = steps_done_;
  f.skipped = skipped_;
  f.resumed_from = resumed_from_;
  f.steps_per_epoch = steps_per_epoch_;
  f.dense_warmup_ran = warmup_exchange_ != nullptr;
  f.dense_tensors = plan_.dense_tensors;
  for (const auto& p : model_.params) f.parameters += p.elements;
  f.tensors = static_cast<int64_t>(model_.params.size());
  f.train_examples = data_->train_count;
  f.test_examples = data_->test_count;
  f.lightened_tensor_steps = bins_->lightened();
  f.allgather_tensor_steps = allgather_tensor_steps_;
  f.auto_dense_steps = auto_dense_steps_;
  f.auto_codec_steps = auto_codec_steps_;
  f.auto_choices = auto_choices_;
  f.reduce_scatter_tensor_steps = reduce_scatter_tensor_steps_;
  f.final_train_loss = last_window_loss_;
  f.totals = run_totals_;
  std::copy(std::begin(present_), std::end(present_), std::begin(f.present));
  f.wall_seconds = Since(run_start);
  f.weights_sha256 = digest;
  f.epochs = epochs_;
  f.stopped_early = stopped_early;
  f.reached_step = reached_step_;
  FillRunSummary(f, &s);
  if (hooks_.weights_out && rank_ == 0) {
    auto bytes = WeightsBytes();
    hooks_.weights_out->resize(bytes.size() / sizeof(float));
    std::memcpy(hooks_.weights_out->data(), bytes.data(), bytes.size());
  }
  return s;
}

}  // namespace learner_internal

using learner_internal::Learner;

Result<TrainSummary> RunLearner(const TrainOptions& o, const TrainTestHooks& hooks,
                                Communicator& comm, std::shared_ptr<const Data> data, Gate* gate) {
  // One intra-op thread per learner: results do not depend on thread counts.
  at::init_num_threads();
  at::set_num_threads(1);
  try {
    Learner learner(o, hooks, comm, std::move(data), gate);
    auto result = learner.Run();
    if (!result.ok() && result.status().code() != StatusCode::kAborted) {
      comm.Abort(result.status());
    }
    return result;
  } catch (const std::exception& e) {
    Status st =
        Status::Internal(std::string("learner ") + std::to_string(comm.rank()) + ": " + e.what());
    comm.Abort(st);
    return st;
  }
}

}  // namespace adacomp::train
