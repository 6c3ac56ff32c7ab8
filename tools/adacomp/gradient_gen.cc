#include "gradient_gen.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace adacomp::tool {
namespace {

constexpr uint64_t kStreamPersistent = 0x9e3779b97f4a7c15ull;
constexpr uint64_t kStreamNoise = 0xbf58476d1ce4e5b9ull;
constexpr uint64_t kStreamUnit = 0x94d049bb133111ebull;
constexpr uint64_t kStreamStep = 0xd6e8feb86659fd93ull;
constexpr uint64_t kStreamLayer = 0xa0761d6478bd642full;

// SplitMix64 finalizer: a good 64-bit mixing function.
inline uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

inline uint64_t Hash(uint64_t seed, uint64_t stream, uint64_t a, uint64_t b) {
  return Mix(Mix(Mix(seed ^ stream) + a) + b);
}

// Uniform in the open interval (0, 1).
inline double Uniform(uint64_t h) { return (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53; }

// Standard Laplace (density exp(-|x|) / 2) by inverting its CDF.
inline double Laplace(uint64_t h) {
  double u = Uniform(h);
  return u < 0.5 ? std::log(2.0 * u) : -std::log(2.0 * (1.0 - u));
}

// Standard normal by Box-Muller from two hashes.
inline double Normal(uint64_t h1, uint64_t h2) {
  return std::sqrt(-2.0 * std::log(Uniform(h1))) * std::cos(6.283185307179586 * Uniform(h2));
}

}  // namespace

const char kGradientModelHelp[] =
    "Gradient-like data: element j of step k is\n"
    "  g[k][j] = s_k * a_u * b_uk * (0.5 * m_j + e_kj)\n"
    "where u = j / 256 is the element's unit (a row of 256 consecutive elements),\n"
    "  a_u  = exp(Z_u), Z_u standard normal: the unit's activity (log-normal, fixed),\n"
    "         times 0.01 for 10% of units (nearly silent units);\n"
    "  b_uk = exp(0.3 * Z_uk): the unit's activity drift at step k;\n"
    "  m_j  ~ Laplace(1), fixed across steps (the persistent part of the gradient);\n"
    "  e_kj ~ Laplace(1), fresh each step (minibatch noise);\n"
    "  s_k  = scale * exp(0.25 * Z_k) / sqrt(1 + k/16): step scale, shrinking with k.\n"
    "The result is heavy-tailed (a scale mixture of Laplace variables) with\n"
    "unit-to-unit scale varying over ~3 orders of magnitude. All randomness is a\n"
    "hash of (seed, step, index): the same arguments give the same bits.";

double LayerScale(uint64_t seed, uint64_t layer, double base) {
  return base *
         std::exp(Normal(Hash(seed, kStreamLayer, layer, 1), Hash(seed, kStreamLayer, layer, 2)));
}

void GenerateGradientRange(const GradientSpec& spec, uint64_t step, uint64_t begin,
                           std::span<float> out) {
  assert(begin + out.size() <= spec.elements);
  const uint64_t seed = spec.seed;
  const uint64_t unit_size = spec.unit_size ? spec.unit_size : 1;
  const double step_scale =
      spec.scale *
      std::exp(0.25 * Normal(Hash(seed, kStreamStep, step, 1), Hash(seed, kStreamStep, step, 2))) /
      std::sqrt(1.0 + static_cast<double>(step) / 16.0);

  uint64_t j = begin;
  const uint64_t end = begin + out.size();
  size_t o = 0;
  while (j < end) {
    const uint64_t unit = j / unit_size;
    const uint64_t unit_end = std::min(end, (unit + 1) * unit_size);
    double activity =
        std::exp(Normal(Hash(seed, kStreamUnit, unit, 1), Hash(seed, kStreamUnit, unit, 2)));
    if (Uniform(Hash(seed, kStreamUnit, unit, 3)) < 0.1) activity *= 0.01;
    const double drift = std::exp(0.3 * Normal(Hash(seed, kStreamUnit, unit, (step << 2) | 4),
                                               Hash(seed, kStreamUnit, unit, (step << 2) | 5)));
    const double unit_scale = step_scale * activity * drift;
    const uint64_t step_key = Mix(seed ^ kStreamNoise ^ Mix(step + 1));
    const uint64_t persist_key = Mix(seed ^ kStreamPersistent);
    for (; j < unit_end; ++j, ++o) {
      const double m = Laplace(Mix(persist_key + j * kStreamPersistent));
      const double e = Laplace(Mix(step_key + j * kStreamPersistent));
      out[o] = static_cast<float>(unit_scale * (0.5 * m + e));
    }
  }
}

}  // namespace adacomp::tool
