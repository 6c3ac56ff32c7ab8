// The torch-free parts of adacomp/trainer.h: names, defaults, JSON output.
#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>

#include "../core/names.h"
#include "adacomp/trainer.h"

namespace adacomp {
namespace {

using nlohmann::json;

json Opt(const std::optional<double>& v) {
  if (!v || !std::isfinite(*v)) return nullptr;
  return *v;
}

json Rates(const std::optional<double> (&rate)[kLayerTypeCount], double end_to_end) {
  json r = json::object();
  for (int t = 0; t < kLayerTypeCount; ++t)
    r[LayerTypeName(static_cast<LayerType>(t))] = Opt(rate[t]);
  r["end_to_end"] = std::isfinite(end_to_end) ? json(end_to_end) : json(nullptr);
  return r;
}

json PerType(const std::optional<double> (&v)[kLayerTypeCount]) {
  json r = json::object();
  for (int t = 0; t < kLayerTypeCount; ++t) r[LayerTypeName(static_cast<LayerType>(t))] = Opt(v[t]);
  return r;
}

}  // namespace

namespace {

constexpr std::array<std::string_view, 4> kModelNames = {"mnist-cnn", "cifar-cnn", "fc-dnn",
                                                         "char-lstm"};
constexpr std::array<std::string_view, 2> kOptimizerNames = {"sgd", "adam"};

}  // namespace

std::string_view ModelName(Model model) { return names::Of(model, kModelNames, "?"); }

Result<Model> ParseModel(std::string_view name) {
  return names::Parse<Model>(name, kModelNames, "--model ",
                             " is unknown (expected mnist-cnn, cifar-cnn, fc-dnn or char-lstm)");
}

std::vector<std::string> ModelNames() { return {kModelNames.begin(), kModelNames.end()}; }

std::string_view OptimizerName(Optimizer optimizer) {
  return names::Of(optimizer, kOptimizerNames, "?");
}

Result<Optimizer> ParseOptimizer(std::string_view name) {
  return names::Parse<Optimizer>(name, kOptimizerNames, "--optimizer ",
                                 " is unknown (expected sgd or adam)");
}

std::string StepMetrics::ToJson() const {
  json j;
  j["step"] = step;
  j["epoch"] = epoch;
  j["loss"] = std::isfinite(loss) ? json(loss) : json(nullptr);
  j["lr"] = lr;
  j["grad_norm"] = std::isfinite(grad_norm) ? json(grad_norm) : json(nullptr);
  j["skipped"] = skipped;
  j["bytes_sent"] = bytes_sent;
  j["dense_bytes"] = dense_bytes;
  j["transport_sent_bytes"] = transport_sent_bytes;
  j["transport_received_bytes"] = transport_received_bytes;
  j["compression_rate"] = Rates(rate, end_to_end_rate);
  j["selected_per_bin"] = PerType(selected_per_bin);
  j["time"] = {{"compute", compute_s},         {"compress", compress_s},
               {"communicate", communicate_s}, {"decompress", decompress_s},
               {"update", update_s},           {"step", step_seconds}};
  j["elapsed_seconds"] = elapsed_seconds;
  if (link_rx_bytes >= 0) {
    j["link_rx_bytes"] = link_rx_bytes;
    j["link_tx_bytes"] = link_tx_bytes;
  }
  return j.dump();
}

std::string TrainSummary::ToJson() const {
  json j;
  j["model"] = model;
  j["data"] = data;
  j["codec"] = codec;
  j["values"] = values;
  j["optimizer"] = optimizer;
  j["learners"] = learners;
  j["batch_size"] = batch_size;
  j["steps"] = steps;
  j["skipped_steps"] = skipped_steps;
  j["resumed_from_step"] = resumed_from_step >= 0 ? json(resumed_from_step) : json(nullptr);
  j["epochs"] = epochs;
  j["steps_per_epoch"] = steps_per_epoch;
  j["lr"] = lr;
  j["seed"] = seed;
  j["bin_size"] = bin_size;
  j["bin_schedule"] = bin_schedule;
  j["exchange"] = exchange;
  j["summed_values"] = summed_values;
  j["lightened_tensor_steps"] = lightened_tensor_steps;
  j["exchange_tensor_steps"] = {{"allgather", allgather_tensor_steps},
                                {"reduce-scatter", reduce_scatter_tensor_steps}};
  j["auto"] = auto_codec ? json{{"dense_steps", auto_dense_steps},
                                {"codec_steps", auto_codec_steps},
                                {"choices", auto_choices}}
                         : json(nullptr);
  j["slowest_learner"] = slowest_learner;
  j["learner_seconds"] = json::array();
  for (const auto& v : learner_seconds) {
    j["learner_seconds"].push_back({{"compute", v[0]},
                                    {"compress", v[1]},
                                    {"communicate", v[2]},
                                    {"decompress", v[3]},
                                    {"update", v[4]}});
  }
  j["dense_below"] = dense_below;
  j["dense_warmup_steps"] = dense_warmup_steps;
  j["clip_grad_norm"] = clip_grad_norm > 0 ? json(clip_grad_norm) : json(nullptr);
  j["lr_warmup_steps"] = lr_warmup_steps;
  j["local_optimizer"] = local_optimizer;
  j["local_mask"] = local_mask;
  j["local_optimizer_types"] = local_optimizer_types;
  j["dense_tensors"] = dense_tensors;
  j["parameters"] = parameters;
  j["tensors"] = tensors;
  j["train_examples"] = train_examples;
  j["test_examples"] = test_examples;
  j["test_accuracy"] = test_accuracy;
  if (model == "char-lstm") {
    j["test_loss_per_char"] = test_loss;
  } else {
    j["test_loss"] = test_loss;
  }
  j["final_train_loss"] = std::isfinite(final_train_loss) ? json(final_train_loss) : json(nullptr);
  j["compression_rate"] = Rates(rate, end_to_end_rate);
  j["bytes_sent"] = bytes_sent;
  j["dense_bytes"] = dense_bytes;
  // Per step per learner: what the communicators moved, beside the frames.
  const double frame_steps = static_cast<double>(steps - skipped_steps) * std::max(1, learners);
  j["wire_bytes_per_step_per_learner"] = {
      {"sent", transport_sent_per_step},
      {"received", transport_received_per_step},
      {"busiest_learner", transport_busiest_per_step},
      {"frames", frame_steps > 0 ? static_cast<double>(bytes_sent) / frame_steps : 0.0}};
  j["selected_per_bin"] = PerType(selected_per_bin);
  j["wall_seconds"] = wall_seconds;
  j["seconds_per_step"] = seconds_per_step;
  j["compute_seconds"] = compute_seconds;
  j["compress_seconds"] = compress_seconds;
  j["communicate_seconds"] = communicate_seconds;
  j["decompress_seconds"] = decompress_seconds;
  j["update_seconds"] = update_seconds;
  j["weights_sha256"] = weights_sha256;
  j["learner_weights_sha256"] = learner_weights_sha256;
  j["replicas_identical"] = replicas_identical;
  j["stopped_early"] = stopped_early;
  if (reached_accuracy_step >= 0) {
    j["reached_accuracy"] = {{"step", reached_accuracy_step},
                             {"train_seconds", reached_accuracy_seconds}};
  } else {
    j["reached_accuracy"] = nullptr;
  }
  json epochs_json = json::array();
  for (const auto& e : epoch_metrics) {
    json ej;
    ej["epoch"] = e.epoch;
    ej["step"] = e.step;
    ej["test_accuracy"] = e.test_accuracy;
    ej["test_loss"] = e.test_loss;
    ej["train_loss"] = std::isfinite(e.train_loss) ? json(e.train_loss) : json(nullptr);
    ej["train_seconds"] = e.train_seconds;
    ej["compression_rate"] = Rates(e.rate, e.end_to_end_rate);
    epochs_json.push_back(ej);
  }
  j["epoch_metrics"] = epochs_json;
  return j.dump(2);
}

}  // namespace adacomp
