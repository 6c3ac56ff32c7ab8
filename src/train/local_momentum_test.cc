// LocalMomentum (--momentum-correction) against plain loops written here:
// the velocity recursion, and the masking checked against the decoded
// frames (an element is sent when the frame carries a value for it), not
// against the residue test the class itself uses.
#include "local_momentum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "adacomp/codec.h"

namespace adacomp::train {
namespace {

std::vector<float> Gradient(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (auto& v : g) v = normal(rng);
  return g;
}

TEST(LocalMomentum, WithoutAResidueIsTheMomentumRecursion) {
  const float m = 0.9f;
  LocalMomentum lm(m, {5, 3});
  std::mt19937 rng(1);
  std::vector<std::vector<float>> ref = {std::vector<float>(5, 0.0f), std::vector<float>(3, 0.0f)};
  for (int step = 0; step < 6; ++step) {
    for (size_t k = 0; k < 2; ++k) {
      std::vector<float> g = Gradient(rng, ref[k].size());
      auto next = lm.Prepare(k, g);
      for (size_t j = 0; j < g.size(); ++j) {
        float decayed = m * ref[k][j];
        ref[k][j] = decayed + g[j];
        EXPECT_EQ(next[j], ref[k][j]);
      }
      lm.Commit(k, {}, {});
      for (size_t j = 0; j < g.size(); ++j) EXPECT_EQ(lm.velocity(k)[j], ref[k][j]);
    }
  }
  EXPECT_EQ(lm.masked(), 0u);
}

TEST(LocalMomentum, PrepareAloneChangesNothing) {
  LocalMomentum lm(0.5, {4});
  std::vector<float> g = {1, 2, 3, 4};
  lm.Prepare(0, g);
  lm.Commit(0, {}, {});
  std::vector<float> nan = {1, NAN, 3, 4};
  auto next = lm.Prepare(0, nan);  // a step that is then skipped: no Commit
  EXPECT_TRUE(std::isnan(next[1]));
  for (size_t j = 0; j < 4; ++j) EXPECT_EQ(lm.velocity(0)[j], g[j]);
}

TEST(LocalMomentum, MasksExactlyWhatTheFrameSent) {
  const size_t n = 1203;  // a short last bin
  for (ValueMode values : {ValueMode::kTernary, ValueMode::kFp32}) {
    CodecConfig config;
    config.bin_size = 50;
    config.values = values;
    auto made = Compressor::Create(config, 0, n);
    ASSERT_TRUE(made.ok());
    Compressor& c = **made;
    const float m = 0.9f;
    LocalMomentum lm(m, {n});
    std::vector<float> u(n, 0.0f);  // the reference velocity
    std::mt19937 rng(7);
    uint64_t sent_total = 0;
    for (int step = 0; step < 12; ++step) {
      std::vector<float> g = Gradient(rng, n);
      std::vector<float> before(c.residue().begin(), c.residue().end());
      auto next = lm.Prepare(0, g);
      std::vector<uint8_t> frame;
      ASSERT_TRUE(c.Compress(next, &frame).ok());
      lm.Commit(0, before, c.residue());
      std::vector<float> decoded(n, 0.0f);
      ASSERT_TRUE(DecodeAccumulate(frame, decoded).ok());
      size_t sent = 0;
      for (size_t j = 0; j < n; ++j) {
        float decayed = m * u[j];
        u[j] = decayed + g[j];
        if (decoded[j] != 0.0f) {
          u[j] = 0.0f;
          ++sent;
        }
        ASSERT_EQ(lm.velocity(0)[j], u[j]) << "step " << step << " element " << j;
      }
      EXPECT_GT(sent, 0u);
      EXPECT_LT(sent, n);
      sent_total += sent;
    }
    EXPECT_EQ(lm.masked(), sent_total);
  }
}

TEST(LocalMomentum, SavesAndLoadsAndRefusesWhatDoesNotFit) {
  LocalMomentum a(0.9, {3, 2});
  std::vector<float> g3 = {1, -2, 3}, g2 = {0.5f, 4};
  a.Prepare(0, g3);
  a.Commit(0, {}, {});
  a.Prepare(1, g2);
  a.Commit(1, {}, {});
  std::vector<uint8_t> bytes = a.Save();
  LocalMomentum b(0.9, {3, 2});
  ASSERT_TRUE(b.Load(bytes, "test").ok());
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(b.velocity(0)[j], g3[j]);
  for (size_t j = 0; j < 2; ++j) EXPECT_EQ(b.velocity(1)[j], g2[j]);

  LocalMomentum other_shape(0.9, {3, 3});
  Status st = other_shape.Load(bytes, "ck");
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("tensor 1"), std::string::npos) << st.message();
  LocalMomentum fewer(0.9, {3});
  EXPECT_EQ(fewer.Load(bytes, "ck").code(), StatusCode::kCorruption);
  for (size_t cut = 0; cut < bytes.size(); cut += 5) {
    LocalMomentum c(0.9, {3, 2});
    c.Prepare(0, g3);
    c.Commit(0, {}, {});
    Status s = c.Load(std::span<const uint8_t>(bytes.data(), cut), "ck");
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << cut;
    for (size_t j = 0; j < 3; ++j) EXPECT_EQ(c.velocity(0)[j], g3[j]) << "changed by a failed load";
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_EQ(b.Load(longer, "ck").code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace adacomp::train
