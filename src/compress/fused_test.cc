// The fused AdaComp kernel's vector version against its scalar twin, and the
// whole compressor (fast path with deferred corrections, and the two-pass
// path) against an independent bit-exact scalar definition of docs/algorithm.md section 2.
#include "compress/fused.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "adacomp/codec.h"
#include "compress/common.h"
#include "core/simd.h"
#include "core/test_util.h"
#include "wire/frame.h"

namespace adacomp::internal {
namespace {

struct KernelOut {
  std::vector<float> r, gmax, val;
  std::vector<uint32_t> idx;
  std::vector<uint64_t> hist;
  double gsum = 0.0;
  float gtop = 0.0f;
  size_t pend_used = 0;
};

// Runs `fn` over all bins in calls of `per_call` bins, with the given pending
// corrections, as the compressor does.
KernelOut RunKernel(FusedSelectFn fn, std::vector<float> r, const std::vector<float>& g, size_t bin,
                    size_t per_call, const std::vector<uint32_t>& pending, float s_prev) {
  const size_t n = g.size();
  const size_t bins = n == 0 ? 0 : (n - 1) / bin + 1;
  KernelOut o;
  o.gmax.assign(bins, -1.0f);
  o.idx.assign(n + 8, 0xDEADBEEF);
  o.val.assign(n + 8, 0.0f);
  o.hist.assign(17, 0);
  const uint32_t* p = pending.data();
  size_t c = 0;
  for (size_t b = 0; b < bins; b += per_call) {
    const size_t last = std::min(bins, b + per_call);
    c += fn(r.data(), g.data(), n, bin, b, last, &p, pending.data() + pending.size(), s_prev,
            o.gmax.data(), &o.gsum, &o.gtop, o.idx.data() + c, o.val.data() + c, o.hist.data());
  }
  o.idx.resize(c);
  o.val.resize(c);
  o.r = std::move(r);
  o.pend_used = static_cast<size_t>(p - pending.data());
  return o;
}

std::vector<uint32_t> RandomSubset(size_t n, double density, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution pick(density);
  std::vector<uint32_t> out;
  for (size_t j = 0; j < n; ++j) {
    if (pick(rng)) out.push_back(static_cast<uint32_t>(j));
  }
  return out;
}

std::vector<uint32_t> Bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  if (!v.empty()) std::memcpy(b.data(), v.data(), 4 * v.size());
  return b;
}

// Everything two kernel runs report but r: maxima, selection, sums.
void ExpectSameSelection(const KernelOut& a, const KernelOut& b) {
  EXPECT_EQ(Bits(a.gmax), Bits(b.gmax));
  EXPECT_EQ(a.idx, b.idx);
  EXPECT_EQ(Bits(a.val), Bits(b.val));
  EXPECT_EQ(a.hist, b.hist);
  EXPECT_EQ(a.gsum, b.gsum);
  EXPECT_EQ(Bits({a.gtop}), Bits({b.gtop}));
}

TEST(FusedKernelTest, ScalarTwinFollowsTheDefinition) {
  const size_t n = 1003, bin = 50;
  auto r = testing::GradientLike(n, 1);
  auto g = testing::GradientLike(n, 2);
  g[10] = -r[10];  // G == 0 exactly: never selected
  const auto pending = RandomSubset(n, 0.05, 3);
  for (uint32_t j : pending) r[j] = r[j] == 0.0f ? 1e-3f : r[j];
  const KernelOut o = RunKernel(&FusedSelectScalar, r, g, bin, 3, pending, 0.01f);
  EXPECT_EQ(o.pend_used, pending.size());
  std::vector<float> rc = r;
  for (uint32_t j : pending) rc[j] = rc[j] - std::copysign(0.01f, rc[j]);
  std::vector<uint32_t> want;
  double sum = 0.0;
  for (size_t b = 0; b * bin < n; ++b) {
    const size_t end = std::min(n, (b + 1) * bin);
    float m = 0.0f;
    for (size_t j = b * bin; j < end; ++j) m = std::max(m, std::fabs(rc[j] + g[j]));
    ASSERT_EQ(o.gmax[b], m);
    sum += m;
    for (size_t j = b * bin; j < end; ++j) {
      const float G = rc[j] + g[j];
      ASSERT_EQ(std::bit_cast<uint32_t>(o.r[j]), std::bit_cast<uint32_t>(G));
      if (std::fabs(G + g[j]) >= m && G != 0.0f) want.push_back(static_cast<uint32_t>(j));
    }
  }
  EXPECT_EQ(o.idx, want);
  EXPECT_EQ(o.gsum, sum);
  EXPECT_EQ(std::find(o.idx.begin(), o.idx.end(), 10u), o.idx.end());
}

// A non-finite G (NaN, +-Inf, or R + dW overflowing) anywhere makes *gtop
// non-finite, for both kernels, wherever it falls: the first lane, a full
// vector, a bin's partial last vector, a bin under 8 elements. The
// compressor's first compression after Mark() relies on it instead of a
// check pass.
TEST(FusedKernelTest, NonFiniteSumsShowInTheTop) {
  std::vector<FusedSelectFn> kernels = {&FusedSelectScalar};
#if ADACOMP_X86_SIMD
  if (CpuHasAvx2()) kernels.push_back(&FusedSelectAvx2);
#endif
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float big = std::numeric_limits<float>::max();
  for (FusedSelectFn fn : kernels) {
    for (size_t bin : {5, 8, 13, 50, 500}) {
      const size_t n = 4 * bin + 3;
      for (size_t at : {size_t{0}, bin / 2, 2 * bin - 1, n - 2, n - 1}) {
        for (int kind = 0; kind < 4; ++kind) {
          auto r = testing::GradientLike(n, 40);
          auto g = testing::GradientLike(n, 41);
          if (kind == 0) g[at] = nan;
          if (kind == 1) g[at] = -inf;
          if (kind == 2) r[at] = nan;  // a residue the caller never checks
          if (kind == 3) {             // finite parts, an overflowing sum
            r[at] = big;
            g[at] = big;
          }
          const KernelOut o = RunKernel(fn, r, g, bin, 2, {}, 0.0f);
          EXPECT_FALSE(std::isfinite(o.gtop)) << "bin " << bin << " at " << at << " kind " << kind;
          EXPECT_FALSE(std::isfinite(o.gmax[at / bin])) << "bin " << bin << " at " << at;
        }
      }
      // And finite data keeps a finite top.
      const KernelOut ok =
          RunKernel(fn, testing::GradientLike(n, 42), testing::GradientLike(n, 43), bin, 2, {}, 0);
      EXPECT_TRUE(std::isfinite(ok.gtop));
    }
  }
}

#if ADACOMP_X86_SIMD
TEST(FusedKernelTest, Avx2MatchesScalarTwin) {
  if (!CpuHasAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  for (size_t bin : {1, 3, 7, 8, 9, 15, 16, 17, 50, 64, 500, 777, 5000}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{5}, bin, bin + 3, 3 * bin - 1, size_t{20011}}) {
      for (uint64_t seed = 0; seed < 2; ++seed) {
        auto r = testing::GradientLike(n, 10 + seed);
        auto g = testing::GradientLike(n, 20 + seed, seed ? 1e-1 : 1e-3);
        if (n > 4) g[n / 3] = -r[n / 3];
        if (seed == 1) {
          for (size_t j = 0; j < n; j += 7) g[j] = 0.0f;  // ties and zeros
        }
        const auto pending = RandomSubset(n, seed ? 0.3 : 0.02, 30 + seed);
        for (uint32_t j : pending) r[j] = r[j] == 0.0f ? -2e-3f : r[j];
        for (size_t per_call : {size_t{1}, size_t{4}, size_t{1} << 20}) {
          const KernelOut a = RunKernel(&FusedSelectAvx2, r, g, bin, per_call, pending, 3e-3f);
          const KernelOut s = RunKernel(&FusedSelectScalar, r, g, bin, per_call, pending, 3e-3f);
          SCOPED_TRACE("bin " + std::to_string(bin) + ", n " + std::to_string(n));
          ASSERT_EQ(Bits(a.r), Bits(s.r));
          ExpectSameSelection(a, s);
          ASSERT_EQ(a.pend_used, pending.size());
          // The twins that store nothing: the same selection, maxima and
          // sums; r only gets the deferred corrections.
          std::vector<float> corrected = r;
          for (uint32_t j : pending) corrected[j] = ApplyScale(corrected[j], 3e-3f);
          for (FusedSelectFn fn : {&FusedSelectNoStoreAvx2, &FusedSelectNoStoreScalar}) {
            const KernelOut q = RunKernel(fn, r, g, bin, per_call, pending, 3e-3f);
            ASSERT_EQ(Bits(q.r), Bits(corrected));
            ExpectSameSelection(q, s);
          }
        }
      }
    }
  }
}

TEST(FusedKernelTest, AddStreamIsThePlainSum) {
  // Every alignment of out (the streaming stores start at its first 32-byte
  // boundary) and lengths around the vector width.
  const auto a = testing::GradientLike(2100, 5), b = testing::GradientLike(2100, 6);
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 2000}) {
      std::vector<float> out(n + 16, -1.0f), want(n + 16, -1.0f);
      AddStream(a.data() + offset, b.data(), out.data() + offset, n);
      StreamFence();
      AddScalar(a.data() + offset, b.data(), want.data() + offset, n);
      ASSERT_EQ(Bits(out), Bits(want)) << "offset " << offset << " n " << n;
    }
  }
}

TEST(BaselineKernelsTest, Avx2MatchesScalarTwins) {
  if (!CpuHasAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  for (size_t n : {0, 1, 3, 4, 5, 8, 9, 17, 1001, 4096}) {
    auto r = testing::GradientLike(n, n + 1);
    auto g = testing::GradientLike(n, n + 2);
    if (n > 3) {
      g[1] = -r[1];  // G = 0
      r[2] = -0.0f;
      g[2] = -0.0f;  // G = -0: the non-negative side
    }
    double pa[4] = {1, 2, 3, 4}, na[4] = {-1, -2, -3, -4}, ps[4] = {1, 2, 3, 4},
           ns[4] = {-1, -2, -3, -4};
    uint64_t ca = 5, cs = 5;
    ASSERT_TRUE(OneBitSumsAvx2(r.data(), g.data(), n, pa, na, &ca));
    ASSERT_TRUE(OneBitSumsScalar(r.data(), g.data(), n, ps, ns, &cs));
    for (int l = 0; l < 4; ++l) {
      ASSERT_EQ(std::bit_cast<uint64_t>(pa[l]), std::bit_cast<uint64_t>(ps[l])) << n << " " << l;
      ASSERT_EQ(std::bit_cast<uint64_t>(na[l]), std::bit_cast<uint64_t>(ns[l])) << n << " " << l;
    }
    ASSERT_EQ(ca, cs);
    if (n > 0) {  // a non-finite sum is reported by both
      auto big = g;
      big[n - 1] = std::numeric_limits<float>::infinity();
      uint64_t c1 = 0;
      EXPECT_FALSE(OneBitSumsAvx2(r.data(), big.data(), n, pa, na, &c1));
      EXPECT_FALSE(OneBitSumsScalar(r.data(), big.data(), n, ps, ns, &c1));
    }
    std::vector<uint8_t> ba((n + 7) / 8, 0xAA), bs((n + 7) / 8, 0x55);
    auto ra = r, rs = r;
    OneBitApplyAvx2(ra.data(), g.data(), n, 0.25f, -0.5f, ba.data());
    OneBitApplyScalar(rs.data(), g.data(), n, 0.25f, -0.5f, bs.data());
    ASSERT_EQ(ba, bs);
    ASSERT_EQ(Bits(ra), Bits(rs));
    for (size_t j = 0; j < n; ++j) {
      const float G = r[j] + g[j];
      ASSERT_EQ((bs[j / 8] >> (j % 8)) & 1, G < 0.0f ? 1 : 0);
    }
    for (float tau : {1e-3f, 1e-9f, 1.0f}) {
      std::vector<uint32_t> ia(n + 8), is(n + 8);
      const size_t ka = CompactAtLeastAvx2(g.data(), n, tau, ia.data());
      const size_t ks = CompactAtLeastScalar(g.data(), n, tau, is.data());
      ASSERT_EQ(ka, ks);
      ia.resize(ka);
      is.resize(ks);
      ASSERT_EQ(ia, is);
      size_t want = 0;
      for (float v : g) want += std::fabs(v) >= tau;
      ASSERT_EQ(ks, want);
    }
  }
}
#endif

// docs/algorithm.md section 2 in float arithmetic, exactly as the library must compute it
// (ternary mode).
struct ExactRef {
  size_t bin;
  std::vector<float> r;
  // Returns the selected indices; *scale and *neg receive s and the signs.
  std::vector<uint32_t> Step(const std::vector<float>& dw, float* scale,
                             std::vector<uint8_t>* neg) {
    const size_t n = r.size();
    std::vector<float> G(n), gmax;
    for (size_t j = 0; j < n; ++j) G[j] = r[j] + dw[j];
    double sum = 0.0, group = 0.0;  // by groups of kScaleGroupBins bins
    for (size_t b = 0; b * bin < n; ++b) {
      float m = 0.0f;
      for (size_t j = b * bin; j < std::min(n, (b + 1) * bin); ++j)
        m = std::max(m, std::fabs(G[j]));
      gmax.push_back(m);
      group += m;
      if ((b + 1) % kScaleGroupBins == 0 || (b + 1) * bin >= n) {
        sum += group;
        group = 0.0;
      }
    }
    const float s =
        gmax.empty() ? 0.0f : static_cast<float>(sum / static_cast<double>(gmax.size()));
    std::vector<uint32_t> sel;
    neg->clear();
    for (size_t j = 0; j < n; ++j) {
      const bool pick = std::fabs(G[j] + dw[j]) >= gmax[j / bin] && G[j] != 0.0f;
      r[j] = pick ? G[j] - (G[j] < 0 ? -s : s) : G[j];
      if (pick) {
        sel.push_back(static_cast<uint32_t>(j));
        neg->push_back(G[j] < 0);
      }
    }
    *scale = s;
    return sel;
  }
};

void CheckAgainstExact(size_t n, uint32_t bin, bool huge, bool read_residue_each_step) {
  CodecConfig cfg;
  cfg.codec = Codec::kAdaComp;
  cfg.bin_size = bin;
  auto comp = std::move(Compressor::Create(cfg, 3, n).value());
  ExactRef ref{bin, std::vector<float>(n, 0.0f)};
  std::vector<uint8_t> frame;
  for (int step = 0; step < 6; ++step) {
    auto dw = testing::GradientLike(n, 100 + step);
    // A value >= 2^126 makes the compressor take its two-pass path.
    if (huge && n > 0 && step % 2 == 1) dw[n / 2] = std::ldexp(1.0f, 126);
    float s = 0.0f;
    std::vector<uint8_t> neg;
    const auto sel = ref.Step(dw, &s, &neg);
    frame.clear();
    ASSERT_TRUE(comp->Compress(dw, &frame).ok());
    wire::Frame f;
    ASSERT_TRUE(wire::DecodeFrame(frame, {}, &f).ok());
    ASSERT_EQ(f.indices, sel) << "step " << step;
    ASSERT_EQ(f.negative, neg) << "step " << step;
    ASSERT_EQ(std::bit_cast<uint32_t>(f.params.scale), std::bit_cast<uint32_t>(s));
    if (read_residue_each_step || step == 5) {
      const auto res = comp->residue();
      ASSERT_EQ(res.size(), ref.r.size());
      ASSERT_TRUE(n == 0 || std::memcmp(res.data(), ref.r.data(), 4 * n) == 0) << "step " << step;
    }
  }
}

TEST(FusedKernelTest, CompressorIsBitExactOnBothPaths) {
  for (uint32_t bin : {1u, 7u, 50u, 500u}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{49}, size_t{1001}, size_t{70001}}) {
      for (bool huge : {false, true}) {
        CheckAgainstExact(n, bin, huge, false);  // deferred corrections across steps
        CheckAgainstExact(n, bin, huge, true);   // applied by residue() every step
      }
    }
  }
}

TEST(FusedKernelTest, SaveStateAppliesDeferredCorrections) {
  const size_t n = 5000;
  CodecConfig cfg;
  cfg.codec = Codec::kAdaComp;
  cfg.bin_size = 50;
  auto a = std::move(Compressor::Create(cfg, 0, n).value());
  auto b = std::move(Compressor::Create(cfg, 0, n).value());
  std::vector<uint8_t> fa, fb;
  ASSERT_TRUE(a->Compress(testing::GradientLike(n, 1), &fa).ok());
  // Saved while corrections are pending, loaded into a fresh compressor.
  ASSERT_TRUE(b->LoadState(a->SaveState()).ok());
  for (int step = 0; step < 3; ++step) {
    fa.clear();
    fb.clear();
    const auto dw = testing::GradientLike(n, 2 + step);
    ASSERT_TRUE(a->Compress(dw, &fa).ok());
    ASSERT_TRUE(b->Compress(dw, &fb).ok());
    ASSERT_EQ(fa, fb) << step;
  }
  // A rejected gradient changes nothing, with corrections pending.
  const std::vector<float> before(a->residue().begin(), a->residue().end());
  std::vector<float> bad = testing::GradientLike(n, 9);
  bad[n - 1] = std::nanf("");
  fa.clear();
  EXPECT_FALSE(a->Compress(bad, &fa).ok());
  EXPECT_TRUE(fa.empty());
  EXPECT_EQ(0, std::memcmp(before.data(), a->residue().data(), 4 * n));
}

}  // namespace
}  // namespace adacomp::internal
