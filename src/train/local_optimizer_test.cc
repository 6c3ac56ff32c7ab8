// LocalOptimizer (--local-optimizer) against plain loops written here: the
// velocity recursion, Adam's step in double precision, and the masking
// checked against the decoded frames (an element is sent when the frame
// carries a value for it), not against the residue test the class itself
// uses.
#include "local_optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "adacomp/codec.h"

namespace adacomp::train {
namespace {

LocalOptimizer::Settings Sgd(double momentum) {
  LocalOptimizer::Settings s;
  s.momentum = momentum;
  return s;
}

std::vector<float> Gradient(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (auto& v : g) v = normal(rng);
  return g;
}

TEST(LocalOptimizer, WithoutAResidueIsTheMomentumRecursion) {
  const float m = 0.9f;
  LocalOptimizer lm(Sgd(m), {5, 3});
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
      for (size_t j = 0; j < g.size(); ++j) EXPECT_EQ(lm.first(k)[j], ref[k][j]);
    }
  }
  EXPECT_EQ(lm.masked(), 0u);
}

TEST(LocalOptimizer, PrepareAloneChangesNothing) {
  LocalOptimizer lm(Sgd(0.5), {4});
  std::vector<float> g = {1, 2, 3, 4};
  lm.Prepare(0, g);
  lm.Commit(0, {}, {});
  std::vector<float> nan = {1, NAN, 3, 4};
  auto next = lm.Prepare(0, nan);  // a step that is then skipped: no Commit
  EXPECT_TRUE(std::isnan(next[1]));
  for (size_t j = 0; j < 4; ++j) EXPECT_EQ(lm.first(0)[j], g[j]);
}

// Adam's step against the textbook formulas in double precision, with the
// step count advancing only through EndStep(); a masking call changes no
// Adam moment; the state survives Save/Load.
TEST(LocalOptimizer, AdamStepIsTheBiasCorrectedRatio) {
  LocalOptimizer::Settings st;
  st.adam = true;
  st.beta1 = 0.9;
  st.beta2 = 0.99;
  st.eps = 1e-6;
  const size_t n = 64;
  LocalOptimizer lo(st, {n});
  std::vector<double> m(n, 0.0), v(n, 0.0);
  std::mt19937 rng(3);
  for (int t = 1; t <= 9; ++t) {
    std::vector<float> g = Gradient(rng, n);
    if (t == 4) g[5] = 0.0f;  // a zero gradient still moves by the first moment
    auto d = lo.Prepare(0, g);
    for (size_t j = 0; j < n; ++j) {
      double m1 = st.beta1 * m[j] + (1 - st.beta1) * g[j];
      double v1 = st.beta2 * v[j] + (1 - st.beta2) * double(g[j]) * g[j];
      double want = (m1 / (1 - std::pow(st.beta1, t))) /
                    (std::sqrt(v1 / (1 - std::pow(st.beta2, t))) + st.eps);
      EXPECT_NEAR(d[j], want, 1e-4 * std::abs(want) + 1e-6) << "t " << t << " j " << j;
      m[j] = m1;
      v[j] = v1;
    }
    // A residue that "sent" everything masks nothing under Adam.
    std::vector<float> zeros(n, 0.0f), ones(n, 1.0f);
    lo.Commit(0, zeros, ones);
    lo.EndStep();
    EXPECT_EQ(lo.steps(), t);
    for (size_t j = 0; j < n; ++j) {
      EXPECT_NEAR(lo.first(0)[j], m[j], 1e-5 * std::abs(m[j]) + 1e-7);
      EXPECT_NEAR(lo.second(0)[j], v[j], 1e-5 * std::abs(v[j]) + 1e-9);
    }
  }
  EXPECT_EQ(lo.masked(), 0u);
  // The first step's |d| is about 1 for every non-zero gradient (m_hat = g,
  // v_hat = g^2): the pace Adam gives each element whatever its scale.
  LocalOptimizer fresh(st, {3});
  std::vector<float> g = {1e-4f, -3.0f, 50.0f};
  auto d = fresh.Prepare(0, g);
  EXPECT_NEAR(d[0], 1.0, 0.02);
  EXPECT_NEAR(d[1], -1.0, 1e-5);
  EXPECT_NEAR(d[2], 1.0, 1e-5);

  LocalOptimizer copy(st, {n});
  ASSERT_TRUE(copy.Load(lo.Save(), "test").ok());
  EXPECT_EQ(copy.steps(), lo.steps());
  std::vector<float> g2 = Gradient(rng, n);
  auto a = lo.Prepare(0, g2);
  auto b = copy.Prepare(0, g2);
  for (size_t j = 0; j < n; ++j) EXPECT_EQ(a[j], b[j]);
  // An SGD state does not load into an Adam one (no second moments).
  LocalOptimizer sgd(Sgd(0.9), {n});
  EXPECT_EQ(copy.Load(sgd.Save(), "ck").code(), StatusCode::kCorruption);
}

TEST(LocalOptimizer, MasksExactlyWhatTheFrameSent) {
  const size_t n = 1203;  // a short last bin
  for (ValueMode values : {ValueMode::kTernary, ValueMode::kFp32}) {
    CodecConfig config;
    config.bin_size = 50;
    config.values = values;
    auto made = Compressor::Create(config, 0, n);
    ASSERT_TRUE(made.ok());
    Compressor& c = **made;
    const float m = 0.9f;
    LocalOptimizer lm(Sgd(m), {n});
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
        ASSERT_EQ(lm.first(0)[j], u[j]) << "step " << step << " element " << j;
      }
      EXPECT_GT(sent, 0u);
      EXPECT_LT(sent, n);
      sent_total += sent;
    }
    EXPECT_EQ(lm.masked(), sent_total);
  }
}

TEST(LocalOptimizer, SavesAndLoadsAndRefusesWhatDoesNotFit) {
  LocalOptimizer a(Sgd(0.9), {3, 2});
  std::vector<float> g3 = {1, -2, 3}, g2 = {0.5f, 4};
  a.Prepare(0, g3);
  a.Commit(0, {}, {});
  a.Prepare(1, g2);
  a.Commit(1, {}, {});
  std::vector<uint8_t> bytes = a.Save();
  LocalOptimizer b(Sgd(0.9), {3, 2});
  ASSERT_TRUE(b.Load(bytes, "test").ok());
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(b.first(0)[j], g3[j]);
  for (size_t j = 0; j < 2; ++j) EXPECT_EQ(b.first(1)[j], g2[j]);

  LocalOptimizer other_shape(Sgd(0.9), {3, 3});
  Status st = other_shape.Load(bytes, "ck");
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("buffer 1"), std::string::npos) << st.message();
  LocalOptimizer fewer(Sgd(0.9), {3});
  EXPECT_EQ(fewer.Load(bytes, "ck").code(), StatusCode::kCorruption);
  for (size_t cut = 0; cut < bytes.size(); cut += 5) {
    LocalOptimizer c(Sgd(0.9), {3, 2});
    c.Prepare(0, g3);
    c.Commit(0, {}, {});
    Status s = c.Load(std::span<const uint8_t>(bytes.data(), cut), "ck");
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << cut;
    for (size_t j = 0; j < 3; ++j) EXPECT_EQ(c.first(0)[j], g3[j]) << "changed by a failed load";
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_EQ(b.Load(longer, "ck").code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace adacomp::train
