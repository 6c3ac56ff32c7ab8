// The compression schedule (adacomp/schedule.h) and Compressor::SetBinSize:
// the ramp's bin size per step against hand-computed stages, the residue
// carried whole across every change of bin size (the frames after a change
// equal those of a fresh compressor of the new size given the same state;
// sent + residue = sum of the gradients), the adaptive rule on a synthetic
// norm that jumps, and the state's round trip and refusals.
#include "adacomp/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "adacomp/codec.h"
#include "core/test_util.h"

namespace adacomp {
namespace {

TEST(ScheduleTest, RampStagesMatchHandComputedSizes) {
  BinSchedule s;
  s.ramp_steps = 100;
  s.ramp_start = 4;
  s.ramp_stages = 4;
  // 4 x 125^(k/4) for k = 0..3, rounded: 4, 13.37, 44.72, 149.54.
  const uint32_t want[4] = {4, 13, 45, 150};
  for (int64_t step = 0; step < 130; ++step) {
    const uint32_t expect = step < 100 ? want[step / 25] : 500;
    ASSERT_EQ(RampBinSize(s, 500, step), expect) << "step " << step;
  }
  // Stages that do not divide the steps: stage = floor(step x stages / steps).
  s.ramp_steps = 10;
  s.ramp_stages = 3;
  s.ramp_start = 5;
  const uint32_t by_step[10] = {5, 5, 5, 5, 11, 11, 11, 23, 23, 23};  // 5 x 10^(k/3)
  for (int64_t step = 0; step < 10; ++step) EXPECT_EQ(RampBinSize(s, 50, step), by_step[step]);
  EXPECT_EQ(RampBinSize(s, 50, 10), 50u);
  // A start at or above the target, or no ramp: the target throughout.
  EXPECT_EQ(RampBinSize(s, 5, 0), 5u);
  EXPECT_EQ(RampBinSize(s, 3, 0), 3u);
  EXPECT_EQ(RampBinSize(BinSchedule{}, 500, 0), 500u);
}

TEST(ScheduleTest, ValidateNamesTheField) {
  auto bad = [](auto edit, const char* field) {
    BinSchedule s;
    s.ramp_steps = 10;
    edit(s);
    const Status st = s.Validate();
    EXPECT_FALSE(st.ok()) << field;
    EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
  };
  bad([](BinSchedule& s) { s.ramp_steps = -1; }, "ramp_steps");
  bad([](BinSchedule& s) { s.ramp_start = 0; }, "ramp_start");
  bad([](BinSchedule& s) { s.ramp_stages = 0; }, "ramp_stages");
  bad([](BinSchedule& s) { s.ramp_stages = 11; }, "ramp_stages");
  bad([](BinSchedule& s) { s.adapt_threshold = NAN; }, "adapt_threshold");
  bad([](BinSchedule& s) { s.adapt_window = 0; }, "adapt_window");
  bad([](BinSchedule& s) { s.adapt_hold = 0; }, "adapt_hold");
  EXPECT_TRUE(BinSchedule{}.Validate().ok());
  EXPECT_EQ(BinSchedule{}.ToString(), "fixed");
}

// The sum of a frame's decoded values.
void AddFrame(const std::vector<uint8_t>& frame, std::vector<float>& sum) {
  ASSERT_TRUE(DecodeAccumulate(frame, sum).ok());
}

TEST(ScheduleTest, BinSizeChangeCarriesTheResidueWhole) {
  constexpr uint64_t n = 5003;
  for (ValueMode mode : {ValueMode::kTernary, ValueMode::kFp16}) {
    CodecConfig cfg;
    cfg.bin_size = 50;
    cfg.values = mode;
    // c is never looked at before the end, so its ternary corrections are
    // still deferred when its bin size changes; twin runs the same steps.
    auto c = std::move(Compressor::Create(cfg, 1, n).value());
    auto twin = std::move(Compressor::Create(cfg, 1, n).value());
    BinSchedule s;
    s.ramp_steps = 12;
    s.ramp_start = 4;
    s.ramp_stages = 3;  // 4, 9, 22, then 50
    std::vector<double> sent(n, 0.0), given(n, 0.0);
    uint32_t last = 50;
    int changes = 0;
    for (int step = 0; step < 16; ++step) {
      const uint32_t size = RampBinSize(s, 50, step);
      const auto g = testing::GradientLike(n, 100 + step);
      std::vector<uint8_t> frame, twin_frame;
      if (size != last) {
        // After the change c writes what a fresh compressor of the new size
        // writes from the same state.
        ++changes;
        const std::vector<uint8_t> state = twin->SaveState();
        ASSERT_TRUE(c->SetBinSize(size).ok());
        ASSERT_TRUE(twin->SetBinSize(size).ok());
        EXPECT_EQ(c->config().bin_size, size);
        CodecConfig fresh_cfg = cfg;
        fresh_cfg.bin_size = size;
        auto fresh = std::move(Compressor::Create(fresh_cfg, 1, n).value());
        ASSERT_TRUE(fresh->LoadState(state).ok());
        std::vector<uint8_t> fresh_frame;
        ASSERT_TRUE(fresh->Compress(g, &fresh_frame).ok());
        ASSERT_TRUE(c->Compress(g, &frame).ok());
        EXPECT_EQ(frame, fresh_frame) << "step " << step;
        FrameInfo info;
        ASSERT_TRUE(InspectFrame(frame, &info).ok());
        EXPECT_EQ(info.bin_size, size);
        last = size;
      } else {
        ASSERT_TRUE(c->Compress(g, &frame).ok());
      }
      ASSERT_TRUE(twin->Compress(g, &twin_frame).ok());
      ASSERT_EQ(frame, twin_frame) << "step " << step;
      std::vector<float> decoded(n, 0.0f);
      AddFrame(frame, decoded);
      for (size_t j = 0; j < n; ++j) {
        sent[j] += decoded[j];
        given[j] += g[j];
      }
    }
    EXPECT_EQ(changes, 4);
    // Nothing lost: sent + residue = the sum of the gradients.
    const auto r = c->residue();
    double worst = 0, largest = 0;
    for (size_t j = 0; j < n; ++j) {
      worst = std::max(worst, std::fabs(sent[j] + r[j] - given[j]));
      largest = std::max(largest, std::fabs(given[j]));
    }
    EXPECT_LT(worst, 1e-5 * largest + 1e-9);
    EXPECT_GT(largest, 0.0);
  }
}

TEST(ScheduleTest, SetBinSizeRefusals) {
  CodecConfig topk;
  topk.codec = Codec::kTopK;
  auto t = std::move(Compressor::Create(topk, 0, 100).value());
  EXPECT_EQ(t->SetBinSize(8).code(), StatusCode::kInvalidArgument);
  auto a = std::move(Compressor::Create(CodecConfig{}, 0, 100).value());
  std::vector<uint8_t> frame;
  ASSERT_TRUE(a->Compress(testing::GradientLike(100, 1), &frame).ok());
  const auto state = a->SaveState();
  EXPECT_EQ(a->SetBinSize(0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a->SaveState(), state);
  EXPECT_EQ(a->config().bin_size, 500u);
}

// Norms per step for three binned tensors and one that is not binned:
// tensor 0 steady, tensor 1 doubles from step 8 on, tensor 2 changes by 40 %
// (under the 0.5 threshold), tensor 3 is not binned.
std::vector<double> Norms(int64_t step) {
  return {1.0, step >= 8 ? 2.0 : 1.0, step >= 8 ? 1.4 : 1.0, 5.0 * static_cast<double>(step)};
}

TEST(ScheduleTest, AdaptiveLightensExactlyTheTensorsThatJumped) {
  BinSchedule s;
  s.adapt_threshold = 0.5;
  s.adapt_window = 4;
  s.adapt_hold = 6;
  s.adapt_bin_size = 10;
  BinScheduler sched(s, {500, 50, 500, 0});
  for (int64_t step = 0; step < 40; ++step) {
    for (size_t k = 0; k < 4; ++k) {
      // Window 2 (steps 8..11) against window 1: tensor 1 changed by 100 %,
      // so it is light for steps 12..17, and no other tensor ever is.
      const bool light = k == 1 && step >= 12 && step < 18;
      const uint32_t target = std::vector<uint32_t>{500, 50, 500, 0}[k];
      EXPECT_EQ(sched.Lightened(k, step), light) << "tensor " << k << " step " << step;
      EXPECT_EQ(sched.BinSize(k, step), light ? 10u : target) << "tensor " << k << " step " << step;
    }
    const auto norms = Norms(step);
    sched.Observe(step, norms);
  }
  // A learning-rate drop lightens every binned tensor for the hold.
  sched.LrDropped(40);
  for (int64_t step = 40; step < 48; ++step) {
    EXPECT_EQ(sched.BinSize(0, step), step < 46 ? 10u : 500u);
    EXPECT_EQ(sched.BinSize(3, step), 0u);
  }
  // The light size never exceeds the target (tensor 1's is 50).
  BinSchedule big = s;
  big.adapt_bin_size = 80;
  BinScheduler b(big, {50});
  b.LrDropped(0);
  EXPECT_EQ(b.BinSize(0, 0), 50u);
}

TEST(ScheduleTest, AdaptiveStateRoundTripsAndRefusesDamage) {
  BinSchedule s;
  s.adapt_threshold = 0.5;
  s.adapt_window = 4;
  s.adapt_hold = 6;
  BinScheduler a(s, {500, 50, 500, 0}), b(s, {500, 50, 500, 0});
  for (int64_t step = 0; step < 10; ++step) a.Observe(step, Norms(step));
  const auto bytes = a.Save();
  ASSERT_TRUE(b.Load(bytes).ok());
  EXPECT_EQ(b.Save(), bytes);
  // Both continue alike from step 10 (window 2 ends at step 11).
  for (int64_t step = 10; step < 30; ++step) {
    a.Observe(step, Norms(step));
    b.Observe(step, Norms(step));
    for (size_t k = 0; k < 4; ++k) ASSERT_EQ(a.BinSize(k, step + 1), b.BinSize(k, step + 1));
  }
  EXPECT_TRUE(a.Lightened(1, 12));
  BinScheduler c(s, {500, 50, 500, 0});
  const auto before = c.Save();
  EXPECT_EQ(c.Load(std::vector<uint8_t>(bytes.begin(), bytes.end() - 1)).code(),
            StatusCode::kCorruption);
  BinScheduler three(s, {500, 50, 500});
  EXPECT_EQ(three.Load(bytes).code(), StatusCode::kCorruption);
  auto bad = bytes;
  bad[8 + 7] = 0x7F;  // tensor 0's sum: the top byte of a double, now NaN-like huge
  bad[8 + 6] = 0xF8;
  EXPECT_EQ(c.Load(bad).code(), StatusCode::kCorruption);
  EXPECT_EQ(c.Save(), before);
}

}  // namespace
}  // namespace adacomp
