// Compressor::Mark / UndoToMark / KeepSinceMark for every codec: checked
// against a twin compressor that saw the same gradients and was never
// marked. adacomp keeps the marked residue in a second buffer and its
// pending ternary corrections beside it (compress/adacomp.cc), so nothing
// between Mark() and the first compression may touch the twin's
// representation: the twin is compared only through the frames both write
// afterwards and, at the end, SaveState().
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "adacomp/codec.h"
#include "core/test_util.h"

namespace adacomp {
namespace {

std::vector<CodecConfig> Configs() { return testing::EveryCodecTestConfig(5); }

std::unique_ptr<Compressor> Make(const CodecConfig& cfg, uint64_t n) {
  return std::move(Compressor::Create(cfg, 3, n).value());
}

// Compresses gradient `seed` with both; expects the same frame.
void Both(Compressor* a, Compressor* b, uint64_t n, uint64_t seed) {
  const std::vector<float> g = testing::GradientLike(n, seed);
  std::vector<uint8_t> fa, fb;
  ASSERT_TRUE(a->Compress(g, &fa).ok());
  ASSERT_TRUE(b->Compress(g, &fb).ok());
  ASSERT_EQ(fa, fb) << "step " << seed;
}

// Marks a after a history both share, compresses `after` gradients with a
// alone, undoes them; then both must go on alike.
void UndoCase(const CodecConfig& cfg, uint64_t n, int after) {
  auto a = Make(cfg, n), b = Make(cfg, n);
  for (uint64_t s = 0; s < 3; ++s) Both(a.get(), b.get(), n, s);
  a->Mark();
  std::vector<uint8_t> frame;
  for (int k = 0; k < after; ++k) {
    ASSERT_TRUE(a->Compress(testing::GradientLike(n, 100 + k), &frame).ok());
  }
  ASSERT_TRUE(a->UndoToMark().ok());
  for (uint64_t s = 3; s < 6; ++s) Both(a.get(), b.get(), n, s);
  EXPECT_EQ(a->SaveState(), b->SaveState());
}

// Marks a after a shared history, compresses `after` gradients with both
// (the first one moves a's residue into its second buffer), keeps them.
void KeepCase(const CodecConfig& cfg, uint64_t n, int after) {
  auto a = Make(cfg, n), b = Make(cfg, n);
  for (uint64_t s = 0; s < 3; ++s) Both(a.get(), b.get(), n, s);
  a->Mark();
  for (int k = 0; k < after; ++k) Both(a.get(), b.get(), n, 100 + static_cast<uint64_t>(k));
  a->KeepSinceMark();
  for (uint64_t s = 3; s < 5; ++s) Both(a.get(), b.get(), n, s);
  EXPECT_EQ(a->SaveState(), b->SaveState());
}

TEST(MarkTest, UndoPutsBackTheMarkedState) {
  constexpr uint64_t n = 3001;
  for (const CodecConfig& cfg : Configs()) {
    for (int after : {0, 1, 2, 3}) {
      SCOPED_TRACE(std::string(CodecName(cfg.codec)) + " values " +
                   std::string(ValueModeName(cfg.values)) + ", compressions after the mark " +
                   std::to_string(after));
      UndoCase(cfg, n, after);
    }
  }
}

TEST(MarkTest, LargeTensorsInChunksAndThreads) {
  // Many chunks of the fused pass (about 64K elements each), on 1 and 2
  // threads: each chunk is copied from the marked residue, with the elements
  // past it where the vector kernel applies corrections early.
  constexpr uint64_t n = 300000;
  CodecConfig cfg = testing::TestCodecConfig(Codec::kAdaComp, 7);
  for (int threads : {1, 2}) {
    cfg.threads = threads;
    for (ValueMode v : {ValueMode::kTernary, ValueMode::kFp16}) {
      cfg.values = v;
      SCOPED_TRACE(std::string(ValueModeName(v)) + ", threads " + std::to_string(threads));
      UndoCase(cfg, n, 1);
      UndoCase(cfg, n, 2);
      KeepCase(cfg, n, 1);
      KeepCase(cfg, n, 2);
    }
  }
}

TEST(MarkTest, KeepGoesOnAsIfUnmarked) {
  constexpr uint64_t n = 2500;
  for (const CodecConfig& cfg : Configs()) {
    SCOPED_TRACE(std::string(CodecName(cfg.codec)) + " " + std::string(ValueModeName(cfg.values)));
    auto a = Make(cfg, n), b = Make(cfg, n);
    for (uint64_t s = 0; s < 6; ++s) {
      if (s % 2 == 0) a->Mark();  // marked for one or two compressions, then kept
      Both(a.get(), b.get(), n, s);
      if (s % 2 == 1) a->KeepSinceMark();
    }
    EXPECT_EQ(a->SaveState(), b->SaveState());
    // Kept: nothing left to undo.
    EXPECT_EQ(a->UndoToMark().code(), StatusCode::kInvalidArgument);
  }
}

TEST(MarkTest, UndoWithoutAMarkIsRefused) {
  for (const CodecConfig& cfg : Configs()) {
    SCOPED_TRACE(CodecName(cfg.codec));
    auto a = Make(cfg, 100);
    std::vector<uint8_t> frame;
    ASSERT_TRUE(a->Compress(testing::GradientLike(100, 1), &frame).ok());
    const std::vector<uint8_t> state = a->SaveState();
    EXPECT_EQ(a->UndoToMark().code(), StatusCode::kInvalidArgument);
    a->Mark();
    ASSERT_TRUE(a->Compress(testing::GradientLike(100, 2), &frame).ok());
    ASSERT_TRUE(a->UndoToMark().ok());
    EXPECT_EQ(a->UndoToMark().code(), StatusCode::kInvalidArgument);  // the mark is used up
    EXPECT_EQ(a->SaveState(), state);
  }
}

TEST(MarkTest, AdaCompReadsAndBinSizeChangesBetweenMarkAndCompress) {
  // residue() and SetBinSize() apply the pending corrections to the marked
  // buffer before the compression moves it; the undo must not apply them
  // twice. The twin gets the same bin size (it stays as last set).
  constexpr uint64_t n = 4000;
  const CodecConfig cfg = testing::TestCodecConfig(Codec::kAdaComp, 9);
  for (int touch = 0; touch < 2; ++touch) {
    SCOPED_TRACE(touch == 0 ? "residue()" : "SetBinSize");
    auto a = Make(cfg, n), b = Make(cfg, n);
    for (uint64_t s = 0; s < 3; ++s) Both(a.get(), b.get(), n, s);
    a->Mark();
    if (touch == 0) {
      EXPECT_EQ(a->residue().size(), n);
    } else {
      ASSERT_TRUE(a->SetBinSize(8).ok());
      ASSERT_TRUE(b->SetBinSize(8).ok());
    }
    std::vector<uint8_t> frame;
    ASSERT_TRUE(a->Compress(testing::GradientLike(n, 50), &frame).ok());
    ASSERT_TRUE(a->UndoToMark().ok());
    for (uint64_t s = 3; s < 6; ++s) Both(a.get(), b.get(), n, s);
    EXPECT_EQ(a->SaveState(), b->SaveState());
  }
}

TEST(MarkTest, AdaCompTwoPassPathAfterMark) {
  // A gradient element of 2^126 sends adacomp down its two-pass path (values
  // near the float range), which copies the marked residue instead.
  constexpr uint64_t n = 1000;
  const CodecConfig cfg = testing::TestCodecConfig(Codec::kAdaComp, 11);
  auto a = Make(cfg, n), b = Make(cfg, n);
  for (uint64_t s = 0; s < 3; ++s) Both(a.get(), b.get(), n, s);
  a->Mark();
  std::vector<float> huge = testing::GradientLike(n, 60);
  huge[17] = std::ldexp(1.0f, 126);
  std::vector<uint8_t> frame;
  ASSERT_TRUE(a->Compress(huge, &frame).ok());
  ASSERT_TRUE(a->Compress(testing::GradientLike(n, 61), &frame).ok());
  ASSERT_TRUE(a->UndoToMark().ok());
  for (uint64_t s = 3; s < 6; ++s) Both(a.get(), b.get(), n, s);
  EXPECT_EQ(a->SaveState(), b->SaveState());
  // Kept instead: the copy is the new residue's start.
  a->Mark();
  std::vector<uint8_t> fa, fb;
  ASSERT_TRUE(a->Compress(huge, &fa).ok());
  ASSERT_TRUE(b->Compress(huge, &fb).ok());
  EXPECT_EQ(fa, fb);
  a->KeepSinceMark();
  for (uint64_t s = 6; s < 8; ++s) Both(a.get(), b.get(), n, s);
  EXPECT_EQ(a->SaveState(), b->SaveState());
}

TEST(MarkTest, AdaCompRefusesANonFiniteGradientAfterMark) {
  // The first compression after Mark() runs without a check pass (the marked
  // residue is not written). A NaN or Inf, or an R + dW that overflows, must
  // still give the checked path's error, name the element, and leave the
  // state as it was; the twin, never marked, checks first.
  const float inf = std::numeric_limits<float>::infinity();
  for (int threads : {1, 2}) {
    for (uint64_t n : {uint64_t{1000}, uint64_t{300000}}) {
      CodecConfig cfg = testing::TestCodecConfig(Codec::kAdaComp, 7);
      cfg.threads = threads;
      for (uint64_t at : {uint64_t{0}, n / 2 + 1, n - 1}) {
        for (int kind = 0; kind < 3; ++kind) {
          SCOPED_TRACE("threads " + std::to_string(threads) + ", n " + std::to_string(n) +
                       ", element " + std::to_string(at) + ", kind " + std::to_string(kind));
          auto a = Make(cfg, n), b = Make(cfg, n);
          for (uint64_t s = 0; s < 3; ++s) Both(a.get(), b.get(), n, s);
          std::vector<float> bad = testing::GradientLike(n, 70);
          if (kind == 2) {
            // A residue of about 2^110 at `at` (still below the bound that
            // sends compressions down the two-pass path), then the largest
            // float there: R + dW overflows though dW is finite.
            std::vector<float> push = testing::GradientLike(n, 71);
            push[at] = std::ldexp(1.0f, 110);
            Both(a.get(), b.get(), n, 71);
            std::vector<uint8_t> fa, fb;
            ASSERT_TRUE(a->Compress(push, &fa).ok());
            ASSERT_TRUE(b->Compress(push, &fb).ok());
            ASSERT_EQ(fa, fb);
            bad[at] = std::numeric_limits<float>::max();
          } else {
            bad[at] = kind == 0 ? std::nanf("") : -inf;
          }
          a->Mark();
          std::vector<uint8_t> fa = {1, 2, 3}, fb;
          const Status sa = a->Compress(bad, &fa);
          const Status sb = b->Compress(bad, &fb);
          EXPECT_EQ(sa.code(), StatusCode::kInvalidArgument);
          EXPECT_EQ(sa.ToString(), sb.ToString());
          if (kind < 2) {
            EXPECT_NE(sa.ToString().find(std::to_string(at)), std::string::npos);
          }
          EXPECT_EQ(fa, (std::vector<uint8_t>{1, 2, 3}));  // the frame untouched
          // Nothing changed: undoing, keeping, or going on all match the twin.
          if (at == 0) {
            ASSERT_TRUE(a->UndoToMark().ok());
          }
          for (uint64_t s = 3; s < 5; ++s) Both(a.get(), b.get(), n, s);
          if (at != 0) a->KeepSinceMark();
          Both(a.get(), b.get(), n, 5);
          EXPECT_EQ(a->SaveState(), b->SaveState());
        }
      }
    }
  }
}

TEST(MarkTest, AdaCompTwoPassPathWhenMarkedWithAHugeResidue) {
  // A residue near the float range (its bound at 2^126 or more) sends the
  // first compression after Mark() down the two-pass path, which copies the
  // marked residue; undo and keep both match the twin.
  constexpr uint64_t n = 1000;
  const CodecConfig cfg = testing::TestCodecConfig(Codec::kAdaComp, 11);
  for (bool undo : {true, false}) {
    auto a = Make(cfg, n), b = Make(cfg, n);
    for (uint64_t s = 0; s < 2; ++s) Both(a.get(), b.get(), n, s);
    std::vector<float> huge = testing::GradientLike(n, 60);
    huge[17] = std::ldexp(1.0f, 126);
    std::vector<uint8_t> fa, fb;
    ASSERT_TRUE(a->Compress(huge, &fa).ok());
    ASSERT_TRUE(b->Compress(huge, &fb).ok());
    a->Mark();
    if (undo) {
      ASSERT_TRUE(a->Compress(testing::GradientLike(n, 61), &fa).ok());
      ASSERT_TRUE(a->UndoToMark().ok());
    } else {
      Both(a.get(), b.get(), n, 61);
      a->KeepSinceMark();
    }
    for (uint64_t s = 3; s < 6; ++s) Both(a.get(), b.get(), n, s);
    EXPECT_EQ(a->SaveState(), b->SaveState());
  }
}

TEST(MarkTest, LoadStateEndsTheMark) {
  constexpr uint64_t n = 500;
  const CodecConfig cfg = testing::TestCodecConfig(Codec::kAdaComp, 13);
  auto a = Make(cfg, n);
  std::vector<uint8_t> frame;
  ASSERT_TRUE(a->Compress(testing::GradientLike(n, 1), &frame).ok());
  const std::vector<uint8_t> state = a->SaveState();
  a->Mark();
  ASSERT_TRUE(a->Compress(testing::GradientLike(n, 2), &frame).ok());
  ASSERT_TRUE(a->LoadState(state).ok());
  EXPECT_EQ(a->UndoToMark().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a->SaveState(), state);
}

}  // namespace
}  // namespace adacomp
