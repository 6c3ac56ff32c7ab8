// AdaComp against an independent scalar reference of docs/algorithm.md section 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "adacomp/codec.h"
#include "compress/common.h"
#include "core/test_util.h"
#include "wire/frame.h"

namespace adacomp {
namespace {

// Nearest half-precision value (ties to even), clamped to the finite range,
// computed from the definition of binary16 (independent of the library).
float RefHalf(float g) {
  const double a = std::min(std::fabs(static_cast<double>(g)), 65504.0);
  // Spacing of halves at magnitude a.
  int e = a < std::ldexp(1.0, -14) ? -14 : static_cast<int>(std::floor(std::log2(a)));
  if (std::ldexp(1.0, e) > a) --e;  // guard log2 rounding
  if (std::ldexp(1.0, e + 1) <= a) ++e;
  e = std::max(e, -14);
  const double ulp = std::ldexp(1.0, e - 10);
  double q = std::floor(a / ulp);
  const double rem = a - q * ulp;
  if (rem > ulp / 2 || (rem == ulp / 2 && std::fmod(q, 2.0) == 1.0)) q += 1;
  const double v = std::min(q * ulp, 65504.0);
  return static_cast<float>(g < 0 ? -v : v);
}

// docs/algorithm.md section 2, written as plainly as possible.
struct RefAdaComp {
  size_t bin_size;
  ValueMode mode;
  std::vector<float> r;

  // Returns Gq (the dequantized values) for one step; *scale gets s.
  std::vector<float> Step(const std::vector<float>& dw, float* scale, std::vector<bool>* sel) {
    const size_t n = dw.size();
    if (r.size() != n) r.assign(n, 0.0f);
    std::vector<float> g(n), h(n), gq(n, 0.0f);
    for (size_t j = 0; j < n; ++j) g[j] = r[j] + dw[j];
    for (size_t j = 0; j < n; ++j) h[j] = g[j] + dw[j];
    const size_t bins = (n + bin_size - 1) / bin_size;
    std::vector<float> gmax(bins, 0.0f);
    for (size_t j = 0; j < n; ++j)
      gmax[j / bin_size] = std::max(gmax[j / bin_size], std::fabs(g[j]));
    // s: the maxima summed in double by groups of kScaleGroupBins bins, in
    // order, then the group sums in order.
    double sum = 0, group = 0;
    for (size_t b = 0; b < bins; ++b) {
      group += gmax[b];
      if ((b + 1) % internal::kScaleGroupBins == 0 || b + 1 == bins) {
        sum += group;
        group = 0;
      }
    }
    const float s = bins ? static_cast<float>(sum / bins) : 0.0f;
    sel->assign(n, false);
    for (size_t j = 0; j < n; ++j) {
      if (std::fabs(h[j]) >= gmax[j / bin_size] && g[j] != 0.0f) {
        (*sel)[j] = true;
        if (mode == ValueMode::kTernary) gq[j] = g[j] > 0 ? s : -s;
        if (mode == ValueMode::kFp32) gq[j] = g[j];
        if (mode == ValueMode::kFp16) gq[j] = RefHalf(g[j]);
      }
      r[j] = g[j] - gq[j];
    }
    *scale = s;
    return gq;
  }
};

struct Case {
  size_t n;
  uint32_t bin;
  ValueMode mode;
  int threads = 1;  // CodecConfig::threads
};

void RunAgainstReference(const Case& c, int steps, bool with_big_values) {
  SCOPED_TRACE("n=" + std::to_string(c.n) + " L=" + std::to_string(c.bin) + " mode=" +
               std::string(ValueModeName(c.mode)) + " threads=" + std::to_string(c.threads));
  CodecConfig cfg;
  cfg.codec = Codec::kAdaComp;
  cfg.bin_size = c.bin;
  cfg.values = c.mode;
  cfg.threads = c.threads;
  auto comp = Compressor::Create(cfg, 7, c.n);
  ASSERT_TRUE(comp.ok()) << comp.status().ToString();
  RefAdaComp ref{c.bin, c.mode, {}};
  std::vector<uint8_t> frame;
  for (int step = 0; step < steps; ++step) {
    std::vector<float> dw = testing::GradientLike(c.n, 1000 * c.n + step);
    if (step == 2) std::fill(dw.begin(), dw.end(), 0.0f);  // an all-zero gradient step
    if (with_big_values && c.n > 3) {
      dw[1] = 1e5f;
      dw[c.n - 2] = -7e4f;
    }
    float s_ref = 0;
    std::vector<bool> sel_ref;
    const std::vector<float> gq_ref = ref.Step(dw, &s_ref, &sel_ref);

    frame.clear();
    CompressStats st;
    ASSERT_TRUE((*comp)->Compress(dw, &frame, &st).ok());
    EXPECT_EQ(st.frame_bytes, frame.size());
    wire::Frame f;
    ASSERT_TRUE(wire::DecodeFrame(frame, {}, &f).ok());
    std::vector<float> gq(c.n, 0.0f);
    FrameInfo info;
    ASSERT_TRUE(DecodeAccumulate(frame, gq, &info).ok());
    EXPECT_EQ(info.tensor_id, 7u);
    EXPECT_EQ(info.elements, c.n);
    EXPECT_EQ(info.bin_size, c.bin);

    // Selected set.
    std::vector<uint32_t> want;
    for (size_t j = 0; j < c.n; ++j) {
      if (sel_ref[j]) want.push_back(static_cast<uint32_t>(j));
    }
    ASSERT_EQ(f.indices, want) << "step " << step;
    EXPECT_EQ(st.selected, want.size());
    EXPECT_EQ(st.bins, (c.n + c.bin - 1) / c.bin);
    uint64_t hist_bins = 0;
    for (uint64_t v : st.bin_histogram) hist_bins += v;
    EXPECT_EQ(hist_bins, st.bins);
    // Scale, signs, values.
    if (c.mode == ValueMode::kTernary) {
      EXPECT_EQ(info.scale, s_ref);  // the same sums in the same order
    }
    const auto res = (*comp)->residue();
    const float s_lib = info.scale;
    for (size_t j = 0; j < c.n; ++j) {
      if (c.mode == ValueMode::kTernary) {
        if (sel_ref[j]) {
          ASSERT_EQ(gq[j] > 0, gq_ref[j] > 0) << j;
          ASSERT_EQ(std::fabs(gq[j]), s_lib) << j;
        } else {
          ASSERT_EQ(gq[j], 0.0f) << j;
        }
      } else {
        ASSERT_EQ(gq[j], gq_ref[j]) << j;  // fp16/fp32: exact
      }
      ASSERT_EQ(std::bit_cast<uint32_t>(res[j]), std::bit_cast<uint32_t>(ref.r[j]))
          << "residue " << j << " step " << step << ": " << res[j] << " vs " << ref.r[j];
    }
  }
}

TEST(AdaCompTest, MatchesReferenceSmallSizes) {
  for (uint32_t bin : {50u, 500u, 1u, 7u}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{bin - 1}, size_t{bin}, size_t{bin + 1},
                     size_t{2 * bin + 3}, size_t{777}, size_t{12345}}) {
      for (ValueMode m : {ValueMode::kTernary, ValueMode::kFp16, ValueMode::kFp32}) {
        RunAgainstReference({n, bin, m}, 5, false);
      }
    }
  }
}

TEST(AdaCompTest, MatchesReferenceMillion) {
  for (uint32_t bin : {50u, 500u})
    RunAgainstReference({1000000, bin, ValueMode::kTernary}, 4, false);
  RunAgainstReference({1000001, 500, ValueMode::kFp16}, 2, false);
}

// One tensor spread over threads (CodecConfig::threads): 2^20 + 37 elements
// are 20972 bins of 50 (6 groups of the scale sum) or 2098 bins of 500 (one
// group: one thread).
TEST(AdaCompTest, MatchesReferenceOnThreads) {
  const size_t n = (size_t{1} << 20) + 37;
  for (int t : {2, 3, 8}) RunAgainstReference({n, 50, ValueMode::kTernary, t}, 4, false);
  RunAgainstReference({n, 50, ValueMode::kFp16, 3}, 3, false);
  RunAgainstReference({n, 50, ValueMode::kFp32, 2}, 3, false);
  RunAgainstReference({n, 500, ValueMode::kTernary, 4}, 3, false);
}

TEST(AdaCompTest, ThreadsGiveTheSameFramesAndState) {
  const size_t n = 3 * (size_t{1} << 18) + 11;  // 15729 bins of 50: 4 groups
  std::vector<std::unique_ptr<Compressor>> comps;
  for (int t : {1, 2, 3, 4}) {
    CodecConfig cfg;
    cfg.bin_size = 50;
    cfg.threads = t;
    comps.push_back(std::move(Compressor::Create(cfg, 2, n).value()));
  }
  for (int step = 0; step < 5; ++step) {
    std::vector<float> dw = testing::GradientLike(n, 500 + step);
    std::vector<uint8_t> first;
    for (size_t i = 0; i < comps.size(); ++i) {
      std::vector<uint8_t> frame;
      ASSERT_TRUE(comps[i]->Compress(dw, &frame).ok());
      if (i == 0) {
        first = frame;
      } else {
        ASSERT_EQ(frame, first) << "threads " << i + 1 << " step " << step;
      }
    }
    if (step == 3) {
      // A NaN: rejected by every thread count, nothing changed.
      std::vector<float> bad = dw;
      bad[n - 5] = std::numeric_limits<float>::quiet_NaN();
      for (auto& c : comps) {
        const auto before = c->SaveState();
        std::vector<uint8_t> frame = {1, 2, 3};
        const Status st = c->Compress(bad, &frame);
        EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
        EXPECT_NE(st.message().find(std::to_string(n - 5)), std::string::npos) << st.ToString();
        EXPECT_EQ(frame, (std::vector<uint8_t>{1, 2, 3}));
        EXPECT_EQ(c->SaveState(), before);
      }
    }
  }
  for (size_t i = 1; i < comps.size(); ++i) EXPECT_EQ(comps[i]->SaveState(), comps[0]->SaveState());
}

TEST(AdaCompTest, Fp16ClampsLargeValues) {
  RunAgainstReference({1001, 50, ValueMode::kFp16}, 4, true);
  // The sent value never exceeds the largest half, the residue keeps the rest.
  CodecConfig cfg;
  cfg.values = ValueMode::kFp16;
  cfg.bin_size = 4;
  auto comp = std::move(Compressor::Create(cfg, 0, 4).value());
  std::vector<float> dw = {1e6f, 0.0f, 0.0f, 0.0f};
  std::vector<uint8_t> frame;
  ASSERT_TRUE(comp->Compress(dw, &frame).ok());
  std::vector<float> out(4, 0.0f);
  ASSERT_TRUE(DecodeAccumulate(frame, out).ok());
  EXPECT_EQ(out[0], 65504.0f);
  EXPECT_EQ(comp->residue()[0], 1e6f - 65504.0f);
}

TEST(AdaCompTest, HandWorkedExample) {
  // L_T = 3, one step from zero residue: G = dW, H = 2 dW.
  // bin 0: dW = {0.1, -0.4, 0.3}: gmax = 0.4; |H| = {0.2, 0.8, 0.6}: selects 1 and 2.
  // bin 1: dW = {0, 0, 0}: gmax = 0, selects nothing (G == 0).
  // bin 2: dW = {1.0}: gmax = 1, |H| = 2: selected.
  // s = (0.4 + 0 + 1) / 3.
  CodecConfig cfg;
  cfg.bin_size = 3;
  auto comp = std::move(Compressor::Create(cfg, 0, 7).value());
  std::vector<float> dw = {0.1f, -0.4f, 0.3f, 0, 0, 0, 1.0f};
  std::vector<uint8_t> frame;
  CompressStats st;
  ASSERT_TRUE(comp->Compress(dw, &frame, &st).ok());
  const float s = static_cast<float>((double{0.4f} + 0.0 + 1.0) / 3.0);
  std::vector<float> out(7, 0.0f);
  ASSERT_TRUE(DecodeAccumulate(frame, out).ok());
  EXPECT_EQ(out, (std::vector<float>{0, -s, s, 0, 0, 0, s}));
  EXPECT_EQ(st.selected, 3u);
  EXPECT_EQ(st.bin_histogram[2], 1u);
  EXPECT_EQ(st.bin_histogram[0], 1u);
  EXPECT_EQ(st.bin_histogram[1], 1u);
  auto r = comp->residue();
  EXPECT_EQ(r[0], 0.1f);
  EXPECT_EQ(r[1], -0.4f + s);
  EXPECT_EQ(r[2], 0.3f - s);
  EXPECT_EQ(r[6], 1.0f - s);
}

// The mean of the per-bin maxima can underflow to 0 while an element is
// selected (one denormal bin among many empty ones): the frame must still
// decode, and the residue keeps everything (Gq = +-0).
TEST(AdaCompTest, ScaleUnderflowStillDecodes) {
  CodecConfig cfg;
  cfg.bin_size = 1;
  auto comp = std::move(Compressor::Create(cfg, 0, 1000).value());
  std::vector<float> dw(1000, 0.0f);
  dw[0] = std::numeric_limits<float>::denorm_min();
  std::vector<uint8_t> frame;
  CompressStats st;
  ASSERT_TRUE(comp->Compress(dw, &frame, &st).ok());
  EXPECT_EQ(st.selected, 1u);
  FrameInfo info;
  ASSERT_TRUE(InspectFrame(frame, &info).ok());
  EXPECT_EQ(info.scale, 0.0f);
  std::vector<float> out(1000, 0.0f);
  ASSERT_TRUE(DecodeAccumulate(frame, out).ok());
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(comp->residue()[0], dw[0]);
  wire::Frame f;
  ASSERT_TRUE(wire::DecodeFrame(frame, {}, &f).ok());
  std::vector<uint8_t> again;
  ASSERT_TRUE(wire::EncodeFrame(f, &again).ok());
  EXPECT_EQ(again, frame);
}

TEST(AdaCompTest, RejectsBadGradientWithoutChange) {
  CodecConfig cfg;
  cfg.bin_size = 4;
  auto comp = std::move(Compressor::Create(cfg, 0, 10).value());
  std::vector<uint8_t> frame;
  ASSERT_TRUE(comp->Compress(testing::GradientLike(10, 1), &frame).ok());
  const std::vector<float> before(comp->residue().begin(), comp->residue().end());
  const std::vector<uint8_t> frame_before = frame;
  std::vector<float> bad = testing::GradientLike(10, 2);
  bad[9] = std::nanf("");
  Status s = comp->Compress(bad, &frame);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("element 9"), std::string::npos) << s.message();
  bad[9] = INFINITY;
  EXPECT_EQ(comp->Compress(bad, &frame).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(frame, frame_before);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), comp->residue().begin()));
  // Wrong size.
  auto comp2 = std::move(Compressor::Create(cfg, 0, 10).value());
  EXPECT_EQ(comp2->Compress(std::vector<float>(9), &frame).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(frame, frame_before);
  // Overflow of R + dW is rejected before any change. Element 1 is not
  // selected in step 1 (|H| = 2e38 < gmax 3.3e38), so its residue is 1e38.
  std::vector<float> huge(10, 0.0f);
  huge[0] = 3.3e38f;
  huge[1] = 1e38f;
  ASSERT_TRUE(comp2->Compress(huge, &frame).ok());
  ASSERT_EQ(comp2->residue()[1], 1e38f);
  huge[0] = 0.0f;
  huge[1] = 3.3e38f;
  const std::vector<float> r2(comp2->residue().begin(), comp2->residue().end());
  const size_t size2 = frame.size();
  Status o = comp2->Compress(huge, &frame);
  EXPECT_EQ(o.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(o.message().find("element 1 "), std::string::npos) << o.message();
  EXPECT_NE(o.message().find("overflow"), std::string::npos) << o.message();
  EXPECT_EQ(frame.size(), size2);
  EXPECT_TRUE(std::equal(r2.begin(), r2.end(), comp2->residue().begin()));
}

TEST(AdaCompTest, SaveLoadStateContinuesIdentically) {
  CodecConfig cfg;
  cfg.bin_size = 50;
  auto a = std::move(Compressor::Create(cfg, 3, 1234).value());
  std::vector<uint8_t> fa, fb;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a->Compress(testing::GradientLike(1234, i), &fa).ok());
  const std::vector<uint8_t> state = a->SaveState();
  auto b = std::move(Compressor::Create(cfg, 3, 1234).value());
  ASSERT_TRUE(b->LoadState(state).ok());
  fa.clear();
  ASSERT_TRUE(a->Compress(testing::GradientLike(1234, 9), &fa).ok());
  ASSERT_TRUE(b->Compress(testing::GradientLike(1234, 9), &fb).ok());
  EXPECT_EQ(fa, fb);
  // Mismatches are rejected and leave the state alone.
  auto c = std::move(Compressor::Create(cfg, 3, 1233).value());
  EXPECT_FALSE(c->LoadState(state).ok());
  EXPECT_TRUE(
      std::all_of(c->residue().begin(), c->residue().end(), [](float v) { return v == 0; }));
  std::vector<uint8_t> broken = state;
  broken[40] ^= 1;
  EXPECT_FALSE(b->LoadState(broken).ok());
  EXPECT_FALSE(b->LoadState(std::vector<uint8_t>(state.begin(), state.end() - 1)).ok());
  CodecConfig other = cfg;
  other.codec = Codec::kTopK;
  auto d = std::move(Compressor::Create(other, 3, 1234).value());
  EXPECT_FALSE(d->LoadState(state).ok());
}

// The figure docs/wire-format.md section 7 quotes: bits per sent element,
// everything included, on a gradient-like 1e6-element tensor over 25 steps
// (steps 6..25 averaged). Also prints the entropy of the per-bin model
// (count per bin, then log2 C(bin, count) for the positions) for comparison.
TEST(AdaCompTest, BitsPerSentElement) {
  const size_t n = 1000000;
  for (uint32_t bin : {50u, 500u}) {
    CodecConfig cfg;
    cfg.bin_size = bin;
    auto comp = std::move(Compressor::Create(cfg, 0, n).value());
    double entries = 0, frame_bits = 0, index_bits = 0, model_bits = 0, bins = 0;
    std::vector<uint8_t> frame;
    for (int step = 0; step < 25; ++step) {
      const std::vector<float> g = testing::GradientLike(n, 5000 + step);
      frame.clear();
      CompressStats st;
      ASSERT_TRUE(comp->Compress(g, &frame, &st).ok());
      if (step < 5) continue;
      wire::Frame f;
      ASSERT_TRUE(wire::DecodeFrame(frame, {}, &f).ok());
      entries += static_cast<double>(f.indices.size());
      frame_bits += 8.0 * frame.size();
      index_bits += static_cast<double>(wire::IndexCodeBits(f.indices, f.params.code));
      bins += static_cast<double>(st.bins);
      std::vector<int> count(st.bins, 0);
      for (uint32_t i : f.indices) ++count[i / bin];
      std::vector<double> freq(bin + 1, 0);
      for (int c : count) freq[c] += 1;
      for (size_t b = 0; b < count.size(); ++b) {
        const double len = static_cast<double>(std::min<size_t>(bin, n - b * bin));
        model_bits +=
            -std::log2(freq[count[b]] / static_cast<double>(count.size())) +
            (std::lgamma(len + 1) - std::lgamma(count[b] + 1.0) - std::lgamma(len - count[b] + 1)) /
                std::log(2.0);
      }
    }
    const double per_entry = frame_bits / entries;
    std::printf(
        "L_T=%u: %.2f selected/bin, index code %.2f bits/entry (per-bin model entropy "
        "%.2f), %.2f bits per sent element in all, compression %.0fx\n",
        bin, entries / bins, index_bits / entries, model_bits / entries, per_entry,
        32.0 * n * 20 / frame_bits);
    // Guards against a regression of the index code (values measured: 7.02, 9.23).
    EXPECT_LT(per_entry, bin == 50 ? 7.3 : 9.6);
    EXPECT_GT(per_entry, 2.0);
  }
}

TEST(AdaCompTest, InvalidConfigs) {
  CodecConfig cfg;
  cfg.bin_size = 0;
  EXPECT_EQ(Compressor::Create(cfg, 0, 10).status().code(), StatusCode::kInvalidArgument);
  cfg.bin_size = 5;
  cfg.values = static_cast<ValueMode>(3);
  EXPECT_FALSE(Compressor::Create(cfg, 0, 10).ok());
  cfg.values = ValueMode::kTernary;
  EXPECT_FALSE(Compressor::Create(cfg, 0, uint64_t{1} << 33).ok());
  for (int t : {0, -1, 257}) {
    cfg.threads = t;
    const auto c = Compressor::Create(cfg, 0, 10);
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find("threads"), std::string::npos);
  }
  cfg.threads = 1;
  EXPECT_TRUE(ParseCodec("adacomp").ok());
  EXPECT_EQ(*ParseCodec("terngrad"), Codec::kTernGrad);
  EXPECT_FALSE(ParseCodec("zip").ok());
  EXPECT_EQ(*ParseValueMode("fp16"), ValueMode::kFp16);
  EXPECT_FALSE(ParseValueMode("fp8").ok());
}

}  // namespace
}  // namespace adacomp
