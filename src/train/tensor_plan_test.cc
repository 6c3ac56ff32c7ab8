// The tensor plan (tensor_plan.h) against the rules written out by hand:
// which tensors go dense, the bin size of each layer type, a compressor seed
// per run, learner and tensor, and which tensors run the local optimizer.
#include "tensor_plan.h"

#include <gtest/gtest.h>

#include <set>

#include "options.h"

namespace adacomp::train {
namespace {

std::vector<TensorSpec> Specs() {
  return {{"conv1.weight", 500, LayerType::kConv},
          {"conv1.bias", 20, LayerType::kOther},
          {"fc1.weight", 400000, LayerType::kFc},
          {"lstm.weight", 8000, LayerType::kLstm}};
}

TEST(TensorPlanTest, DefaultBinSizesPerLayerType) {
  TrainOptions o;
  const auto specs = Specs();
  const TensorPlan plan = PlanTensors(o, specs, 0);
  ASSERT_EQ(plan.exchange.size(), 4u);
  const std::vector<uint32_t> want = {50, 500, 500, 500};
  EXPECT_EQ(plan.bin_sizes, want);
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(plan.exchange[k].name, specs[k].name);
    EXPECT_EQ(plan.exchange[k].elements, static_cast<uint64_t>(specs[k].elements));
    EXPECT_EQ(plan.exchange[k].codec.codec, Codec::kAdaComp);
    EXPECT_EQ(plan.exchange[k].codec.bin_size, want[k]);
    EXPECT_EQ(plan.dense[k].codec.codec, Codec::kDense);
    EXPECT_EQ(plan.dense[k].elements, plan.exchange[k].elements);
  }
  EXPECT_EQ(plan.dense_tensors, 0);
  EXPECT_FALSE(plan.any_local());
  // An explicit size for all, then one type overriding it.
  o.codec.bin_size = 100;
  o.codec.bin_size_by_type[static_cast<int>(LayerType::kFc)] = 250;
  const std::vector<uint32_t> sized = {100, 100, 250, 100};
  EXPECT_EQ(PlanTensors(o, specs, 0).bin_sizes, sized);
}

TEST(TensorPlanTest, DenseBelowAndOtherCodecsAreNotBinned) {
  TrainOptions o;
  o.codec.dense_below = 500;  // conv1.weight (500) and the bias (20)
  const TensorPlan plan = PlanTensors(o, Specs(), 1);
  EXPECT_EQ(plan.dense_tensors, 2);
  EXPECT_EQ(plan.exchange[0].codec.codec, Codec::kDense);
  EXPECT_EQ(plan.exchange[1].codec.codec, Codec::kDense);
  EXPECT_EQ(plan.exchange[2].codec.codec, Codec::kAdaComp);
  EXPECT_EQ(plan.bin_sizes, (std::vector<uint32_t>{0, 0, 500, 500}));
  o.codec.config.codec = Codec::kTopK;
  const TensorPlan topk = PlanTensors(o, Specs(), 1);
  EXPECT_EQ(topk.bin_sizes, (std::vector<uint32_t>{0, 0, 0, 0}));
  EXPECT_EQ(topk.exchange[3].codec.codec, Codec::kTopK);
  // With the dense codec itself nothing counts as sent dense by --dense-below.
  o.codec.config.codec = Codec::kDense;
  EXPECT_EQ(PlanTensors(o, Specs(), 1).dense_tensors, 0);
}

TEST(TensorPlanTest, SeedsDifferPerLearnerAndTensorAndFollowTheRunSeed) {
  TrainOptions o;
  o.codec.config.codec = Codec::kTernGrad;
  std::set<uint64_t> seeds;
  for (int rank = 0; rank < 3; ++rank) {
    const TensorPlan plan = PlanTensors(o, Specs(), rank);
    for (const auto& x : plan.exchange) seeds.insert(x.codec.seed);
    // The same rank plans the same seeds.
    EXPECT_EQ(PlanTensors(o, Specs(), rank).exchange[2].codec.seed, plan.exchange[2].codec.seed);
  }
  EXPECT_EQ(seeds.size(), 12u);
  TrainOptions other = o;
  other.run.seed = o.run.seed + 1;
  EXPECT_NE(PlanTensors(other, Specs(), 0).exchange[0].codec.seed,
            PlanTensors(o, Specs(), 0).exchange[0].codec.seed);
}

TEST(TensorPlanTest, LocalOptimizerByType) {
  TrainOptions o;
  o.codec.local_optimizer = true;
  TensorPlan all = PlanTensors(o, Specs(), 0);
  EXPECT_TRUE(all.all_local());
  o.codec.local_optimizer_types = 1u << static_cast<int>(LayerType::kFc);
  TensorPlan fc = PlanTensors(o, Specs(), 0);
  EXPECT_EQ(fc.local, (std::vector<bool>{false, false, true, false}));
  EXPECT_TRUE(fc.any_local());
  EXPECT_FALSE(fc.all_local());
  o.codec.local_optimizer_types = 1u << static_cast<int>(LayerType::kLstm);
  std::vector<TensorSpec> no_lstm = Specs();
  no_lstm.pop_back();
  EXPECT_FALSE(PlanTensors(o, no_lstm, 0).any_local());
  EXPECT_FALSE(PlanTensors(o, {}, 0).all_local());
}

}  // namespace
}  // namespace adacomp::train
