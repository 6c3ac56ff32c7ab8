// wire/frame.cc: the decoded structure. Encode -> decode -> re-encode is the
// identity, inconsistent structures are refused, resealed mutations are
// rejected or canonical, both index families round-trip.
#include "wire/frame.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <random>
#include <vector>

#include "wire/frame_test_util.h"

namespace adacomp::wire {
namespace {

using namespace adacomp::wire::testing;  // NOLINT

TEST(FrameTest, EncodeDecodeReencodeIsIdentity) {
  for (const CodecConfig& cfg : AllConfigs()) {
    for (size_t n : {0, 1, 5, 49, 50, 51, 1000, 33333}) {
      SCOPED_TRACE(Name(cfg) + " n=" + std::to_string(n));
      for (const auto& bytes : MakeFrames(cfg, n, 3)) {
        Frame f;
        size_t used = 0;
        ASSERT_TRUE(DecodeFrame(bytes, {}, &f, &used).ok());
        EXPECT_EQ(used, bytes.size());
        EXPECT_EQ(f.codec, cfg.codec);
        EXPECT_EQ(f.elements, n);
        std::vector<uint8_t> again;
        ASSERT_TRUE(EncodeFrame(f, &again).ok());
        ASSERT_EQ(again, bytes);
        FrameInfo info;
        ASSERT_TRUE(InspectFrame(bytes, &info).ok());
        EXPECT_EQ(info.frame_bytes, bytes.size());
        EXPECT_EQ(info.tensor_id, 5u);
        EXPECT_EQ(info.payload_bytes + info.params_bytes + kCrcBytes +
                      (bytes.size() - info.payload_bytes - info.params_bytes - kCrcBytes),
                  bytes.size());
      }
    }
  }
}

TEST(FrameTest, EncodeRejectsInconsistentStructures) {
  Frame f;
  f.codec = Codec::kAdaComp;
  f.elements = 10;
  f.params.bin_size = 5;
  f.params.scale = 1.0f;
  f.indices = {3, 2};
  f.negative = {0, 0};
  f.params.selected = 2;
  std::vector<uint8_t> out;
  EXPECT_FALSE(EncodeFrame(f, &out).ok());  // not increasing
  f.indices = {3, 10};
  EXPECT_FALSE(EncodeFrame(f, &out).ok());  // out of range
  f.indices = {3, 9};
  f.params.selected = 3;
  EXPECT_FALSE(EncodeFrame(f, &out).ok());  // count mismatch
  f.params.selected = 2;
  f.params.bin_size = 0;
  EXPECT_FALSE(EncodeFrame(f, &out).ok());
  f.params.bin_size = 5;
  f.params.scale = NAN;
  EXPECT_FALSE(EncodeFrame(f, &out).ok());
  EXPECT_TRUE(out.empty());
  f.params.scale = 0.5f;
  ASSERT_TRUE(EncodeFrame(f, &out).ok());
  std::vector<float> dst(10, 0.0f);
  ASSERT_TRUE(DecodeAccumulate(out, dst).ok());
  EXPECT_EQ(dst[3], 0.5f);
  EXPECT_EQ(dst[9], 0.5f);
}

// Random damage behind a valid checksum: the decoder must never crash or
// write out of bounds (run under the sanitizers in CI), must leave dst alone
// when it rejects, and any frame it accepts must re-encode to the same bytes
// (every accepted frame is canonical).
TEST(FrameTest, ResealedMutationsAreRejectedOrCanonical) {
  std::mt19937 rng(2024);
  size_t accepted = 0, rejected = 0;
  for (const CodecConfig& cfg : AllConfigs()) {
    for (size_t n : {1, 17, 300}) {
      const auto frames = MakeFrames(cfg, n, 2);
      for (int trial = 0; trial < 300; ++trial) {
        std::vector<uint8_t> b = frames[1];
        const int edits = 1 + static_cast<int>(rng() % 3);
        for (int e = 0; e < edits; ++e) {
          const size_t at = rng() % (b.size() - 4);
          switch (rng() % 4) {
            case 0:
              b[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
              break;
            case 1:
              b[at] = static_cast<uint8_t>(rng());
              break;
            case 2:
              b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), static_cast<uint8_t>(rng()));
              break;
            default:
              if (b.size() > 5) b.erase(b.begin() + static_cast<std::ptrdiff_t>(at));
              break;
          }
        }
        Reseal(&b);
        std::vector<float> dst(n, 7.0f);
        FrameInfo info;
        const Status s = DecodeAccumulate(b, dst, &info);
        if (!s.ok()) {
          ++rejected;
          for (float v : dst) ASSERT_EQ(v, 7.0f);
          continue;
        }
        ++accepted;
        Frame f;
        size_t used = 0;
        ASSERT_TRUE(DecodeFrame(b, {}, &f, &used).ok());
        std::vector<uint8_t> again;
        ASSERT_TRUE(EncodeFrame(f, &again).ok());
        ASSERT_EQ(again, std::vector<uint8_t>(b.begin(), b.begin() + used));
      }
    }
  }
  EXPECT_GT(rejected, 0u);
  EXPECT_GT(accepted, 0u);  // e.g. a changed value or tensor id is still a valid frame
}

TEST(FrameTest, BothIndexFamiliesRoundTrip) {
  for (int f = 0; f < 2; ++f) {
    for (int k : {0, 1, 5, 12, 31}) {
      Frame fr;
      fr.codec = Codec::kTopK;
      fr.elements = 100000;
      fr.indices = {0, 1, 2, 900, 901, 50000, 99999};
      fr.values.assign(fr.indices.size(), 1.0f);
      fr.params.selected = fr.indices.size();
      fr.params.code = {static_cast<IndexFamily>(f), static_cast<uint8_t>(k)};
      std::vector<uint8_t> bytes;
      ASSERT_TRUE(EncodeFrame(fr, &bytes).ok());
      Frame back;
      ASSERT_TRUE(DecodeFrame(bytes, {}, &back).ok()) << f << " " << k;
      EXPECT_EQ(back.indices, fr.indices);
      EXPECT_EQ(back.params.code, fr.params.code);
      std::vector<uint8_t> again;
      ASSERT_TRUE(EncodeFrame(back, &again).ok());
      EXPECT_EQ(again, bytes);
    }
  }
}

}  // namespace
}  // namespace adacomp::wire
