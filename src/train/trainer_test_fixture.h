// src/train/trainer_test_fixture.h: the fixture of the trainer's tests
// (trainer_test.cc, trainer_options_test.cc): tiny synthetic MNIST-like data
// written once per suite, small quick options, runs that keep rank 0's
// weights, and a stop-then-resume helper. Test-only header.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "adacomp/trainer.h"
#include "test_files.h"
#include "test_hooks.h"

namespace adacomp {

using train::testing::TempDir;

// The objects of a JSON-lines file, one per line.
inline std::vector<nlohmann::json> ReadJsonLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

// Train(o) fails, and its message contains `needle`.
inline void ExpectTrainFails(const TrainOptions& o, const std::string& needle) {
  auto r = Train(o);
  ASSERT_FALSE(r.ok()) << needle;
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().ToString();
}

class TrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = new TempDir("trainer-data");
    train::testing::WriteSyntheticMnist(data_->Path(), "train", 320, true, 1);
    train::testing::WriteSyntheticMnist(data_->Path(), "t10k", 80, false, 2);
  }
  static void TearDownTestSuite() {
    delete data_;
    data_ = nullptr;
  }

  // Small, quick settings; messages are collected instead of printed.
  TrainOptions Base() {
    TrainOptions o;
    o.model.kind = Model::kMnistCnn;
    o.model.data_dir = data_->Path();
    o.run.learners = 4;
    o.run.batch_size = 32;
    o.run.steps = 6;
    o.run.seed = 7;
    o.run.log_every = 1000;
    o.run.on_message = [this](const std::string& m) { messages_ += m + "\n"; };
    return o;
  }

  // One dense learner, plain SGD (no momentum) at lr 0.05, a metrics line
  // every step: a step whose arithmetic a test can redo by hand.
  TrainOptions PlainSgd(int64_t batch_size) {
    TrainOptions o = Base();
    o.run.learners = 1;
    o.run.batch_size = batch_size;
    o.codec.config.codec = Codec::kDense;
    o.optim.momentum = 0;
    o.optim.lr = 0.05;
    o.run.log_every = 1;
    return o;
  }

  // A run's summary, and rank 0's final weights when the hooks ask for them
  // (keep_weights).
  struct RunResult : TrainSummary {
    std::vector<float> weights;
  };
  RunResult Run(const TrainOptions& o, TrainTestHooks hooks = {}) {
    RunResult out;
    if (hooks.keep_weights) hooks.weights_out = &out.weights;
    auto r = Train(o, hooks);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) static_cast<TrainSummary&>(out) = std::move(r).value();
    return out;
  }

  // Run, keeping rank 0's final weights.
  RunResult RunWithWeights(const TrainOptions& o) {
    TrainTestHooks hooks;
    hooks.keep_weights = true;
    return Run(o, hooks);
  }

  // Runs o with a checkpoint every `every` steps into dir, "killed" after
  // `stop_after` steps, then resumes it there to the end; both runs with
  // `hooks`.
  TrainSummary StopThenResume(const TrainOptions& o, const std::string& dir, int64_t every,
                              int64_t stop_after, const TrainTestHooks& hooks = {}) {
    TrainOptions first = o;
    first.run.checkpoint_dir = dir;
    first.run.checkpoint_every = every;
    TrainTestHooks stop = hooks;
    stop.stop_after_steps = stop_after;
    EXPECT_TRUE(Run(first, stop).stopped_early);
    TrainOptions second = o;
    second.run.checkpoint_dir = dir;
    second.run.resume = true;
    return Run(second, hooks);
  }

  // A resumed run (from checkpoint step `from`) ended on the uninterrupted
  // run's weights and learner state.
  static void ExpectResumedToTheSameEnd(const TrainSummary& resumed, const TrainSummary& full,
                                        int64_t from) {
    EXPECT_EQ(resumed.resumed_from_step, from);
    EXPECT_EQ(resumed.weights_sha256, full.weights_sha256);
    EXPECT_EQ(resumed.learner_state_sha256, full.learner_state_sha256);
  }
  // o does not resume from the checkpoints in dir.
  static void ExpectResumeRefused(TrainOptions o, const std::string& dir) {
    o.run.checkpoint_dir = dir;
    o.run.resume = true;
    EXPECT_FALSE(Train(o).ok());
  }

  static inline TempDir* data_ = nullptr;
  std::string messages_;
};

}  // namespace adacomp
