// Helpers of the LocalOptimizer tests (local_optimizer*_test.cc): settings,
// a made optimizer, normal gradients, bit equality.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "adacomp/local_optimizer.h"

namespace adacomp::local_optimizer_test {

using Kind = LocalOptimizerSettings::Kind;

inline LocalOptimizerSettings Sgd(double momentum) {
  LocalOptimizerSettings s;
  s.momentum = momentum;
  return s;
}

inline LocalOptimizerSettings Adam(double b1, double b2, double eps, int64_t freeze = 0) {
  LocalOptimizerSettings s;
  s.kind = Kind::kAdam;
  s.beta1 = b1;
  s.beta2 = b2;
  s.eps = eps;
  s.freeze_second_moment_after = freeze;
  return s;
}

inline std::unique_ptr<LocalOptimizer> Make(const LocalOptimizerSettings& s,
                                            std::vector<size_t> sizes) {
  auto made = LocalOptimizer::Create(s, sizes);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return std::move(made).value();
}

inline std::vector<float> Gradient(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (auto& v : g) v = normal(rng);
  return g;
}

inline bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace adacomp::local_optimizer_test
