// The trainer with --codec auto (TrainCodecOptions::auto_dense): what it
// refuses, what the summary says it chose, the local optimizer, and a resume
// in the middle of a run, after a switch, that ends on the uninterrupted
// run's weights and state bit for bit (each learner's step times come from a
// clock of the test's, so both runs see the same figures).
#include <gtest/gtest.h>

#include <string>

#include "trainer_test_fixture.h"

namespace adacomp {
namespace {

// A step "takes" 10 us plus its transport bytes at 1 ns each: the codec's
// frames are far fewer bytes than dense's, so it settles on the codec, and
// dense is probed again every reprobe_every steps.
TrainTestHooks ByteClock() {
  TrainTestHooks h;
  h.auto_step_clock = [](int rank) {
    return [rank](const ExchangeResult& r) {
      return (1e-5 + 1e-9 * static_cast<double>(r.transport_sent_bytes)) * (1 + 0.1 * rank);
    };
  };
  return h;
}

class TrainerAutoTest : public TrainerTest {
 protected:
  TrainOptions Auto() {
    TrainOptions o = Base();
    o.codec.auto_dense = true;
    o.codec.speed.reprobe_every = 4;
    o.codec.speed.probe_cost = 0;  // dense again every 4 settled steps, whatever it costs
    o.run.steps = 20;
    return o;
  }
};

TEST_F(TrainerAutoTest, SaysWhatItChoseAndCountsEachWay) {
  const TrainOptions o = Auto();
  const TrainSummary s = Run(o, ByteClock());
  EXPECT_TRUE(s.auto_codec);
  // Dense 0-3, the codec 4-7, settled on the codec at 8 (the ninth step);
  // dense probed again at 12-15, the codec again from 16.
  EXPECT_EQ(s.auto_dense_steps, 8);
  EXPECT_EQ(s.auto_codec_steps, 12);
  ASSERT_EQ(s.auto_choices.size(), 3u);
  EXPECT_EQ(s.auto_choices[0].rfind("step 9: auto: codec, ", 0), 0u) << s.auto_choices[0];
  EXPECT_EQ(s.auto_choices[1].rfind("step 13: auto: probing dense again", 0), 0u)
      << s.auto_choices[1];
  EXPECT_EQ(s.auto_choices[2].rfind("step 17: auto: codec, ", 0), 0u) << s.auto_choices[2];
  EXPECT_TRUE(s.replicas_identical);
  EXPECT_NE(messages_.find("step 9: auto: codec, "), std::string::npos) << messages_;
  // Dense steps send every element: the end-to-end rate lies between 1 and
  // the codec's own.
  const TrainSummary plain = Run(Base());
  EXPECT_GT(s.end_to_end_rate, 1.0);
  EXPECT_LT(s.end_to_end_rate, plain.end_to_end_rate);
  const auto j = nlohmann::json::parse(s.ToJson());
  EXPECT_EQ(j["auto"]["dense_steps"], 8);
  EXPECT_EQ(j["auto"]["codec_steps"], 12);
  EXPECT_TRUE(nlohmann::json::parse(plain.ToJson())["auto"].is_null());
}

TEST_F(TrainerAutoTest, AResumeAfterASwitchEqualsTheUninterruptedRun) {
  const TrainOptions o = Auto();
  const TrainSummary full = Run(o, ByteClock());
  // Checkpoints every 10 steps, "killed" after 13: the resume starts at
  // step 10, after the switch to the codec (step 5) and before the second
  // dense probe (13) and the switch back (17).
  TempDir ckpt("auto-ckpt");
  const TrainSummary resumed = StopThenResume(o, ckpt.Path(), 10, 13, ByteClock());
  ExpectResumedToTheSameEnd(resumed, full, 10);
  EXPECT_TRUE(resumed.replicas_identical);
  // The resumed process ran steps 11-20: the same choices as the whole run's there.
  EXPECT_EQ(resumed.auto_dense_steps + resumed.auto_codec_steps, 10);
  std::vector<std::string> tail;
  for (const std::string& c : full.auto_choices) {
    if (std::stoi(c.substr(5)) > 10) tail.push_back(c);
  }
  EXPECT_EQ(resumed.auto_choices, tail);
  EXPECT_FALSE(tail.empty());
}

// With the local optimizer a dense step sends each learner's step plus its
// residue and masks nothing: auto runs, switches as without it, and a resume
// after a switch ends on the uninterrupted run's bits, for the unmasked
// local SGD (--no-local-mask); the masked one and local Adam run too.
TEST_F(TrainerAutoTest, RunsTheLocalOptimizer) {
  TrainOptions o = Auto();
  o.codec.local_optimizer = true;
  o.codec.local_mask = false;
  const TrainSummary full = Run(o, ByteClock());
  EXPECT_EQ(full.auto_dense_steps, 8);
  EXPECT_EQ(full.auto_codec_steps, 12);
  EXPECT_TRUE(full.replicas_identical);
  EXPECT_FALSE(full.local_mask);
  EXPECT_NE(full.weights_sha256, Run(Auto(), ByteClock()).weights_sha256);
  TempDir ckpt("auto-local-ckpt");
  const TrainSummary resumed = StopThenResume(o, ckpt.Path(), 10, 13, ByteClock());
  ExpectResumedToTheSameEnd(resumed, full, 10);

  TrainOptions masked = Auto();
  masked.codec.local_optimizer = true;
  TrainOptions adam = masked;
  adam.optim.kind = Optimizer::kAdam;
  for (const TrainOptions& other : {masked, adam}) {
    const TrainSummary a = Run(other, ByteClock());
    EXPECT_EQ(a.auto_dense_steps, 8);
    EXPECT_TRUE(a.replicas_identical);
    EXPECT_NE(a.weights_sha256, full.weights_sha256);
  }
}

TEST_F(TrainerAutoTest, RefusesWhatItCannotRunWith) {
  TrainOptions o = Auto();
  o.codec.config.codec = Codec::kDense;
  ExpectTrainFails(o, "--codec auto chooses between dense and a codec");
  o = Auto();
  o.codec.dense_warmup_steps = 3;
  ExpectTrainFails(o, "--dense-warmup-steps");
  o = Auto();
  o.codec.speed.probe_steps = 0;
  ExpectTrainFails(o, "probe_steps");
  // A checkpoint of a run without auto does not resume one with it.
  TempDir ckpt("auto-mismatch");
  TrainOptions plain = Base();
  plain.run.checkpoint_dir = ckpt.Path();
  plain.run.checkpoint_every = 3;
  Run(plain);
  o = Auto();
  o.run.checkpoint_dir = ckpt.Path();
  o.run.resume = true;
  ExpectTrainFails(o, "checkpoint");
}

}  // namespace
}  // namespace adacomp
