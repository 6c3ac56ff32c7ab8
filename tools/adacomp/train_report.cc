// The end-of-run report of `adacomp train` (see train_report.h).
#include "train_report.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace adacomp::tool {

std::string Fmt(double v, const char* f) {
  char b[64];
  std::snprintf(b, sizeof(b), f, v);
  return b;
}

// "1.23 MB" (decimal units), "850 B".
std::string Bytes(double b) {
  if (b >= 1e9) return Fmt(b / 1e9, "%.3g GB");
  if (b >= 1e6) return Fmt(b / 1e6, "%.3g MB");
  if (b >= 1e3) return Fmt(b / 1e3, "%.3g kB");
  return Fmt(b, "%.0f B");
}

std::string RateText(const std::optional<double>& r) {
  return r ? Fmt(*r, "%.1fx") : std::string("n/a");
}

std::string Duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  long t = static_cast<long>(s + 0.5);
  char b[32];
  if (t >= 3600) {
    std::snprintf(b, sizeof(b), "%ldh%02ldm", t / 3600, (t / 60) % 60);
  } else if (t >= 60) {
    std::snprintf(b, sizeof(b), "%ldm%02lds", t / 60, t % 60);
  } else {
    std::snprintf(b, sizeof(b), "%lds", t);
  }
  return b;
}

std::string RatesLine(const std::optional<double> (&rate)[kLayerTypeCount], double e2e) {
  std::string s;
  for (int t = 0; t < kLayerTypeCount; ++t) {
    if (!rate[t]) continue;
    s += std::string(LayerTypeName(static_cast<LayerType>(t))) + " " + RateText(rate[t]) + ", ";
  }
  return s + "end-to-end " + Fmt(e2e, "%.1fx");
}

// "R:STEP" -> (R, STEP), both >= 0; false when malformed.

void PrintTrainSummary(const TrainSummary& s) {
  const bool lstm = s.model == "char-lstm";
  std::printf("\n== adacomp train summary ==\n");
  std::printf("  model            %s (%lld parameters, %lld tensors)\n", s.model.c_str(),
              static_cast<long long>(s.parameters), static_cast<long long>(s.tensors));
  std::printf("  data             %s (%lld train, %lld test)\n", s.data.c_str(),
              static_cast<long long>(s.train_examples), static_cast<long long>(s.test_examples));
  std::printf("  codec            %s%s%s\n", s.codec.c_str(),
              s.values.empty() ? "" : (" (" + s.values + ")").c_str(),
              s.codec == "adacomp" ? ("; bin size " + s.bin_size).c_str() : "");
  if (s.auto_codec) {
    std::printf("  auto             %lld steps dense, %lld by the codec%s%s\n",
                static_cast<long long>(s.auto_dense_steps),
                static_cast<long long>(s.auto_codec_steps),
                s.auto_choices.empty() ? "" : "; last: ",
                s.auto_choices.empty() ? "" : s.auto_choices.back().c_str());
  }
  if (s.codec == "adacomp" && s.bin_schedule != "fixed") {
    std::printf("  bin schedule     %s (%lld tensor-steps lightened)\n", s.bin_schedule.c_str(),
                static_cast<long long>(s.lightened_tensor_steps));
  }
  if (s.exchange != "allgather") {
    std::printf("  exchange         %s%s (tensor-steps: %lld all-gather, %lld reduce-scatter)\n",
                s.exchange.c_str(), s.summed_values == "fp16" ? ", float16 sums" : "",
                static_cast<long long>(s.allgather_tensor_steps),
                static_cast<long long>(s.reduce_scatter_tensor_steps));
  }
  if (s.dense_tensors > 0 || s.dense_warmup_steps > 0) {
    std::printf("  sent dense       %lld tensors of at most %lld elements%s\n",
                static_cast<long long>(s.dense_tensors), static_cast<long long>(s.dense_below),
                s.dense_warmup_steps > 0
                    ? ("; every tensor in the first " + std::to_string(s.dense_warmup_steps) +
                       " steps (warm-up)")
                          .c_str()
                    : "");
  }
  std::printf("  learners         %d, global batch %lld (%lld per learner)\n", s.learners,
              static_cast<long long>(s.batch_size),
              static_cast<long long>(s.batch_size / std::max(1, s.learners)));
  std::printf(
      "  optimizer        %s, lr %s%s\n", s.optimizer.c_str(), Fmt(s.lr).c_str(),
      s.lr_warmup_steps > 0
          ? (", warmed up linearly over " + std::to_string(s.lr_warmup_steps) + " steps").c_str()
          : "");
  if (s.clip_grad_norm > 0) {
    std::printf("  gradient clip    each learner's L2 norm at most %s\n",
                Fmt(s.clip_grad_norm).c_str());
  }
  if (s.local_optimizer) {
    std::string types;
    if (s.local_optimizer_types.size() < static_cast<size_t>(kLayerTypeCount)) {
      for (const auto& t : s.local_optimizer_types) types += (types.empty() ? "" : ", ") + t;
      types = " (" + types + " tensors; the others: the paper's optimizer)";
    }
    std::printf("  local optimizer  each learner's own %s is compressed%s\n",
                s.optimizer == "adam" ? "Adam step"
                : s.local_mask        ? "velocity (momentum correction)"
                                      : "velocity (unmasked)",
                types.c_str());
  }
  std::printf("  steps            %lld (%.2f epochs), %lld skipped%s%s\n",
              static_cast<long long>(s.steps), s.epochs, static_cast<long long>(s.skipped_steps),
              s.resumed_from_step >= 0
                  ? (", resumed at step " + std::to_string(s.resumed_from_step)).c_str()
                  : "",
              s.stopped_early ? ", stopped early (--stop-after-steps)" : "");
  std::printf("  test accuracy    %.4f\n", s.test_accuracy);
  if (s.reached_accuracy_step >= 0) {
    std::printf("  target reached   at step %lld, after %.2f s of training steps\n",
                static_cast<long long>(s.reached_accuracy_step), s.reached_accuracy_seconds);
  }
  std::printf("  %s %.4f\n", lstm ? "test loss/char  " : "test loss       ", s.test_loss);
  std::printf("  compression      conv %s | fc %s | lstm %s | other %s | end-to-end %s\n",
              RateText(s.rate[0]).c_str(), RateText(s.rate[1]).c_str(), RateText(s.rate[2]).c_str(),
              RateText(s.rate[3]).c_str(), Fmt(s.end_to_end_rate, "%.1fx").c_str());
  std::printf("  bytes sent       %llu (dense would be %llu)\n",
              static_cast<unsigned long long>(s.bytes_sent),
              static_cast<unsigned long long>(s.dense_bytes));
  // What one learner's communicator moved per step (ring all-reduce: 2 (P-1)/P
  // of the gradient each way; all-gather: the other learners' frames in),
  // beside one learner's frames.
  const double frame_steps =
      static_cast<double>(s.steps - s.skipped_steps) * std::max(1, s.learners);
  std::printf(
      "  on the wire      %s sent, %s received per step per learner (frames %s; "
      "busiest learner %s)\n",
      Bytes(s.transport_sent_per_step).c_str(), Bytes(s.transport_received_per_step).c_str(),
      Bytes(frame_steps > 0 ? static_cast<double>(s.bytes_sent) / frame_steps : 0).c_str(),
      Bytes(s.transport_busiest_per_step).c_str());
  std::printf("  wall time        %.1f s (%.4f s/step)\n", s.wall_seconds, s.seconds_per_step);
  if (s.learners > 1 && s.learner_seconds.size() == static_cast<size_t>(s.learners)) {
    // Who waits for whom: the learner with the most busy time, against the
    // least busy one; the others spend the difference in communicate.
    double least = 1e300, most = 0;
    int fastest = 0;
    for (int r = 0; r < s.learners; ++r) {
      const auto& v = s.learner_seconds[static_cast<size_t>(r)];
      const double busy = v[0] + v[1] + v[3] + v[4];
      most = std::max(most, busy);
      if (busy < least) {
        least = busy;
        fastest = r;
      }
    }
    const auto& slow = s.learner_seconds[static_cast<size_t>(s.slowest_learner)];
    std::printf(
        "  slowest learner  rank %d: busy %.1f s, communicate %.2f s (least busy: rank %d, "
        "%.1f s busy, communicate %.2f s)\n",
        s.slowest_learner, most, slow[2], fastest, least,
        s.learner_seconds[static_cast<size_t>(fastest)][2]);
  }
  std::printf(
      "  per learner      compute %.1f s, compress %.2f s, communicate %.2f s, "
      "decompress %.2f s, update %.2f s\n",
      s.compute_seconds, s.compress_seconds, s.communicate_seconds, s.decompress_seconds,
      s.update_seconds);
  // The share of a learner's own work (waiting for the others left out):
  // with more learners than cores, wall time would flatter it.
  const double busy =
      s.compute_seconds + s.compress_seconds + s.decompress_seconds + s.update_seconds;
  if (busy > 0) {
    std::printf("  codec share      compress + decompress = %.1f %% of a learner's busy time\n",
                100.0 * (s.compress_seconds + s.decompress_seconds) / busy);
  }
  std::printf("  weights sha256   %s\n", s.weights_sha256.c_str());
  std::printf("  replicas         %s (%d learners)\n",
              s.replicas_identical ? "bit-identical" : "DIFFER", s.learners);
}

}  // namespace adacomp::tool
