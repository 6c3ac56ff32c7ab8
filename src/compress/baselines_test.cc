// The baselines (dense, topk, threshold, onebit, terngrad) against simple
// references, and conservation for every codec with a residue.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "adacomp/codec.h"
#include "core/test_util.h"
#include "wire/frame.h"

namespace adacomp {
namespace {

std::unique_ptr<Compressor> Make(const CodecConfig& cfg, uint64_t n, uint32_t id = 1) {
  auto r = Compressor::Create(cfg, id, n);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

std::vector<float> Decode(const std::vector<uint8_t>& frame, size_t n) {
  std::vector<float> out(n, 0.0f);
  const Status s = DecodeAccumulate(frame, out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

CodecConfig Config(Codec c) { return testing::TestCodecConfig(c, 42); }

TEST(DenseTest, SendsEverythingExactly) {
  auto comp = Make(Config(Codec::kDense), 5);
  std::vector<float> g = {1.5f, -2.0f, 0.0f, 1e-30f, -3e38f};
  std::vector<uint8_t> frame;
  CompressStats st;
  ASSERT_TRUE(comp->Compress(g, &frame, &st).ok());
  EXPECT_EQ(Decode(frame, 5), g);
  EXPECT_TRUE(comp->residue().empty());
  EXPECT_EQ(st.selected, 5u);
  EXPECT_EQ(st.frame_bytes, frame.size());
  EXPECT_LT(st.CompressionRate(), 1.0);
}

TEST(TopKTest, MatchesReference) {
  for (size_t n : {1, 2, 49, 50, 1001, 30000}) {
    for (double density : {0.001, 0.02, 0.5, 1.0}) {
      CodecConfig cfg = Config(Codec::kTopK);
      cfg.density = density;
      auto comp = Make(cfg, n);
      std::vector<float> r(n, 0.0f);
      const size_t k =
          std::min(n, std::max<size_t>(1, static_cast<size_t>(std::ceil(density * n))));
      for (int step = 0; step < 3; ++step) {
        std::vector<float> dw = testing::GradientLike(n, step + 10 * n);
        if (n > 10) {  // ties, broken by index
          dw[3] = dw[7] = 1.0f;
          dw[5] = -1.0f;
        }
        std::vector<float> g(n);
        for (size_t j = 0; j < n; ++j) g[j] = r[j] + dw[j];
        std::vector<size_t> order(n);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return std::fabs(g[a]) > std::fabs(g[b]); });
        std::vector<float> want(n, 0.0f);
        for (size_t e = 0; e < k; ++e) want[order[e]] = g[order[e]];
        for (size_t j = 0; j < n; ++j) r[j] = g[j] - want[j];
        std::vector<uint8_t> frame;
        CompressStats st;
        ASSERT_TRUE(comp->Compress(dw, &frame, &st).ok());
        EXPECT_EQ(st.selected, k);
        wire::Frame f;
        ASSERT_TRUE(wire::DecodeFrame(frame, {}, &f).ok());
        ASSERT_EQ(f.indices.size(), k);
        std::vector<float> got = Decode(frame, n);
        for (size_t j = 0; j < n; ++j) {
          ASSERT_EQ(got[j], want[j]) << "n=" << n << " d=" << density << " j=" << j;
          ASSERT_EQ(comp->residue()[j], r[j]);
        }
      }
    }
  }
}

TEST(ThresholdTest, MatchesReference) {
  const size_t n = 5003;
  const float tau = 2e-3f;
  auto comp = Make(Config(Codec::kThreshold), n);
  std::vector<float> r(n, 0.0f);
  for (int step = 0; step < 4; ++step) {
    std::vector<float> dw = testing::GradientLike(n, 77 + step);
    std::vector<uint8_t> frame;
    ASSERT_TRUE(comp->Compress(dw, &frame).ok());
    std::vector<float> got = Decode(frame, n);
    for (size_t j = 0; j < n; ++j) {
      const float g = r[j] + dw[j];
      const float q = std::fabs(g) >= tau ? (g < 0 ? -tau : tau) : 0.0f;
      r[j] = g - q;
      ASSERT_EQ(got[j], q) << j;
      ASSERT_EQ(comp->residue()[j], r[j]) << j;
    }
  }
}

TEST(OneBitTest, MatchesReference) {
  for (size_t n : {1, 7, 8, 9, 1000, 4097}) {
    auto comp = Make(Config(Codec::kOneBit), n);
    std::vector<float> r(n, 0.0f);
    for (int step = 0; step < 3; ++step) {
      std::vector<float> dw = testing::GradientLike(n, 5 + step);
      std::vector<float> g(n);
      double ps = 0, ns = 0;
      size_t pn = 0, nn = 0;
      for (size_t j = 0; j < n; ++j) {
        g[j] = r[j] + dw[j];
        if (g[j] < 0) {
          ns += g[j];
          ++nn;
        } else {  // zero counts as positive
          ps += g[j];
          ++pn;
        }
      }
      const float pm = pn ? static_cast<float>(ps / pn) : 0.0f;
      const float nm = nn ? static_cast<float>(ns / nn) : 0.0f;
      std::vector<uint8_t> frame;
      ASSERT_TRUE(comp->Compress(dw, &frame).ok());
      FrameInfo info;
      ASSERT_TRUE(InspectFrame(frame, &info).ok());
      // The library sums in another order: equal to float rounding.
      EXPECT_NEAR(info.scale, pm, 1e-6 * std::fabs(pm));
      EXPECT_NEAR(info.scale2, nm, 1e-6 * std::fabs(nm));
      std::vector<float> got = Decode(frame, n);
      for (size_t j = 0; j < n; ++j) {
        const float q = g[j] < 0 ? info.scale2 : info.scale;
        r[j] = g[j] - q;
        ASSERT_EQ(got[j], q);
        ASSERT_EQ(comp->residue()[j], r[j]);
      }
    }
  }
}

TEST(TernGradTest, ValuesDeterminismAndUnbiasedness) {
  const size_t n = 64;
  std::vector<float> g = testing::GradientLike(n, 3);
  g[10] = 0.0f;
  float s = 0;
  for (float v : g) s = std::max(s, std::fabs(v));
  auto a = Make(Config(Codec::kTernGrad), n);
  auto b = Make(Config(Codec::kTernGrad), n);
  CodecConfig other = Config(Codec::kTernGrad);
  other.seed = 43;
  auto c = Make(other, n);
  const int steps = 4000;
  std::vector<double> mean(n, 0.0);
  bool differs = false;
  for (int t = 0; t < steps; ++t) {
    std::vector<uint8_t> fa, fb, fc;
    ASSERT_TRUE(a->Compress(g, &fa).ok());
    ASSERT_TRUE(b->Compress(g, &fb).ok());
    ASSERT_TRUE(c->Compress(g, &fc).ok());
    ASSERT_EQ(fa, fb);  // same seed: same frames
    differs |= fa != fc;
    std::vector<float> v = Decode(fa, n);
    for (size_t j = 0; j < n; ++j) {
      ASSERT_TRUE(v[j] == 0.0f || v[j] == s || v[j] == -s);
      if (v[j] != 0.0f) {
        ASSERT_EQ(v[j] > 0, g[j] > 0);
      }
      if (std::fabs(g[j]) == s) {
        ASSERT_EQ(v[j], g[j]);  // probability 1
      }
      mean[j] += v[j];
    }
  }
  EXPECT_TRUE(differs);
  EXPECT_EQ(mean[10], 0.0);
  for (size_t j = 0; j < n; ++j) {
    mean[j] /= steps;
    const double var = std::fabs(g[j]) * s - double{g[j]} * g[j];
    const double sigma = std::sqrt(var / steps);
    EXPECT_NEAR(mean[j], g[j], 5 * sigma + 1e-12) << j;
  }
  // The step counter is the state: a loaded copy continues identically.
  auto d = Make(Config(Codec::kTernGrad), n);
  ASSERT_TRUE(d->LoadState(a->SaveState()).ok());
  std::vector<uint8_t> fa, fd;
  ASSERT_TRUE(a->Compress(g, &fa).ok());
  ASSERT_TRUE(d->Compress(g, &fd).ok());
  EXPECT_EQ(fa, fd);
}

// Dequantized value + new residue == old residue + gradient, per element.
TEST(ConservationTest, EveryCodecWithResidue) {
  std::vector<CodecConfig> cfgs;
  for (ValueMode m : {ValueMode::kTernary, ValueMode::kFp16, ValueMode::kFp32}) {
    for (uint32_t bin : {50u, 500u}) {
      CodecConfig c = Config(Codec::kAdaComp);
      c.values = m;
      c.bin_size = bin;
      cfgs.push_back(c);
    }
  }
  cfgs.push_back(Config(Codec::kTopK));
  cfgs.push_back(Config(Codec::kThreshold));
  cfgs.push_back(Config(Codec::kOneBit));
  for (const CodecConfig& cfg : cfgs) {
    SCOPED_TRACE(std::string(CodecName(cfg.codec)) + "/" + std::string(ValueModeName(cfg.values)));
    const size_t n = 20011;
    auto comp = Make(cfg, n);
    for (int step = 0; step < 6; ++step) {
      std::vector<float> dw = testing::GradientLike(n, 300 + step);
      if (cfg.values == ValueMode::kFp16) dw[5] = 1e6f;
      const std::vector<float> old(comp->residue().begin(), comp->residue().end());
      std::vector<uint8_t> frame;
      ASSERT_TRUE(comp->Compress(dw, &frame).ok());
      const std::vector<float> q = Decode(frame, n);
      const auto r = comp->residue();
      for (size_t j = 0; j < n; ++j) {
        const double lhs = double{q[j]} + r[j];
        const double rhs = double{old[j]} + dw[j];
        const double tol = 1.2e-7 * (std::fabs(rhs) + std::fabs(q[j]) + std::fabs(r[j])) + 1e-40;
        ASSERT_NEAR(lhs, rhs, tol) << "step " << step << " j " << j;
      }
    }
  }
}

TEST(CompressorTest, RejectsBadInputWithoutChangeEveryCodec) {
  for (uint8_t id = 0; id <= 5; ++id) {
    CodecConfig cfg = Config(static_cast<Codec>(id));
    SCOPED_TRACE(std::string(CodecName(cfg.codec)));
    auto comp = Make(cfg, 100);
    std::vector<uint8_t> frame;
    ASSERT_TRUE(comp->Compress(testing::GradientLike(100, 1), &frame).ok());
    const std::vector<uint8_t> frame0 = frame;
    const std::vector<uint8_t> state0 = comp->SaveState();
    std::vector<float> bad = testing::GradientLike(100, 2);
    bad[50] = -INFINITY;
    EXPECT_EQ(comp->Compress(bad, &frame).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(comp->Compress(std::vector<float>(101), &frame).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(frame, frame0);
    EXPECT_EQ(comp->SaveState(), state0);
    // Load of a state for another size fails and changes nothing.
    auto other = Make(cfg, 99);
    EXPECT_FALSE(comp->LoadState(other->SaveState()).ok());
    EXPECT_EQ(comp->SaveState(), state0);
    EXPECT_TRUE(comp->LoadState(state0).ok());
  }
  CodecConfig bad = Config(Codec::kTopK);
  bad.density = 0;
  EXPECT_FALSE(Compressor::Create(bad, 0, 10).ok());
  bad.density = 1.5;
  EXPECT_FALSE(Compressor::Create(bad, 0, 10).ok());
  bad = Config(Codec::kThreshold);
  bad.tau = -1;
  EXPECT_FALSE(Compressor::Create(bad, 0, 10).ok());
  bad.tau = NAN;
  EXPECT_FALSE(Compressor::Create(bad, 0, 10).ok());
}

TEST(CompressorTest, FindNonFinite) {
  std::vector<float> v(1000, 1.0f);
  EXPECT_FALSE(FindNonFinite(v).has_value());
  v[777] = NAN;
  EXPECT_EQ(FindNonFinite(v), 777u);
  v[3] = -INFINITY;
  EXPECT_EQ(FindNonFinite(v), 3u);
  EXPECT_FALSE(FindNonFinite({}).has_value());
}

TEST(CompressorTest, SumOfSquaresMatchesEightLanesInDouble) {
  // A slow reference written out: lane i % 8 in double, the lanes added in order.
  for (size_t n : {0u, 1u, 7u, 8u, 9u, 1000u, 4099u}) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = std::ldexp(static_cast<float>(i % 13) - 6.5f, i % 9);
    double lane[8] = {};
    for (size_t i = 0; i < n; ++i)
      lane[i % 8] += static_cast<double>(v[i]) * static_cast<double>(v[i]);
    const double want =
        ((((((lane[0] + lane[1]) + lane[2]) + lane[3]) + lane[4]) + lane[5]) + lane[6]) + lane[7];
    EXPECT_EQ(SumOfSquares(v), want) << n;
    double plain = 0;
    for (float x : v) plain += static_cast<double>(x) * x;
    EXPECT_NEAR(SumOfSquares(v), plain, 1e-12 * std::max(1.0, plain)) << n;
  }
}

TEST(CompressorTest, StatsMergeAndRate) {
  CompressStats a, b;
  a.elements = 100;
  a.frame_bytes = 10;
  a.bin_histogram[1] = 2;
  b.elements = 300;
  b.frame_bytes = 30;
  b.bin_histogram[1] = 1;
  a.Merge(b);
  EXPECT_EQ(a.elements, 400u);
  EXPECT_EQ(a.bin_histogram[1], 3u);
  EXPECT_DOUBLE_EQ(a.CompressionRate(), 32.0 * 400 / (8.0 * 40));
  EXPECT_EQ(CompressStats{}.CompressionRate(), 0.0);
}

}  // namespace
}  // namespace adacomp
