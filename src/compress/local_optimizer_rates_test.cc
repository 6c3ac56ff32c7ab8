// LocalOptimizer::SetRates (include/adacomp/local_optimizer.h): decay rates
// that a schedule moves between steps, against plain scalar loops written
// here in the documented float32 order, with the rate of each step where
// torch's SGD and Adam read it (the momentum of the step; Adam's bias
// corrections 1 - beta^t with the betas of step t). And what it refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "adacomp/local_optimizer.h"
#include "local_optimizer_test_util.h"

namespace adacomp {
namespace {

using Kind = LocalOptimizerSettings::Kind;

using namespace local_optimizer_test;  // NOLINT: the tests' helpers

// OneCycleLR's momentum: from 0.95 down to 0.85 and back, one value a step.
double CycledMomentum(int step, int steps) {
  const double x = std::abs(2.0 * step / (steps - 1) - 1.0);  // 1 -> 0 -> 1
  return 0.85 + 0.10 * x;
}

TEST(LocalOptimizerRates, SgdFollowsAMomentumScheduleBitForBit) {
  const int steps = 9;
  const size_t n = 33;
  LocalOptimizerSettings s;
  s.momentum = 0.9;  // replaced before the first step
  auto lo = std::move(LocalOptimizer::Create(s, std::vector<size_t>{n}).value());
  std::mt19937 rng(7);
  std::vector<float> u(n);
  for (int step = 0; step < steps; ++step) {
    const double m = CycledMomentum(step, steps);
    ASSERT_TRUE(lo->SetRates(m, 0.5, 0.5).ok());  // the betas are Adam's: ignored
    EXPECT_EQ(lo->settings().momentum, m);
    std::vector<float> g = Gradient(rng, n);
    auto next = lo->Prepare(0, g);
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    for (size_t j = 0; j < n; ++j) {
      const float decayed = static_cast<float>(m) * u[j];
      const float want = step == 0 ? g[j] : decayed + g[j];
      ASSERT_TRUE(SameBits(next.value()[j], want)) << "step " << step << " j " << j;
      u[j] = want;
    }
    lo->Commit();
  }
  EXPECT_EQ(lo->settings().beta1, 0.9);  // untouched
}

TEST(LocalOptimizerRates, AdamCorrectsEachStepWithItsOwnBetas) {
  const int steps = 8;
  const size_t n = 40;
  const double eps = 1e-7;
  LocalOptimizerSettings s;
  s.kind = Kind::kAdam;
  s.eps = eps;
  auto lo = std::move(LocalOptimizer::Create(s, std::vector<size_t>{n}).value());
  std::mt19937 rng(11);
  std::vector<float> m(n), v(n);
  for (int t = 1; t <= steps; ++t) {
    const double b1 = CycledMomentum(t - 1, steps);
    const double b2 = t <= 4 ? 0.999 : 0.99;  // a beta2 moved once, mid-run
    ASSERT_TRUE(lo->SetRates(0.1, b1, b2).ok());
    std::vector<float> g = Gradient(rng, n);
    auto d = lo->Prepare(0, g);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    const std::vector<float> want = AdamStepReference(b1, b2, eps, t, g, m, v);
    for (size_t j = 0; j < n; ++j) {
      ASSERT_TRUE(SameBits(d.value()[j], want[j])) << "t " << t << " j " << j;
    }
    lo->Commit();
  }
  EXPECT_EQ(lo->settings().momentum, 0.9);  // SGD's: untouched
}

TEST(LocalOptimizerRates, RefusesBadRatesAndMidStepChangesAndChangesNothing) {
  LocalOptimizerSettings s;
  s.momentum = 0.8;
  auto sgd = std::move(LocalOptimizer::Create(s, std::vector<size_t>{4}).value());
  for (double bad : {1.0, -0.01, std::nan("")}) {
    const Status st = sgd->SetRates(bad, 0.9, 0.999);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("momentum"), std::string::npos) << st.message();
    EXPECT_EQ(sgd->settings().momentum, 0.8);
  }
  // While a step is in progress its velocity was made with the old rate.
  std::vector<float> g = {1, 2, 3, 4};
  ASSERT_TRUE(sgd->Prepare(0, g).ok());
  const Status mid = sgd->SetRates(0.5, 0.9, 0.999);
  EXPECT_EQ(mid.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mid.message().find("between steps"), std::string::npos) << mid.message();
  EXPECT_EQ(sgd->settings().momentum, 0.8);
  sgd->Commit();
  ASSERT_TRUE(sgd->SetRates(0.5, 0.9, 0.999).ok());
  auto next = sgd->Prepare(0, g);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next.value()[2], 0.5f * 3 + 3);
  sgd->Drop();  // a dropped step ends the step in progress as well
  EXPECT_TRUE(sgd->SetRates(0.6, 0.9, 0.999).ok());

  LocalOptimizerSettings a;
  a.kind = Kind::kAdam;
  auto adam = std::move(LocalOptimizer::Create(a, std::vector<size_t>{4}).value());
  for (auto [b1, b2] : {std::pair{1.0, 0.999}, {0.9, 1.0}, {-0.5, 0.999}}) {
    const Status st = adam->SetRates(0.9, b1, b2);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << b1 << " " << b2;
    EXPECT_NE(st.message().find("betas"), std::string::npos) << st.message();
    EXPECT_EQ(adam->settings().beta1, 0.9);
    EXPECT_EQ(adam->settings().beta2, 0.999);
  }
  // A frozen second moment keeps the correction of its beta2; beta1 may move.
  a.freeze_second_moment_after = 2;
  auto frozen = std::move(LocalOptimizer::Create(a, std::vector<size_t>{4}).value());
  EXPECT_EQ(frozen->SetRates(0.9, 0.9, 0.99).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(frozen->settings().beta2, 0.999);
  EXPECT_TRUE(frozen->SetRates(0.9, 0.85, 0.999).ok());
  EXPECT_EQ(frozen->settings().beta1, 0.85);
}

// SetStepScale: the next Prepare's d is the scale times Adam's, with the same
// moments; refused mid-step, on SGD, on a frozen second moment and on a bad
// scale, each time leaving the scale as it was.
TEST(LocalOptimizerRates, StepScaleMovesBetweenStepsOnly) {
  LocalOptimizerSettings a;
  a.kind = Kind::kAdam;
  const size_t n = 6;
  auto plain = std::move(LocalOptimizer::Create(a, std::vector<size_t>{n}).value());
  auto moved = std::move(LocalOptimizer::Create(a, std::vector<size_t>{n}).value());
  std::mt19937 rng(3);
  for (int t = 1; t <= 4; ++t) {
    const double scale = 1.0 + 0.25 * t;
    ASSERT_TRUE(moved->SetStepScale(scale).ok());
    const std::vector<float> g = Gradient(rng, n);
    auto dp = plain->Prepare(0, g);
    auto dm = moved->Prepare(0, g);
    ASSERT_TRUE(dp.ok() && dm.ok());
    for (size_t j = 0; j < n; ++j) {
      ASSERT_TRUE(SameBits(dm.value()[j], static_cast<float>(scale) * dp.value()[j]))
          << "t " << t << " j " << j;
    }
    const Status mid = moved->SetStepScale(3.0);
    EXPECT_EQ(mid.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(mid.message().find("between steps"), std::string::npos) << mid.message();
    EXPECT_EQ(moved->settings().adam_step_scale, scale);
    plain->Commit();
    moved->Commit();
    for (size_t j = 0; j < n; ++j) {
      ASSERT_TRUE(SameBits(plain->second(0)[j], moved->second(0)[j]));
    }
  }
  for (double bad : {0.0, -2.0, std::nan(""), double(INFINITY)}) {
    EXPECT_EQ(moved->SetStepScale(bad).code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(moved->settings().adam_step_scale, 2.0);
  }
  LocalOptimizerSettings s;
  auto sgd = std::move(LocalOptimizer::Create(s, std::vector<size_t>{n}).value());
  EXPECT_EQ(sgd->SetStepScale(2.0).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(sgd->SetStepScale(1.0).ok());
  a.freeze_second_moment_after = 2;
  auto frozen = std::move(LocalOptimizer::Create(a, std::vector<size_t>{n}).value());
  EXPECT_EQ(frozen->SetStepScale(2.0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(frozen->settings().adam_step_scale, 1.0);
}

}  // namespace
}  // namespace adacomp
