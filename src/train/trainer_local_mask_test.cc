// The trainer's local SGD without masking (TrainCodecOptions::local_mask =
// false, `--no-local-mask`): what it refuses, that it changes the run and
// nothing else (a step that masks nothing gives the masked run's bits), that
// its summary says so, and that its checkpoints resume bit for bit and are
// kept apart from a masked run's. Its runs with --codec auto are in
// trainer_auto_test.cc.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "trainer_test_fixture.h"

namespace adacomp {
namespace {

TrainOptions Unmasked(TrainOptions o) {
  o.codec.local_optimizer = true;
  o.codec.local_mask = false;
  return o;
}

TEST_F(TrainerTest, UnmaskedLocalSgdRefusesWhatHasNoVelocityToMask) {
  TrainOptions o = Base();
  o.codec.local_mask = false;  // without the local optimizer
  ExpectTrainFails(o, "--no-local-mask needs the local optimizer with SGD");
  o = Unmasked(Base());
  o.optim.kind = Optimizer::kAdam;
  ExpectTrainFails(o, "--no-local-mask needs the local optimizer with SGD");
}

// Masking acts on the velocity after a step sent by the codec: with one
// step, or with a codec that keeps no residue (dense frames send the whole
// step), there is nothing to mask and the two runs are the same bits. With
// AdaComp over several steps they differ, and the replicas still agree.
TEST_F(TrainerTest, UnmaskedLocalSgdDiffersOnlyWhereSomethingWasMasked) {
  TrainOptions masked = Base();
  masked.codec.local_optimizer = true;
  const TrainOptions unmasked = Unmasked(Base());

  TrainOptions one_step = masked, one_step_u = unmasked;
  one_step.run.steps = one_step_u.run.steps = 1;
  EXPECT_EQ(Run(one_step).weights_sha256, Run(one_step_u).weights_sha256);

  TrainOptions dense = masked, dense_u = unmasked;
  dense.codec.config.codec = dense_u.codec.config.codec = Codec::kDense;
  EXPECT_EQ(Run(dense).weights_sha256, Run(dense_u).weights_sha256);

  const TrainSummary m = Run(masked), u = Run(unmasked);
  EXPECT_NE(m.weights_sha256, u.weights_sha256);
  EXPECT_NE(m.learner_state_sha256, u.learner_state_sha256);
  EXPECT_TRUE(u.replicas_identical);
  EXPECT_TRUE(u.local_optimizer);
  EXPECT_FALSE(u.local_mask);
  EXPECT_TRUE(m.local_mask);
  EXPECT_EQ(nlohmann::json::parse(u.ToJson())["local_mask"], false);
  EXPECT_EQ(nlohmann::json::parse(m.ToJson())["local_mask"], true);
  // Adam masks nothing: its summary says so.
  TrainOptions adam = masked;
  adam.optim.kind = Optimizer::kAdam;
  EXPECT_FALSE(Run(adam).local_mask);
}

TEST_F(TrainerTest, UnmaskedLocalSgdResumesBitForBitAndNotAMaskedCheckpoint) {
  TrainOptions o = Unmasked(Base());
  o.run.steps = 8;
  const TrainSummary full = Run(o);
  TempDir ckpt("ckpt-unmasked");
  ExpectResumedToTheSameEnd(StopThenResume(o, ckpt.Path(), 3, 5), full, 3);
  // The same checkpoint does not resume the masked run.
  TrainOptions masked = o;
  masked.codec.local_mask = true;
  ExpectResumeRefused(masked, ckpt.Path());
}

}  // namespace
}  // namespace adacomp
