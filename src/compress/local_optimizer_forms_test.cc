// LocalOptimizer (include/adacomp/local_optimizer.h) in the forms of torch's
// optimizers beyond plain momentum and Adam: SGD(nesterov=True) and Adam's L2
// weight decay, against scalar loops written here.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/local_optimizer.h"
#include "local_optimizer_test_util.h"

namespace adacomp {
namespace {

using namespace local_optimizer_test;  // NOLINT: the tests' helpers

// Nesterov (torch's SGD(nesterov=True)): the step is (wd w + g) + m u of
// the new velocity u, rounded as written; the velocity is SGD's. Over 3
// learners the average of their steps is Nesterov's step on the averaged
// gradient, to rounding (both are linear in the gradients). Masking zeroes
// the velocity where the step's frame carried a value.
TEST(LocalOptimizer, SgdNesterovStepsOnTheNewVelocity) {
  const float m = 0.9f, wd = 1e-2f;
  const size_t n = 300, learners = 3;
  LocalOptimizerSettings s = Sgd(m);
  s.nesterov = true;
  std::vector<std::unique_ptr<LocalOptimizer>> lo;
  for (size_t r = 0; r < learners; ++r) lo.push_back(Make(s, {n}));
  std::mt19937 rng(5);
  std::vector<float> w = Gradient(rng, n);
  std::vector<std::vector<float>> u(learners, std::vector<float>(n));
  std::vector<double> avg_u(n, 0.0);
  for (int step = 0; step < 5; ++step) {
    std::vector<double> avg_d(n, 0.0), avg_g(n, 0.0);
    for (size_t r = 0; r < learners; ++r) {
      std::vector<float> g = Gradient(rng, n);
      auto d = lo[r]->Prepare(0, g, w, wd);
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      for (size_t j = 0; j < n; ++j) {
        const float in = wd * w[j] + g[j];
        const float decayed = m * u[r][j];
        u[r][j] = step == 0 ? in : decayed + in;
        const float pull = m * u[r][j];
        ASSERT_TRUE(SameBits(d.value()[j], in + pull)) << "step " << step << " j " << j;
        avg_d[j] += d.value()[j] / double(learners);
        avg_g[j] += (double(g[j]) + double(wd) * w[j]) / double(learners);
      }
      lo[r]->Commit();
      for (size_t j = 0; j < n; ++j) ASSERT_TRUE(SameBits(lo[r]->first(0)[j], u[r][j]));
    }
    for (size_t j = 0; j < n; ++j) {
      avg_u[j] = step == 0 ? avg_g[j] : m * avg_u[j] + avg_g[j];
      EXPECT_NEAR(avg_d[j], avg_g[j] + m * avg_u[j], 1e-5 * (1 + std::abs(avg_d[j])));
    }
  }
  // Masking: the velocity is zeroed where the step was sent.
  auto made = Compressor::Create(CodecConfig{}, 0, n);
  ASSERT_TRUE(made.ok());
  std::vector<float> g = Gradient(rng, n);
  auto d = lo[0]->Prepare(0, g, w, wd);
  ASSERT_TRUE(d.ok());
  std::vector<uint8_t> frame;
  ASSERT_TRUE((*made)->Compress(d.value(), &frame).ok());
  ASSERT_TRUE(lo[0]->MaskSent(0, frame).ok());
  lo[0]->Commit();
  std::vector<float> decoded(n, 0.0f);
  ASSERT_TRUE(DecodeAccumulate(frame, decoded).ok());
  size_t sent = 0;
  for (size_t j = 0; j < n; ++j) {
    const float in = wd * w[j] + g[j];
    const float decayed = m * u[0][j];
    const float want = decoded[j] != 0.0f ? 0.0f : decayed + in;
    sent += decoded[j] != 0.0f;
    ASSERT_TRUE(SameBits(lo[0]->first(0)[j], want)) << j;
  }
  EXPECT_GT(sent, 0u);
  EXPECT_EQ(lo[0]->masked(), sent);
  s.kind = Kind::kAdam;
  EXPECT_EQ(LocalOptimizer::Create(s).status().code(), StatusCode::kInvalidArgument);
}

// Adam's L2 term (torch's Adam(weight_decay)): the moments are of wd w + g,
// rounded as written, bit for bit; no weight decay is the plain gradient's.
TEST(LocalOptimizer, AdamTakesAnL2TermInsideTheGradient) {
  const double b1 = 0.9, b2 = 0.99, eps = 1e-6;
  const float wd = 0.05f;
  const size_t n = 37;
  auto lo = Make(Adam(b1, b2, eps), {n});
  std::mt19937 rng(9);
  std::vector<float> w = Gradient(rng, n), m(n), v(n);
  for (int t = 1; t <= 4; ++t) {
    std::vector<float> g = Gradient(rng, n);
    auto d = lo->Prepare(0, g, w, wd);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    std::vector<float> l2(n);
    for (size_t j = 0; j < n; ++j) l2[j] = wd * w[j] + g[j];
    const std::vector<float> want = AdamStepReference(b1, b2, eps, t, l2, m, v);
    for (size_t j = 0; j < n; ++j) {
      ASSERT_TRUE(SameBits(d.value()[j], want[j])) << "t " << t << " j " << j;
    }
    lo->Commit();
  }
}

}  // namespace
}  // namespace adacomp
