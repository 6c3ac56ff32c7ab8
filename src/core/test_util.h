// Helpers shared by adacomp_core's tests (not part of the library).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace adacomp::testing {

// A gradient-like tensor: Laplace noise whose scale varies smoothly along the
// tensor (log-normal per block of 64), a few exact zeros, deterministic.
inline std::vector<float> GradientLike(size_t n, uint64_t seed, double base_scale = 1e-3) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> expo(1.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> coin(0, 1);
  std::vector<float> g(n);
  double scale = base_scale;
  for (size_t i = 0; i < n; ++i) {
    if (i % 64 == 0) scale = base_scale * std::exp(normal(rng));
    const double mag = expo(rng) * scale;
    g[i] = static_cast<float>(coin(rng) ? mag : -mag);
    if (rng() % 97 == 0) g[i] = 0.0f;
  }
  return g;
}

}  // namespace adacomp::testing
