// LocalOptimizer (include/adacomp/local_optimizer.h) against plain scalar
// loops written here: the velocity in float32 in torch's order, Adam in
// float32 in the documented order (bit for bit) and in double (the textbook
// formulas, to rounding), the frozen second moment, the masking checked
// against the decoded frames, Commit/Drop, and the saved state with every
// way it can fail to fit.
#include "adacomp/local_optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "adacomp/codec.h"
#include "local_optimizer_test_util.h"

namespace adacomp {
namespace {

using namespace local_optimizer_test;  // NOLINT: the tests' helpers

// SGD: u = m u + (g + wd w), each product and sum rounded on its own; a
// tensor's first step is g + wd w itself (a negative zero stays one).
TEST(LocalOptimizer, SgdIsTheMomentumRecursionBitForBit) {
  const float m = 0.9f, wd = 5e-4f;
  auto lo = Make(Sgd(m), {5, 3});
  std::mt19937 rng(1);
  std::vector<float> w = Gradient(rng, 5);
  std::vector<std::vector<float>> ref(2);
  for (int step = 0; step < 6; ++step) {
    for (size_t k = 0; k < 2; ++k) {
      const size_t n = k == 0 ? 5 : 3;
      std::vector<float> g = Gradient(rng, n);
      if (step == 0) g[1] = -0.0f;
      auto next = k == 0 ? lo->Prepare(k, g, w, wd) : lo->Prepare(k, g);
      ASSERT_TRUE(next.ok()) << next.status().ToString();
      for (size_t j = 0; j < n; ++j) {
        float in = g[j];
        if (k == 0) {
          const float decay = wd * w[j];
          in = decay + g[j];
        }
        float want = in;
        if (step > 0) {
          const float decayed = m * ref[k][j];
          want = decayed + in;
        }
        if (step == 0) ref[k].push_back(want);
        ref[k][j] = want;
        EXPECT_TRUE(SameBits(next.value()[j], want)) << "step " << step << " k " << k;
      }
    }
    lo->Commit();
    for (size_t k = 0; k < 2; ++k) {
      for (size_t j = 0; j < ref[k].size(); ++j) EXPECT_TRUE(SameBits(lo->first(k)[j], ref[k][j]));
    }
  }
  EXPECT_TRUE(std::signbit(lo->first(1)[1]) == std::signbit(ref[1][1]));
  EXPECT_EQ(lo->steps(), 6);
  EXPECT_EQ(lo->masked(), 0u);
}

// A step dropped (or only prepared) changes no moment and no count; a
// tensor left out of a step keeps its moments.
TEST(LocalOptimizer, OnlyCommitChangesTheMoments) {
  auto lo = Make(Sgd(0.5), {4, 2});
  std::vector<float> g = {1, 2, 3, 4}, h = {5, 6};
  ASSERT_TRUE(lo->Prepare(0, g).ok());
  ASSERT_TRUE(lo->Prepare(1, h).ok());
  lo->Commit();
  std::vector<float> nan = {1, NAN, 3, 4};
  auto next = lo->Prepare(0, nan);
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(std::isnan(next.value()[1]));
  lo->Drop();
  EXPECT_FALSE(lo->prepared(0));
  for (size_t j = 0; j < 4; ++j) EXPECT_EQ(lo->first(0)[j], g[j]);
  EXPECT_EQ(lo->steps(), 1);
  ASSERT_TRUE(lo->Prepare(0, g).ok());  // tensor 1 unused this step
  lo->Commit();
  for (size_t j = 0; j < 4; ++j) EXPECT_EQ(lo->first(0)[j], 0.5f * g[j] + g[j]);
  for (size_t j = 0; j < 2; ++j) EXPECT_EQ(lo->first(1)[j], h[j]);
  EXPECT_EQ(lo->steps(), 2);
}

// Adam in float32, in the documented order, bit for bit; and to rounding
// the textbook formulas in double.
TEST(LocalOptimizer, AdamIsTheBiasCorrectedRatio) {
  const double b1 = 0.9, b2 = 0.99, eps = 1e-6;
  const size_t n = 64;
  auto lo = Make(Adam(b1, b2, eps), {n});
  std::vector<float> m(n), v(n);
  std::vector<double> md(n, 0.0), vd(n, 0.0);
  std::mt19937 rng(3);
  for (int t = 1; t <= 9; ++t) {
    std::vector<float> g = Gradient(rng, n);
    if (t == 4) g[5] = 0.0f;  // a zero gradient still moves by the first moment
    auto d = lo->Prepare(0, g);
    ASSERT_TRUE(d.ok());
    const float bc1 = static_cast<float>(1.0 - std::pow(b1, t));
    const float bc2 = static_cast<float>(1.0 - std::pow(b2, t));
    for (size_t j = 0; j < n; ++j) {
      const float gm = static_cast<float>(1.0 - b1) * g[j];
      const float g2 = static_cast<float>(1.0 - b2) * g[j];
      const float gv = g2 * g[j];
      const float mj = t == 1 ? 0.0f + gm : static_cast<float>(b1) * m[j] + gm;
      const float vj = t == 1 ? 0.0f + gv : static_cast<float>(b2) * v[j] + gv;
      const float num = mj / bc1;
      const float root = std::sqrt(vj / bc2);
      const float den = root + static_cast<float>(eps);
      EXPECT_TRUE(SameBits(d.value()[j], num / den)) << "t " << t << " j " << j;
      m[j] = mj;
      v[j] = vj;
      md[j] = b1 * md[j] + (1 - b1) * g[j];
      vd[j] = b2 * vd[j] + (1 - b2) * double(g[j]) * g[j];
      const double want =
          (md[j] / (1 - std::pow(b1, t))) / (std::sqrt(vd[j] / (1 - std::pow(b2, t))) + eps);
      EXPECT_NEAR(d.value()[j], want, 1e-4 * std::abs(want) + 1e-6) << "t " << t;
    }
    lo->Commit();
    for (size_t j = 0; j < n; ++j) {
      EXPECT_TRUE(SameBits(lo->first(0)[j], m[j]));
      EXPECT_TRUE(SameBits(lo->second(0)[j], v[j]));
    }
  }
  // The first step's |d| is about 1 for every non-zero gradient.
  auto fresh = Make(Adam(b1, b2, eps), {3});
  std::vector<float> g = {1e-4f, -3.0f, 50.0f};
  auto d = fresh->Prepare(0, g);
  EXPECT_NEAR(d.value()[0], 1.0, 0.02);
  EXPECT_NEAR(d.value()[1], -1.0, 1e-5);
  EXPECT_NEAR(d.value()[2], 1.0, 1e-5);
}

// With freeze_second_moment_after = 3: steps 4 on keep the second moment
// of step 3 and its bias correction, while the first moment goes on; a
// tensor first seen after the freeze runs plain Adam from its own step 1
// (torch's Adam counts each parameter's steps).
TEST(LocalOptimizer, AdamFreezesItsSecondMoment) {
  const double b1 = 0.8, b2 = 0.9, eps = 1e-8;
  auto lo = Make(Adam(b1, b2, eps, 3), {32, 8});
  std::mt19937 rng(5);
  std::vector<double> m(32, 0.0), v(32, 0.0);
  std::vector<float> v_at_freeze;
  for (int t = 1; t <= 7; ++t) {
    std::vector<float> g = Gradient(rng, 32);
    auto d = lo->Prepare(0, g);
    ASSERT_TRUE(d.ok());
    const int t_v = std::min(t, 3);
    for (size_t j = 0; j < 32; ++j) {
      m[j] = b1 * m[j] + (1 - b1) * g[j];
      if (t <= 3) v[j] = b2 * v[j] + (1 - b2) * double(g[j]) * g[j];
      const double want =
          (m[j] / (1 - std::pow(b1, t))) / (std::sqrt(v[j] / (1 - std::pow(b2, t_v))) + eps);
      EXPECT_NEAR(d.value()[j], want, 1e-4 * std::abs(want) + 1e-6) << "t " << t;
    }
    if (t >= 6) {
      // Tensor 1 starts after the freeze: plain Adam, its first step (|d|
      // about 1); at its second, its v frozen with its own bias correction
      // (m_hat 2, v_hat 4: again 1).
      std::vector<float> h(8, 2.0f);
      auto e = lo->Prepare(1, h);
      for (float x : e.value()) EXPECT_NEAR(x, 1.0, 1e-5);
    }
    lo->Commit();
    if (t == 3) v_at_freeze.assign(lo->second(0).begin(), lo->second(0).end());
    if (t > 3) {
      for (size_t j = 0; j < 32; ++j) EXPECT_TRUE(SameBits(lo->second(0)[j], v_at_freeze[j]));
    }
  }
  EXPECT_EQ(lo->second(1).size(), 8u);
  EXPECT_EQ(lo->steps(), 7);
  EXPECT_EQ(lo->steps(0), 7);
  EXPECT_EQ(lo->second_steps(0), 3);
  EXPECT_EQ(lo->steps(1), 2);  // steps 6 and 7 (7: the frozen path, its v from step 6)
  EXPECT_EQ(lo->second_steps(1), 1);
}

// SGD zeroes the velocity of exactly the elements whose decoded frame is
// non-zero, and counts them at Commit; Adam masks nothing.
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
    auto lo = Make(Sgd(m), {n});
    std::vector<float> u(n, 0.0f);  // the reference velocity
    std::mt19937 rng(7);
    uint64_t sent_total = 0;
    for (int step = 0; step < 12; ++step) {
      std::vector<float> g = Gradient(rng, n);
      auto next = lo->Prepare(0, g);
      ASSERT_TRUE(next.ok());
      std::vector<uint8_t> frame;
      ASSERT_TRUE(c.Compress(next.value(), &frame).ok());
      ASSERT_TRUE(lo->MaskSent(0, frame).ok());
      lo->Commit();
      std::vector<float> decoded(n, 0.0f);
      ASSERT_TRUE(DecodeAccumulate(frame, decoded).ok());
      size_t sent = 0;
      for (size_t j = 0; j < n; ++j) {
        const float decayed = m * u[j];
        u[j] = step == 0 ? g[j] : decayed + g[j];
        if (decoded[j] != 0.0f) {
          u[j] = 0.0f;
          ++sent;
        }
        ASSERT_EQ(lo->first(0)[j], u[j]) << "step " << step << " element " << j;
      }
      EXPECT_GT(sent, 0u);
      EXPECT_LT(sent, n);
      sent_total += sent;
    }
    EXPECT_EQ(lo->masked(), sent_total);
  }
  auto adam = Make(Adam(0.9, 0.999, 1e-8), {n});
  std::mt19937 rng(8);
  std::vector<float> g = Gradient(rng, n);
  auto d = adam->Prepare(0, g);
  auto made = Compressor::Create(CodecConfig{}, 0, n);
  std::vector<uint8_t> frame;
  ASSERT_TRUE((*made)->Compress(d.value(), &frame).ok());
  std::vector<float> before(d.value().begin(), d.value().end());
  ASSERT_TRUE(adam->MaskSent(0, frame).ok());
  adam->Commit();
  EXPECT_EQ(adam->masked(), 0u);
}

TEST(LocalOptimizer, RefusesWhatItCannotDoAndChangesNothing) {
  EXPECT_FALSE(LocalOptimizer::Create(Sgd(1.0)).ok());
  EXPECT_FALSE(LocalOptimizer::Create(Sgd(-0.1)).ok());
  EXPECT_FALSE(LocalOptimizer::Create(Adam(0.9, 1.0, 1e-8)).ok());
  EXPECT_FALSE(LocalOptimizer::Create(Adam(0.9, 0.99, 0.0)).ok());
  EXPECT_FALSE(LocalOptimizer::Create(Adam(0.9, 0.99, 1e-8, -1)).ok());
  LocalOptimizerSettings frozen_sgd = Sgd(0.9);
  frozen_sgd.freeze_second_moment_after = 2;
  EXPECT_FALSE(LocalOptimizer::Create(frozen_sgd).ok());

  auto lo = Make(Sgd(0.9), {3});
  std::vector<float> g = {1, 2, 3}, w = {1, 1, 1};
  ASSERT_TRUE(lo->Prepare(0, g).ok());
  lo->Commit();
  const std::vector<float> two = {1, 2};
  EXPECT_EQ(lo->Prepare(0, two).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lo->Prepare(1, g).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lo->Prepare(0, g, {}, 0.1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lo->Prepare(0, g, w, -0.1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lo->Prepare(0, g, w, NAN).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(lo->prepared(0));
  EXPECT_EQ(lo->MaskSent(0, {}).code(), StatusCode::kInvalidArgument);  // nothing prepared
  ASSERT_TRUE(lo->Prepare(0, g).ok());
  const std::vector<uint8_t> junk = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_FALSE(lo->MaskSent(0, junk).ok());
  lo->Commit();
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(lo->first(0)[j], 0.9f * g[j] + g[j]);
  auto adam = Make(Adam(0.9, 0.99, 1e-8), {3});
  EXPECT_EQ(adam->Prepare(0, g, {}, 0.1).status().code(), StatusCode::kInvalidArgument);
}

// adam_step_scale multiplies d after it is rounded: the same moments, and
// each step's bits those of s x d.
TEST(LocalOptimizer, AdamStepScaleMultipliesTheStepOnly) {
  const size_t n = 40;
  LocalOptimizerSettings scaled = Adam(0.9, 0.99, 1e-8);
  scaled.adam_step_scale = 2.0;
  auto a = Make(Adam(0.9, 0.99, 1e-8), {n});
  auto b = Make(scaled, {n});
  std::mt19937 rng(5);
  for (int t = 1; t <= 5; ++t) {
    const std::vector<float> g = Gradient(rng, n);
    auto da = a->Prepare(0, g);
    auto db = b->Prepare(0, g);
    ASSERT_TRUE(da.ok() && db.ok());
    for (size_t j = 0; j < n; ++j) {
      EXPECT_TRUE(SameBits(db.value()[j], 2.0f * da.value()[j])) << "t " << t << " j " << j;
    }
    a->Commit();
    b->Commit();
    for (size_t j = 0; j < n; ++j) {
      EXPECT_TRUE(SameBits(a->first(0)[j], b->first(0)[j]));
      EXPECT_TRUE(SameBits(a->second(0)[j], b->second(0)[j]));
    }
  }
  for (double bad : {0.0, -1.0, double(NAN), double(INFINITY)}) {
    LocalOptimizerSettings s = Adam(0.9, 0.99, 1e-8);
    s.adam_step_scale = bad;
    EXPECT_FALSE(LocalOptimizer::Create(s).ok()) << bad;
  }
  LocalOptimizerSettings sgd = Sgd(0.9);
  sgd.adam_step_scale = 2.0;
  EXPECT_FALSE(LocalOptimizer::Create(sgd).ok());
  LocalOptimizerSettings frozen = Adam(0.9, 0.99, 1e-8, 3);
  frozen.adam_step_scale = 2.0;
  EXPECT_FALSE(LocalOptimizer::Create(frozen).ok());
}

// Why the DDP hook's one call scales by sqrt(P): P learners, each with its
// own Adam, whose steps are averaged, against Adam (in double, written here)
// on the averaged gradient. Where each gradient is mostly batch noise, the
// average of the learners' steps is about 1/sqrt(P) of Adam's on the
// average, and sqrt(P) gives it back; where the learners' gradients agree
// (no noise), the scale overshoots by sqrt(P).
TEST(LocalOptimizer, AdamStepScaleSqrtPMatchesAdamOnTheAverageWhereNoiseDominates) {
  const int P = 4, T = 300;
  const size_t n = 64;
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  for (const double noise : {1.0, 0.0}) {
    std::vector<std::unique_ptr<LocalOptimizer>> own, scaled;
    LocalOptimizerSettings s = Adam(b1, b2, eps);
    for (int r = 0; r < P; ++r) own.push_back(Make(s, {n}));
    s.adam_step_scale = std::sqrt(double(P));
    for (int r = 0; r < P; ++r) scaled.push_back(Make(s, {n}));
    std::vector<double> m(n, 0.0), v(n, 0.0);
    std::mt19937 rng(11);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<double> signal(n);
    for (auto& x : signal) x = 0.1 * normal(rng);
    double sq_own = 0, sq_scaled = 0, sq_ref = 0;
    for (int t = 1; t <= T; ++t) {
      std::vector<std::vector<float>> g(P, std::vector<float>(n));
      std::vector<double> avg(n, 0.0);
      for (int r = 0; r < P; ++r) {
        for (size_t j = 0; j < n; ++j) {
          g[r][j] = static_cast<float>(signal[j] + noise * normal(rng));
          avg[j] += double(g[r][j]) / P;
        }
      }
      std::vector<double> mean_own(n, 0.0), mean_scaled(n, 0.0);
      for (int r = 0; r < P; ++r) {
        auto d1 = own[r]->Prepare(0, g[r]);
        auto d2 = scaled[r]->Prepare(0, g[r]);
        ASSERT_TRUE(d1.ok() && d2.ok());
        for (size_t j = 0; j < n; ++j) {
          mean_own[j] += double(d1.value()[j]) / P;
          mean_scaled[j] += double(d2.value()[j]) / P;
        }
        own[r]->Commit();
        scaled[r]->Commit();
      }
      for (size_t j = 0; j < n; ++j) {
        m[j] = b1 * m[j] + (1 - b1) * avg[j];
        v[j] = b2 * v[j] + (1 - b2) * avg[j] * avg[j];
        const double ref =
            (m[j] / (1 - std::pow(b1, t))) / (std::sqrt(v[j] / (1 - std::pow(b2, t))) + eps);
        if (t > T / 2) {
          sq_ref += ref * ref;
          sq_own += mean_own[j] * mean_own[j];
          sq_scaled += mean_scaled[j] * mean_scaled[j];
        }
      }
    }
    const double own_ratio = std::sqrt(sq_own / sq_ref);
    const double scaled_ratio = std::sqrt(sq_scaled / sq_ref);
    if (noise > 0) {
      EXPECT_LT(own_ratio, 0.7) << "noise-dominated: each learner's own steps are smaller";
      EXPECT_GT(scaled_ratio, 0.85);
      EXPECT_LT(scaled_ratio, 1.25);
    } else {
      EXPECT_NEAR(own_ratio, 1.0, 1e-4) << "the same gradient everywhere: Adam itself";
      EXPECT_NEAR(scaled_ratio, 2.0, 2e-4);
    }
  }
}

// A frame of a codec that keeps no residue carried the whole step: SGD masks
// nothing for it (dense, TernGrad), though its values are non-zero, and masks
// every carried element of a codec with a residue (onebit: all of them).
TEST(LocalOptimizer, CodecsWithoutResidueMaskNothing) {
  const size_t n = 600;
  std::mt19937 rng(9);
  const std::vector<float> g = Gradient(rng, n);
  for (Codec codec : {Codec::kDense, Codec::kTernGrad, Codec::kOneBit}) {
    SCOPED_TRACE(CodecName(codec));
    CodecConfig config;
    config.codec = codec;
    auto made = Compressor::Create(config, 0, n);
    ASSERT_TRUE(made.ok());
    auto lo = Make(Sgd(0.9), {n});
    auto step = lo->Prepare(0, g);
    ASSERT_TRUE(step.ok());
    std::vector<uint8_t> frame;
    ASSERT_TRUE((*made)->Compress(step.value(), &frame).ok());
    ASSERT_TRUE(lo->MaskSent(0, frame).ok());
    lo->Commit();
    size_t zeros = 0;
    for (size_t j = 0; j < n; ++j) zeros += lo->first(0)[j] == 0.0f;
    if (codec == Codec::kOneBit) {
      EXPECT_EQ(lo->masked(), n);
      EXPECT_EQ(zeros, n);
    } else {
      EXPECT_EQ(lo->masked(), 0u);
      EXPECT_EQ(zeros, 0u);
    }
  }
}

TEST(LocalOptimizer, SavesAndLoadsAndRefusesWhatDoesNotFit) {
  for (const LocalOptimizerSettings& s : {Sgd(0.9), Adam(0.9, 0.99, 1e-8)}) {
    auto a = Make(s, {3, 2, 4});  // tensor 2 never started
    std::vector<float> g3 = {1, -2, 3}, g2 = {0.5f, 4};
    ASSERT_TRUE(a->Prepare(0, g3).ok());
    ASSERT_TRUE(a->Prepare(1, g2).ok());
    a->Commit();
    std::vector<uint8_t> bytes = a->Save();
    auto b = Make(s, {3, 2, 4});
    ASSERT_TRUE(b->Load(bytes, "test").ok());
    EXPECT_EQ(b->steps(), 1);
    EXPECT_FALSE(b->started(2));
    for (size_t k = 0; k < 2; ++k) {
      ASSERT_TRUE(b->started(k));
      for (size_t j = 0; j < a->first(k).size(); ++j) EXPECT_EQ(b->first(k)[j], a->first(k)[j]);
      for (size_t j = 0; j < a->second(k).size(); ++j) {
        EXPECT_EQ(b->second(k)[j], a->second(k)[j]);
      }
    }
    // The next step agrees bit for bit.
    auto x = a->Prepare(0, g3);
    auto y = b->Prepare(0, g3);
    for (size_t j = 0; j < 3; ++j) EXPECT_TRUE(SameBits(x.value()[j], y.value()[j]));

    const LocalOptimizerSettings other = s.kind == Kind::kSgd ? Adam(0.9, 0.99, 1e-8) : Sgd(0.9);
    Status st = Make(other, {3, 2, 4})->Load(bytes, "ck");
    EXPECT_EQ(st.code(), StatusCode::kCorruption);
    EXPECT_NE(st.message().find("another optimizer"), std::string::npos) << st.message();
    st = Make(s, {3, 3, 4})->Load(bytes, "ck");
    EXPECT_EQ(st.code(), StatusCode::kCorruption);
    EXPECT_NE(st.message().find("tensor 1"), std::string::npos) << st.message();
    EXPECT_EQ(Make(s, {3, 2})->Load(bytes, "ck").code(), StatusCode::kCorruption);
    for (size_t cut = 0; cut < bytes.size(); cut += 3) {
      auto c = Make(s, {3, 2, 4});
      ASSERT_TRUE(c->Prepare(0, g3).ok());
      c->Commit();
      const std::vector<float> kept(c->first(0).begin(), c->first(0).end());
      Status cs = c->Load(std::span<const uint8_t>(bytes.data(), cut), "ck");
      EXPECT_EQ(cs.code(), StatusCode::kCorruption) << cut;
      EXPECT_EQ(c->steps(), 1);
      EXPECT_FALSE(c->started(1)) << "changed by a failed load";
      for (size_t j = 0; j < 3; ++j) EXPECT_EQ(c->first(0)[j], kept[j]);
    }
    std::vector<uint8_t> longer = bytes;
    longer.push_back(0);
    EXPECT_EQ(b->Load(longer, "ck").code(), StatusCode::kCorruption);
  }
}

TEST(LocalOptimizer, SetMomentsAndReset) {
  auto lo = Make(Adam(0.9, 0.99, 1e-8), {2});
  const std::vector<float> m = {1, 2}, v = {3, 4}, one = {1};
  EXPECT_EQ(lo->SetMoments(0, m, one, 1, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lo->SetMoments(1, m, v, 1, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lo->SetMoments(0, m, v, 0, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lo->SetMoments(0, m, v, 2, 3).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(lo->started(0));
  ASSERT_TRUE(lo->SetMoments(0, m, v, 5, 3).ok());
  EXPECT_EQ(lo->second(0)[1], 4.0f);
  EXPECT_EQ(lo->steps(0), 5);
  EXPECT_EQ(lo->second_steps(0), 3);
  lo->Reset(7, 2);
  EXPECT_FALSE(lo->started(0));
  EXPECT_EQ(lo->steps(), 7);
  EXPECT_EQ(lo->masked(), 2u);
  auto sgd = Make(Sgd(0.9), {2});
  EXPECT_EQ(sgd->SetMoments(0, m, v, 1, 1).code(), StatusCode::kInvalidArgument);  // no v
  EXPECT_EQ(sgd->SetMoments(0, m, {}, 2, 1).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(sgd->SetMoments(0, m, {}, 2, 2).ok());
}

}  // namespace
}  // namespace adacomp
