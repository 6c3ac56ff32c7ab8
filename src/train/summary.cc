// The learners' end-of-run reports (see summary.h).
#include "summary.h"

#include <algorithm>
#include <span>

#include "byte_io.h"
#include "options.h"

namespace adacomp::train {

Status GatherReports(Communicator& comm, const LearnerReport& mine, int64_t steps_ran,
                     TrainSummary* s) {
  ByteWriter w;
  w.PutBytes(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(mine.weights_sha256.data()), 64));
  w.PutBytes(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(mine.state_sha256.data()), 64));
  for (double v : {mine.compute, mine.compress, mine.communicate, mine.decompress, mine.update}) {
    w.Put(v);
  }
  w.Put(mine.transport_sent);
  w.Put(mine.transport_received);
  GatheredBuffers all;
  ADACOMP_RETURN_IF_ERROR(comm.AllGatherV(w.bytes, &all));
  const int p = comm.size();
  s->replicas_identical = true;
  double mean[5] = {};
  const double per_step = steps_ran > 0 ? 1.0 / static_cast<double>(steps_ran) : 0.0;
  for (int r = 0; r < p; ++r) {
    ByteReader rd(all.rank(r), "summary message");
    std::span<const uint8_t> d1, d2;
    ADACOMP_RETURN_IF_ERROR(rd.GetBytes(&d1));
    ADACOMP_RETURN_IF_ERROR(rd.GetBytes(&d2));
    s->learner_weights_sha256.emplace_back(d1.begin(), d1.end());
    s->learner_state_sha256.emplace_back(d2.begin(), d2.end());
    if (s->learner_weights_sha256.back() != mine.weights_sha256) s->replicas_identical = false;
    double v[5] = {};
    for (double& x : v) ADACOMP_RETURN_IF_ERROR(rd.Get(&x));
    for (int k = 0; k < 5; ++k) mean[k] += v[k] / p;
    s->learner_seconds.emplace_back(v, v + 5);
    uint64_t sent = 0, received = 0;
    ADACOMP_RETURN_IF_ERROR(rd.Get(&sent));
    ADACOMP_RETURN_IF_ERROR(rd.Get(&received));
    s->transport_sent_per_step += static_cast<double>(sent) * per_step / p;
    s->transport_received_per_step += static_cast<double>(received) * per_step / p;
    s->transport_busiest_per_step = std::max(
        s->transport_busiest_per_step, static_cast<double>(std::max(sent, received)) * per_step);
  }
  double most = -1;
  for (int r = 0; r < p; ++r) {
    const auto& v = s->learner_seconds[static_cast<size_t>(r)];
    const double busy = v[0] + v[1] + v[3] + v[4];
    if (busy > most) {
      most = busy;
      s->slowest_learner = r;
    }
  }
  s->compute_seconds = mean[0];
  s->compress_seconds = mean[1];
  s->communicate_seconds = mean[2];
  s->decompress_seconds = mean[3];
  s->update_seconds = mean[4];
  return Status::OK();
}

void FillSettings(const TrainOptions& o, TrainSummary* s) {
  const bool adacomp = o.codec.config.codec == Codec::kAdaComp;
  s->model = std::string(ModelName(o.model.kind));
  s->codec = std::string(CodecName(o.codec.config.codec));
  s->values = adacomp ? std::string(ValueModeName(o.codec.config.values)) : "";
  if (o.codec.config.codec == Codec::kDense && o.codec.config.values == ValueMode::kFp16)
    s->values = "fp16";
  s->optimizer = std::string(OptimizerName(o.optim.kind));
  s->learners = o.run.learners;
  s->batch_size = o.run.batch_size;
  s->lr = o.optim.lr;
  s->seed = o.run.seed;
  s->bin_size = adacomp ? BinSizeText(o) : "n/a";
  s->bin_schedule = adacomp ? o.codec.bin_schedule.ToString() : "n/a";
  s->exchange = std::string(ExchangeKindName(o.codec.exchange));
  s->summed_values = o.codec.summed_values == ValueMode::kFp16 ? "fp16" : "fp32";
  s->dense_below = o.codec.dense_below;
  s->dense_warmup_steps = o.codec.config.codec == Codec::kDense ? 0 : o.codec.dense_warmup_steps;
  s->clip_grad_norm = o.optim.clip_grad_norm;
  s->lr_warmup_steps = o.optim.lr_warmup_steps;
  s->local_optimizer = o.codec.local_optimizer;
  s->local_mask = o.codec.local_optimizer && o.optim.kind == Optimizer::kSgd && o.codec.local_mask;
  s->auto_codec = o.codec.auto_dense;
  s->local_optimizer_types.clear();
  for (int t = 0; t < kLayerTypeCount; ++t) {
    const auto type = static_cast<LayerType>(t);
    if (LocalOptimizerFor(o, type)) s->local_optimizer_types.emplace_back(LayerTypeName(type));
  }
}

void FillRunSummary(const RunFacts& f, TrainSummary* s) {
  s->data = f.data;
  s->steps = f.steps_done;
  s->skipped_steps = f.skipped;
  s->resumed_from_step = f.resumed_from;
  s->steps_per_epoch = f.steps_per_epoch;
  s->epochs = static_cast<double>(f.steps_done) / static_cast<double>(f.steps_per_epoch);
  if (!f.dense_warmup_ran) s->dense_warmup_steps = 0;
  s->dense_tensors = f.dense_tensors;
  s->parameters = f.parameters;
  s->tensors = f.tensors;
  s->train_examples = f.train_examples;
  s->test_examples = f.test_examples;
  s->lightened_tensor_steps = f.lightened_tensor_steps;
  s->allgather_tensor_steps = f.allgather_tensor_steps;
  s->auto_dense_steps = f.auto_dense_steps;
  s->auto_codec_steps = f.auto_codec_steps;
  s->auto_choices = f.auto_choices;
  s->reduce_scatter_tensor_steps = f.reduce_scatter_tensor_steps;
  s->final_train_loss = f.final_train_loss;
  f.totals.Rates(f.present, s->rate, &s->end_to_end_rate);
  f.totals.SelectedPerBin(s->selected_per_bin);
  s->bytes_sent = f.totals.WireAll();
  s->dense_bytes = f.totals.DenseAll();
  s->wall_seconds = f.wall_seconds;
  const int64_t ran = f.steps_done - std::max<int64_t>(f.resumed_from, 0);
  s->seconds_per_step = ran > 0 ? f.wall_seconds / static_cast<double>(ran) : 0;
  s->weights_sha256 = f.weights_sha256;
  s->epoch_metrics = f.epochs;
  s->stopped_early = f.stopped_early;
  s->reached_accuracy_step = f.reached_step;
  s->reached_accuracy_seconds =
      f.reached_step >= 0 && !f.epochs.empty() ? f.epochs.back().train_seconds : -1;
}

std::string StartLine(const TrainOptions& o, int64_t parameters, int64_t tensors,
                      const std::string& data, int64_t train_examples, int64_t test_examples,
                      int64_t total_steps, int64_t steps_per_epoch) {
  return "training " + std::string(ModelName(o.model.kind)) + " (" + std::to_string(parameters) +
         " parameters in " + std::to_string(tensors) + " tensors) on " + data + " (" +
         std::to_string(train_examples) + " train / " + std::to_string(test_examples) +
         " test examples): " + std::to_string(o.run.learners) + " learners, " +
         std::string(CodecName(o.codec.config.codec)) + ", " +
         std::string(OptimizerName(o.optim.kind)) + " lr " + ShortDouble(o.optim.lr) +
         ", global batch " + std::to_string(o.run.batch_size) + ", " + std::to_string(total_steps) +
         " steps (" + std::to_string(steps_per_epoch) + " per epoch)";
}

}  // namespace adacomp::train
