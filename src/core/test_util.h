// Helpers shared by adacomp_core's tests (not part of the library).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <string_view>
#include <vector>

#include "adacomp/codec.h"

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

// The codec settings the compressor tests share: L_T 50, top-k density 2 %,
// threshold 2e-3, the given TernGrad seed.
inline CodecConfig TestCodecConfig(Codec codec, uint64_t seed) {
  CodecConfig cfg;
  cfg.codec = codec;
  cfg.bin_size = 50;
  cfg.density = 0.02;
  cfg.tau = 2e-3f;
  cfg.seed = seed;
  return cfg;
}

// TestCodecConfig of every codec (this TernGrad seed), then adacomp with
// binary16 and with float32 values.
inline std::vector<CodecConfig> EveryCodecTestConfig(uint64_t seed) {
  std::vector<CodecConfig> out;
  for (Codec c : {Codec::kDense, Codec::kAdaComp, Codec::kTopK, Codec::kThreshold, Codec::kOneBit,
                  Codec::kTernGrad}) {
    out.push_back(TestCodecConfig(c, seed));
  }
  for (ValueMode v : {ValueMode::kFp16, ValueMode::kFp32}) {
    CodecConfig c = TestCodecConfig(Codec::kAdaComp, seed);
    c.values = v;
    out.push_back(c);
  }
  return out;
}

// Each value's name parses back to the value, and `unknown` does not parse.
// name: E -> string-like; parse: string_view -> Result<E>.
template <typename E, typename Name, typename Parse>
void ExpectNamesRoundTrip(std::initializer_list<E> values, Name name, Parse parse,
                          std::string_view unknown) {
  for (E value : values) {
    auto back = parse(name(value));
    ASSERT_TRUE(back.ok()) << name(value);
    EXPECT_EQ(*back, value) << name(value);
  }
  EXPECT_FALSE(parse(unknown).ok()) << unknown;
}

}  // namespace adacomp::testing
