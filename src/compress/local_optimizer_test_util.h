// Helpers of the LocalOptimizer tests (local_optimizer*_test.cc): settings,
// a made optimizer, normal gradients, bit equality.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
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

// One step t (from 1) of Adam in the documented float32 order on gradient g,
// from moments m and v (updated in place): the step d of each element.
inline std::vector<float> AdamStepReference(double b1, double b2, double eps, int t,
                                            const std::vector<float>& g, std::vector<float>& m,
                                            std::vector<float>& v) {
  const float bc1 = static_cast<float>(1.0 - std::pow(b1, t));
  const float bc2 = static_cast<float>(1.0 - std::pow(b2, t));
  std::vector<float> d(g.size());
  for (size_t j = 0; j < g.size(); ++j) {
    const float gm = static_cast<float>(1.0 - b1) * g[j];
    const float gv = (static_cast<float>(1.0 - b2) * g[j]) * g[j];
    m[j] = t == 1 ? 0.0f + gm : static_cast<float>(b1) * m[j] + gm;
    v[j] = t == 1 ? 0.0f + gv : static_cast<float>(b2) * v[j] + gv;
    d[j] = (m[j] / bc1) / (std::sqrt(v[j] / bc2) + static_cast<float>(eps));
  }
  return d;
}

}  // namespace adacomp::local_optimizer_test
