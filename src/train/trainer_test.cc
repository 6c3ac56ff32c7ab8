// Tests of the trainer through its public API (adacomp/trainer.h) on tiny
// synthetic data sets written by the tests: replicas, determinism, exchanges,
// resume, NaN policy, checkpoint corruption, averaging, metrics and learning.
// The options beside the paper's default: trainer_options_test.cc.
#include "adacomp/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "checkpoint.h"
#include "options.h"
#include "test_files.h"
#include "test_hooks.h"
#include "trainer_test_fixture.h"

namespace adacomp {
namespace {

TEST_F(TrainerTest, ReplicasStayBitIdenticalWithEveryCompressor) {
  for (const char* codec : {"adacomp", "topk", "threshold", "onebit", "terngrad", "dense"}) {
    TrainOptions o = Base();
    o.codec.config.codec = *ParseCodec(codec);
    o.codec.config.tau = 1e-3f;
    o.run.steps = codec == std::string("adacomp") ? 10 : 4;
    TrainSummary s = Run(o);
    ASSERT_EQ(s.learner_weights_sha256.size(), 4u) << codec;
    for (const auto& d : s.learner_weights_sha256) {
      EXPECT_EQ(d, s.weights_sha256) << codec;
    }
    EXPECT_TRUE(s.replicas_identical) << codec;
    EXPECT_EQ(s.steps, o.run.steps);
    // Residues differ between learners (their shards differ), weights do not.
    if (codec == std::string("adacomp")) {
      EXPECT_NE(s.learner_state_sha256[0], s.learner_state_sha256[1]);
    }
  }
}

TEST_F(TrainerTest, SameSeedSameDigestWhateverTheThreads) {
  TrainOptions o = Base();
  o.run.threads = 1;
  TrainSummary a = Run(o);
  o.run.threads = 4;
  TrainSummary b = Run(o);
  o.run.threads = 2;
  TrainSummary c = Run(o);
  EXPECT_EQ(a.weights_sha256.size(), 64u);
  EXPECT_EQ(a.weights_sha256, b.weights_sha256);
  EXPECT_EQ(a.weights_sha256, c.weights_sha256);
  EXPECT_EQ(a.learner_state_sha256, b.learner_state_sha256);
  o.run.seed = 8;
  TrainSummary d = Run(o);
  EXPECT_NE(a.weights_sha256, d.weights_sha256);
}

TEST_F(TrainerTest, ReduceScatterExchangeTrainsTheSameWeightsAsTheAllGather) {
  for (Codec codec : {Codec::kAdaComp, Codec::kTopK}) {
    TrainOptions o = Base();
    o.codec.config.codec = codec;
    const TrainSummary ag = Run(o);
    o.codec.exchange = ExchangeKind::kReduceScatter;
    const TrainSummary rs = Run(o);
    EXPECT_EQ(ag.exchange, "allgather");
    EXPECT_EQ(rs.exchange, "reduce-scatter");
    EXPECT_EQ(rs.weights_sha256, ag.weights_sha256) << CodecName(codec);
    EXPECT_EQ(rs.learner_state_sha256, ag.learner_state_sha256) << CodecName(codec);
    EXPECT_TRUE(rs.replicas_identical);
    EXPECT_EQ(rs.test_accuracy, ag.test_accuracy);
    const int64_t tensor_steps = ag.steps * ag.tensors;
    EXPECT_EQ(ag.allgather_tensor_steps, tensor_steps);
    EXPECT_EQ(rs.reduce_scatter_tensor_steps, tensor_steps);
  }
}

TEST_F(TrainerTest, Float16SumsKeepTheReplicasIdenticalAndChangeTheFingerprint) {
  TrainOptions o = Base();
  o.codec.exchange = ExchangeKind::kReduceScatter;
  const TrainSummary exact = Run(o);
  o.codec.summed_values = ValueMode::kFp16;
  const TrainSummary half = Run(o);
  EXPECT_EQ(half.summed_values, "fp16");
  EXPECT_TRUE(half.replicas_identical);
  EXPECT_NE(half.weights_sha256, exact.weights_sha256) << "binary16 sums are other bits";
  EXPECT_NEAR(half.test_accuracy, exact.test_accuracy, 0.05);
  EXPECT_NE(train::Fingerprint(o, "d"), train::Fingerprint(Base(), "d"));
  o.codec.exchange = ExchangeKind::kAllGather;  // no reduce-scatter: the sums never travel
  EXPECT_EQ(train::Fingerprint(o, "d"), train::Fingerprint(Base(), "d"));
}

TEST_F(TrainerTest, AutoExchangeTrainsTheSameWeightsAndSaysWhichWayEachTensorWent) {
  TrainOptions o = Base();
  o.codec.dense_below = 1000;  // the biases as dense frames: by slices from step 2 on
  const TrainSummary ag = Run(o);
  o.codec.exchange = ExchangeKind::kAuto;
  const TrainSummary au = Run(o);
  EXPECT_EQ(au.exchange, "auto");
  EXPECT_EQ(au.weights_sha256, ag.weights_sha256);
  EXPECT_EQ(au.learner_state_sha256, ag.learner_state_sha256);
  EXPECT_EQ(au.allgather_tensor_steps + au.reduce_scatter_tensor_steps, au.steps * au.tensors);
  EXPECT_GT(au.reduce_scatter_tensor_steps, 0) << "dense frames at P = " << o.run.learners;
  EXPECT_GT(au.allgather_tensor_steps, au.tensors) << "the sparse frames stay on the all-gather";
}

TEST_F(TrainerTest, ResumeEqualsUninterrupted) {
  struct Setting {
    const char* codec;
    const char* optimizer;
  };
  // terngrad + adam also covers the compressors' random generators and Adam's moments.
  for (Setting set : {Setting{"adacomp", "sgd"}, Setting{"terngrad", "adam"}}) {
    TrainOptions o = Base();
    o.codec.config.codec = *ParseCodec(set.codec);
    o.optim.kind = *ParseOptimizer(set.optimizer);
    o.run.steps = 12;
    TrainSummary full = Run(o);

    TempDir ckpt("ckpt");
    TrainOptions first = o;
    first.run.checkpoint_dir = ckpt.Path();
    first.run.checkpoint_every = 5;
    TrainTestHooks stop;
    stop.stop_after_steps = 7;  // "killed" after step 7: the last checkpoint is step 5
    TrainSummary part = Run(first, stop);
    EXPECT_TRUE(part.stopped_early);
    EXPECT_EQ(part.steps, 7);
    EXPECT_NE(part.weights_sha256, full.weights_sha256);

    TrainOptions second = o;
    second.run.checkpoint_dir = ckpt.Path();
    second.run.resume = true;
    TrainSummary resumed = Run(second);
    EXPECT_EQ(resumed.resumed_from_step, 5) << set.codec;
    EXPECT_EQ(resumed.steps, 12);
    EXPECT_EQ(resumed.weights_sha256, full.weights_sha256) << set.codec;
    EXPECT_EQ(resumed.learner_state_sha256, full.learner_state_sha256) << set.codec;
    EXPECT_TRUE(resumed.replicas_identical);
    EXPECT_EQ(resumed.bytes_sent, full.bytes_sent);
  }
}

TEST_F(TrainerTest, CorruptedCheckpointIsDetectedAndThePreviousOneUsed) {
  TrainOptions o = Base();
  o.run.steps = 12;
  TrainSummary full = Run(o);
  for (int damage = 0; damage < 2; ++damage) {
    TempDir ckpt("ckpt");
    TrainOptions first = o;
    first.run.steps = 10;
    first.run.checkpoint_dir = ckpt.Path();
    first.run.checkpoint_every = 5;
    Run(first);  // checkpoints at steps 5 and 10
    auto list = train::ListCheckpoints(ckpt.Path());
    ASSERT_EQ(list.size(), 2u);
    ASSERT_EQ(list[0].first, 10);
    std::string newest = list[0].second;
    if (damage == 0) {  // flip a byte in the middle
      std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(std::filesystem::file_size(newest) / 2));
      char c = 0;
      f.read(&c, 1);
      c = static_cast<char>(c ^ 0x10);
      f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(newest) / 2));
      f.write(&c, 1);
    } else {  // truncate
      std::filesystem::resize_file(newest, std::filesystem::file_size(newest) - 100);
    }
    messages_.clear();
    TrainOptions second = o;
    second.run.checkpoint_dir = ckpt.Path();
    second.run.resume = true;
    TrainSummary resumed = Run(second);
    EXPECT_EQ(resumed.resumed_from_step, 5);
    EXPECT_EQ(resumed.weights_sha256, full.weights_sha256);
    EXPECT_NE(messages_.find(newest), std::string::npos) << messages_;
    EXPECT_NE(messages_.find(damage == 0 ? "checksum mismatch" : "truncated"), std::string::npos)
        << messages_;
    EXPECT_NE(messages_.find("previous checkpoint"), std::string::npos) << messages_;
  }
}

TEST_F(TrainerTest, NoUsableCheckpointIsAnError) {
  TempDir ckpt("ckpt");
  TrainOptions o = Base();
  o.run.steps = 4;
  o.run.checkpoint_dir = ckpt.Path();
  o.run.checkpoint_every = 2;
  Run(o);
  for (const auto& [step, path] : train::ListCheckpoints(ckpt.Path())) {
    std::filesystem::resize_file(path, 10);
  }
  o.run.resume = true;
  auto r = Train(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("no usable checkpoint"), std::string::npos);
  // Different settings are refused rather than silently mixed.
  TempDir other("ckpt");
  o.run.resume = false;
  o.run.checkpoint_dir = other.Path();
  Run(o);
  o.run.resume = true;
  o.run.batch_size = 64;
  r = Train(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("different settings"), std::string::npos);
}

TEST_F(TrainerTest, NonFiniteGradientSkipsTheStepEverywhere) {
  // A NaN in learner 2's gradient of tensor 1 at the last step (index 3):
  // nothing may change, so the run equals a 3-step run, residues included.
  TrainOptions o = Base();
  o.run.steps = 4;
  TrainTestHooks nan;
  nan.inject_nan.push_back({3, 2, 1});
  messages_.clear();
  TrainSummary skipped = Run(o, nan);
  EXPECT_EQ(skipped.skipped_steps, 1);
  EXPECT_NE(messages_.find("step 4"), std::string::npos) << messages_;
  EXPECT_NE(messages_.find("learner 2"), std::string::npos) << messages_;
  EXPECT_NE(messages_.find("conv1.bias"), std::string::npos) << messages_;
  TrainOptions ref = Base();
  ref.run.steps = 3;
  TrainSummary three = Run(ref);
  EXPECT_EQ(skipped.weights_sha256, three.weights_sha256);
  EXPECT_EQ(skipped.learner_state_sha256, three.learner_state_sha256);
  EXPECT_EQ(skipped.bytes_sent, three.bytes_sent);
  ref.run.steps = 4;
  EXPECT_NE(Run(ref).weights_sha256, three.weights_sha256);

  // A skip in the middle: training goes on, replicas stay identical.
  o.run.steps = 6;
  nan.inject_nan = {{2, 0, 5}};
  TrainSummary mid = Run(o, nan);
  EXPECT_EQ(mid.skipped_steps, 1);
  EXPECT_TRUE(mid.replicas_identical);
}

TEST_F(TrainerTest, TooManyConsecutiveBadStepsStopTheRun) {
  TrainOptions o = Base();
  o.run.steps = 8;
  o.run.max_bad_steps = 3;
  TrainTestHooks nan;
  nan.inject_nan = {{1, 0, 0}, {2, 3, 2}, {3, 1, 4}};
  auto r = Train(o, nan);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("3 consecutive"), std::string::npos) << r.status().ToString();
  // Two bad steps separated by a good one do not accumulate.
  nan.inject_nan = {{1, 0, 0}, {2, 3, 2}, {4, 1, 4}};
  auto ok = Train(o, nan);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->skipped_steps, 3);
}

TEST_F(TrainerTest, DenseWithPLearnersMatchesOneLearnerOnTheSameGlobalBatch) {
  TrainOptions o = Base();
  o.codec.config.codec = Codec::kDense;
  o.run.steps = 5;
  RunResult four = RunWithWeights(o);
  o.run.learners = 1;
  RunResult one = RunWithWeights(o);
  ASSERT_EQ(four.weights.size(), one.weights.size());
  ASSERT_FALSE(one.weights.empty());
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < one.weights.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(four.weights[i]) - one.weights[i]));
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(one.weights[i])));
  }
  EXPECT_LT(max_diff, 1e-5 * std::max(1.0, max_abs)) << max_diff;
  // Dense sends every element as float32: rate exactly 1.
  EXPECT_DOUBLE_EQ(four.end_to_end_rate, 1.0);
  // A different P with AdaComp is a different algorithm: the weights differ.
  o.run.learners = 4;
  o.codec.config.codec = Codec::kAdaComp;
  TrainSummary ada = Run(o);
  EXPECT_NE(ada.weights_sha256, four.weights_sha256);
}

// The dense baselines: float32 and binary16 ring all-reduces. fp16 replicas
// are bit-identical, its weights close to float32's, and the wire figures
// are the ring's 2 (P-1)/P of the gradient each way (4 or 2 bytes a value),
// plus the step's agreement and headers; per step they add up to the summary.
TEST_F(TrainerTest, DenseFp16IsAHalfByteRingAndTheWireBytesAreReported) {
  TrainOptions o = Base();
  o.codec.config.codec = Codec::kDense;
  o.run.steps = 4;
  RunResult f32 = RunWithWeights(o);
  o.codec.config.values = ValueMode::kFp16;
  std::vector<StepMetrics> steps;
  o.run.on_step = [&](const StepMetrics& m) { steps.push_back(m); };
  RunResult f16 = RunWithWeights(o);
  EXPECT_TRUE(f16.replicas_identical);
  EXPECT_EQ(f16.values, "fp16");
  EXPECT_NE(f16.weights_sha256, f32.weights_sha256);
  ASSERT_EQ(f16.weights.size(), f32.weights.size());
  double max_diff = 0;
  for (size_t i = 0; i < f32.weights.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(f16.weights[i]) - f32.weights[i]));
  }
  EXPECT_LT(max_diff, 1e-2);
  EXPECT_EQ(f16.bytes_sent * 2, f32.bytes_sent);
  EXPECT_DOUBLE_EQ(f16.end_to_end_rate, 2.0);
  const double n = static_cast<double>(f32.parameters);
  const double p = 4;
  for (const TrainSummary* s : {&f32, &f16}) {
    const double ring = 2 * (p - 1) / p * n * (s == &f32 ? 4 : 2);
    EXPECT_GE(s->transport_sent_per_step, ring);
    EXPECT_LT(s->transport_sent_per_step, ring + 1000);
    EXPECT_GE(s->transport_received_per_step, ring);
    EXPECT_LT(s->transport_busiest_per_step, ring + 1000);
    auto j = nlohmann::json::parse(s->ToJson());
    EXPECT_DOUBLE_EQ(j["wire_bytes_per_step_per_learner"]["sent"].get<double>(),
                     s->transport_sent_per_step);
    EXPECT_DOUBLE_EQ(j["wire_bytes_per_step_per_learner"]["frames"].get<double>(),
                     n * (s == &f32 ? 4 : 2));
  }
  ASSERT_EQ(steps.size(), 4u);
  for (const auto& m : steps) {
    EXPECT_GE(static_cast<double>(m.transport_sent_bytes), 2 * (p - 1) / p * n * 2);
    EXPECT_EQ(m.transport_sent_bytes, steps[0].transport_sent_bytes);  // rank 0, same sizes
  }
  // Dense fp16 beside another codec cannot be asked for through the
  // trainer (one codec for every tensor), and AdaComp's frames are far
  // smaller on the wire than the ring.
  o.codec.config.codec = Codec::kAdaComp;
  o.codec.config.values = ValueMode::kTernary;
  o.run.on_step = nullptr;
  TrainSummary ada = Run(o);
  EXPECT_GT(ada.transport_received_per_step, 0);
  EXPECT_LT(ada.transport_received_per_step, f16.transport_received_per_step / 10);
}

TEST_F(TrainerTest, LossDecreasesAndMetricsAreConsistent) {
  TrainOptions o = Base();
  o.run.steps = 30;
  o.run.log_every = 1;
  std::vector<StepMetrics> steps;
  o.run.on_step = [&](const StepMetrics& m) { steps.push_back(m); };
  TempDir out("metrics");
  o.run.metrics_out = out.Path("m.jsonl");
  TrainSummary s = Run(o);
  ASSERT_EQ(steps.size(), 30u);
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) {
    first += steps[static_cast<size_t>(i)].loss / 5;
    last += steps[static_cast<size_t>(25 + i)].loss / 5;
  }
  EXPECT_LT(last, 0.7 * first) << "first " << first << " last " << last;
  EXPECT_GT(s.test_accuracy, 0.3);
  // Per-step bytes add up to the summary; the rate is dense bytes over bytes sent.
  uint64_t bytes = 0;
  for (const auto& m : steps) bytes += m.bytes_sent;
  EXPECT_EQ(bytes, s.bytes_sent);
  EXPECT_EQ(s.dense_bytes, 30u * 4 * 4 * static_cast<uint64_t>(s.parameters));
  EXPECT_NEAR(s.end_to_end_rate, static_cast<double>(s.dense_bytes) / s.bytes_sent, 1e-9);
  ASSERT_TRUE(s.rate[0] && s.rate[1] && s.rate[3]);
  EXPECT_FALSE(s.rate[2]);  // no LSTM layer
  EXPECT_GT(*s.rate[0], 1.0);
  EXPECT_GT(*s.rate[1], *s.rate[0]);  // L_T 500 vs 50
  ASSERT_TRUE(s.selected_per_bin[0]);
  EXPECT_GE(*s.selected_per_bin[0], 1.0);
  // The JSONL file has one object per step with the documented fields.
  const std::vector<nlohmann::json> rows = ReadJsonLines(o.run.metrics_out);
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& j = rows[i];
    EXPECT_EQ(j["step"].get<size_t>(), i + 1);
    for (const char* k : {"loss", "lr", "bytes_sent", "epoch"}) EXPECT_TRUE(j.contains(k)) << k;
    EXPECT_TRUE(j["compression_rate"]["lstm"].is_null());
    EXPECT_TRUE(j["compression_rate"]["conv"].is_number());
    EXPECT_TRUE(j["time"]["compress"].is_number());
  }
  EXPECT_EQ(rows.size(), 30u);
  // The summary JSON.
  auto j = nlohmann::json::parse(s.ToJson());
  EXPECT_GE(j["test_accuracy"].get<double>(), 0.0);
  EXPECT_LE(j["test_accuracy"].get<double>(), 1.0);
  for (const char* k : {"conv", "fc", "lstm", "other", "end_to_end"}) {
    EXPECT_TRUE(j["compression_rate"].contains(k)) << k;
  }
  EXPECT_TRUE(j["compression_rate"]["lstm"].is_null());
  for (const char* k : {"wall_seconds", "compress_seconds", "weights_sha256", "model", "codec",
                        "learners", "steps"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
}

// eval_every adds evaluations between epoch ends, each stamped with the
// training time so far (the clock of time-to-accuracy): the steps' own time,
// without the evaluations.
TEST_F(TrainerTest, EvaluationsCarryTheTrainingTimeSoFar) {
  TrainOptions o = Base();
  o.run.steps = 6;
  o.run.eval_every = 2;
  o.run.log_every = 1;
  std::vector<StepMetrics> steps;
  o.run.on_step = [&](const StepMetrics& m) { steps.push_back(m); };
  TrainSummary s = Run(o);
  ASSERT_EQ(steps.size(), 6u);
  ASSERT_EQ(s.epoch_metrics.size(), 3u);  // steps 2, 4, 6 (an epoch is 10 steps)
  double stepped = 0;
  size_t next = 0;
  double previous = 0;
  for (const EpochMetrics& e : s.epoch_metrics) {
    EXPECT_FALSE(e.end_of_epoch);
    while (next < static_cast<size_t>(e.step)) stepped += steps[next++].step_seconds;
    EXPECT_GT(e.train_seconds, previous) << "step " << e.step;
    // DoStep timed from outside: at least the steps' own time, and not the
    // evaluations (elapsed_seconds, since the start, includes them).
    EXPECT_GE(e.train_seconds, 0.999 * stepped) << "step " << e.step;
    EXPECT_LT(e.train_seconds, steps[static_cast<size_t>(e.step) - 1].elapsed_seconds);
    previous = e.train_seconds;
  }
  auto j = nlohmann::json::parse(s.ToJson());
  EXPECT_DOUBLE_EQ(j["epoch_metrics"][2]["train_seconds"].get<double>(),
                   s.epoch_metrics[2].train_seconds);
}

// stop_at_accuracy ends the run at the first evaluation that reaches the
// target, on every learner alike; a target never reached runs to the end.
TEST_F(TrainerTest, StopAtAccuracyEndsTheRunAtTheFirstEvaluationReachingIt) {
  TrainOptions o = Base();
  o.run.steps = 20;
  o.run.eval_every = 2;
  TrainSummary full = Run(o);
  ASSERT_EQ(full.epoch_metrics.size(), 10u);
  EXPECT_EQ(full.reached_accuracy_step, -1);
  // The target: the accuracy of the fifth evaluation (step 10), so the run
  // must stop at the first evaluation at least as good, at or before it.
  const double target = full.epoch_metrics[4].test_accuracy;
  size_t first = 0;
  while (full.epoch_metrics[first].test_accuracy < target) ++first;
  ASSERT_LE(first, 4u);
  o.run.stop_at_accuracy = target;
  TrainSummary stopped = Run(o);
  EXPECT_EQ(stopped.steps, full.epoch_metrics[first].step);
  EXPECT_EQ(stopped.reached_accuracy_step, full.epoch_metrics[first].step);
  ASSERT_EQ(stopped.epoch_metrics.size(), first + 1);
  EXPECT_DOUBLE_EQ(stopped.test_accuracy, full.epoch_metrics[first].test_accuracy);
  EXPECT_DOUBLE_EQ(stopped.reached_accuracy_seconds, stopped.epoch_metrics.back().train_seconds);
  EXPECT_TRUE(stopped.replicas_identical);
  EXPECT_NE(messages_.find("reached test accuracy"), std::string::npos) << messages_;
  auto j = nlohmann::json::parse(stopped.ToJson());
  EXPECT_EQ(j["reached_accuracy"]["step"].get<int64_t>(), stopped.steps);
  // Not reached within the run (4 steps, whose evaluations are below 1): the
  // whole run, as without the option, and null in the JSON.
  ASSERT_LT(full.epoch_metrics[1].test_accuracy, 1.0);
  o.run.steps = 4;
  o.run.stop_at_accuracy = 0;
  TrainSummary plain = Run(o);
  o.run.stop_at_accuracy = 1.0;
  TrainSummary never = Run(o);
  EXPECT_EQ(never.steps, 4);
  EXPECT_EQ(never.weights_sha256, plain.weights_sha256);
  EXPECT_TRUE(nlohmann::json::parse(never.ToJson())["reached_accuracy"].is_null());
  o.run.stop_at_accuracy = 1.5;
  EXPECT_FALSE(Train(o, {}).ok());
}

// link_counters adds the interface's byte counters to every metrics line
// (here "lo", which every Linux host has); an interface that is not there is
// an error naming it.
TEST_F(TrainerTest, LinkCountersGoIntoTheMetricsLines) {
  TrainOptions o = Base();
  o.run.steps = 4;
  o.run.log_every = 1;
  TempDir out("link");
  o.run.metrics_out = out.Path("m.jsonl");
  o.run.link_counters = "lo";
  Run(o);
  const std::vector<nlohmann::json> rows = ReadJsonLines(o.run.metrics_out);
  int64_t last_rx = -1;
  for (const nlohmann::json& j : rows) {
    ASSERT_TRUE(j.contains("link_rx_bytes") && j.contains("link_tx_bytes")) << j.dump();
    const int64_t rx = j["link_rx_bytes"].get<int64_t>();
    EXPECT_GE(rx, last_rx);
    EXPECT_GE(j["link_tx_bytes"].get<int64_t>(), 0);
    last_rx = rx;
  }
  EXPECT_EQ(rows.size(), 4u);
  o.run.link_counters = "no-such-if0";
  ExpectTrainFails(o, "--link-counters no-such-if0");
  // Without it, no such fields.
  o.run.link_counters = "";
  Run(o);
  const std::vector<nlohmann::json> plain = ReadJsonLines(o.run.metrics_out);
  ASSERT_FALSE(plain.empty());
  EXPECT_FALSE(plain[0].contains("link_rx_bytes"));
}

}  // namespace
}  // namespace adacomp
