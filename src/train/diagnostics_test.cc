// ResidueProbe against what the frames say: an element counts as sent when
// the decoded frame carries a value for it, the scale is the frame's header
// scale, and waits are counted by a plain loop over the decoded frames.
#include "diagnostics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "adacomp/codec.h"

namespace adacomp::train {
namespace {

std::vector<float> SparseGradient(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> g(n, 0.0f);
  for (auto& v : g) v = u(rng) < 0.3f ? normal(rng) : 0.0f;
  return g;
}

TEST(ResidueProbe, AgreesWithTheDecodedFrames) {
  const size_t n = 1037;
  CodecConfig config;
  config.bin_size = 50;
  auto made = Compressor::Create(config, 0, n);
  ASSERT_TRUE(made.ok());
  Compressor& c = **made;
  ResidueProbe probe({{"w", "fc", n}, {"sent_dense", "other", 10}});  // the second: no residue
  std::mt19937 rng(5);
  std::vector<uint32_t> wait(n, 0);  // the reference count
  double sent_share_sum = 0, scale_sum = 0;
  int sent_steps = 0;
  const int steps = 7;
  for (int step = 0; step < steps; ++step) {
    std::vector<float> g = SparseGradient(rng, n);
    probe.Before(0, c.residue());
    std::vector<uint8_t> frame;
    CompressStats stats;
    ASSERT_TRUE(c.Compress(g, &frame, &stats).ok());
    probe.After(0, g, c.residue());
    probe.EndStep();
    std::vector<float> decoded(n, 0.0f);
    FrameInfo info;
    ASSERT_TRUE(DecodeAccumulate(frame, decoded, &info).ok());
    uint64_t carried = 0;
    for (size_t j = 0; j < n; ++j) {
      if (decoded[j] != 0.0f) {
        ++carried;
        wait[j] = 0;
        EXPECT_FLOAT_EQ(std::fabs(decoded[j]), info.scale) << j;
      } else {
        ++wait[j];
      }
    }
    EXPECT_EQ(carried, stats.selected);
    for (size_t j = 0; j < n; ++j) ASSERT_EQ(probe.Wait(0, j), wait[j]) << "step " << step;
    sent_share_sum += static_cast<double>(carried) / n;
    if (carried) {
      scale_sum += info.scale * static_cast<double>(carried);
      sent_steps += static_cast<int>(carried);
    }
  }
  const auto j = nlohmann::json::parse(probe.Line(steps));
  ASSERT_EQ(j["tensors"].size(), 1u);  // "sent_dense" never had a residue: left out
  const auto& t = j["tensors"][0];
  EXPECT_EQ(t["name"], "w");
  EXPECT_NEAR(t["sent_share"].get<double>(), sent_share_sum / steps, 1e-6);
  EXPECT_NEAR(t["scale"].get<double>(), scale_sum / sent_steps, 1e-4 * scale_sum / sent_steps);
  uint32_t max_wait = 0;
  double mean_wait = 0;
  for (uint32_t w : wait) {
    max_wait = std::max(max_wait, w);
    mean_wait += static_cast<double>(w) / n;
  }
  EXPECT_EQ(t["wait_max"].get<uint32_t>(), max_wait);
  EXPECT_NEAR(t["wait_mean"].get<double>(), mean_wait, 1e-4);
  double r2 = 0;
  for (float r : c.residue()) r2 += static_cast<double>(r) * r;
  EXPECT_NEAR(t["residue_norm"].get<double>(), std::sqrt(r2), 1e-4 * std::sqrt(r2));
  EXPECT_GT(t["abs_g_sent"].get<double>(), 0.0);
  // A new window starts empty.
  const auto k = nlohmann::json::parse(probe.Line(steps));
  EXPECT_EQ(k["tensors"][0]["sent_share"].get<double>(), 0.0);
  EXPECT_TRUE(k["tensors"][0]["scale"].is_null());
}

}  // namespace
}  // namespace adacomp::train
