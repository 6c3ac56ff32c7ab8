// Compressor::Snapshot / Restore for every codec: after a restore the
// compressor writes the same frames and holds the same state as it did
// when the snapshot was taken; a snapshot of the wrong size is refused and
// changes nothing. LayerType and the default bin sizes, codec level.
#include <gtest/gtest.h>

#include <vector>

#include "adacomp/codec.h"
#include "core/test_util.h"

namespace adacomp {
namespace {

std::vector<CodecConfig> Configs() { return testing::EveryCodecTestConfig(5); }

TEST(SnapshotTest, RestoreUndoesTheCompressionsSince) {
  constexpr uint64_t n = 3001;
  for (const CodecConfig& cfg : Configs()) {
    SCOPED_TRACE(std::string(CodecName(cfg.codec)));
    auto c = std::move(Compressor::Create(cfg, 4, n).value());
    std::vector<uint8_t> frame;
    for (int s = 0; s < 3; ++s) {
      frame.clear();
      ASSERT_TRUE(c->Compress(testing::GradientLike(n, s), &frame).ok());
    }
    CompressorSnapshot snap;
    c->Snapshot(&snap);
    const std::vector<uint8_t> state = c->SaveState();
    // Two steps after the snapshot, then undone, then redone.
    std::vector<uint8_t> first, again;
    for (int s = 3; s < 5; ++s) ASSERT_TRUE(c->Compress(testing::GradientLike(n, s), &first).ok());
    EXPECT_NE(c->SaveState(), state);
    ASSERT_TRUE(c->Restore(snap).ok());
    EXPECT_EQ(c->SaveState(), state);
    for (int s = 3; s < 5; ++s) ASSERT_TRUE(c->Compress(testing::GradientLike(n, s), &again).ok());
    EXPECT_EQ(again, first);
    // The snapshot survives a restore and can be used again.
    ASSERT_TRUE(c->Restore(snap).ok());
    EXPECT_EQ(c->SaveState(), state);
  }
}

TEST(SnapshotTest, SnapshotOfAnotherSizeIsRefused) {
  for (const CodecConfig& cfg : Configs()) {
    SCOPED_TRACE(std::string(CodecName(cfg.codec)));
    auto small = std::move(Compressor::Create(cfg, 1, 10).value());
    auto big = std::move(Compressor::Create(cfg, 1, 20).value());
    std::vector<uint8_t> frame;
    ASSERT_TRUE(big->Compress(testing::GradientLike(20, 1), &frame).ok());
    const std::vector<uint8_t> state = big->SaveState();
    CompressorSnapshot snap;
    small->Snapshot(&snap);
    const bool has_residue = !big->residue().empty();
    const Status st = big->Restore(snap);
    if (has_residue) {
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
      EXPECT_EQ(big->SaveState(), state);
    } else {
      // Only the step counter: any snapshot of the codec fits.
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
  }
}

TEST(LayerTypeTest, NamesAndDefaultBinSizes) {
  EXPECT_STREQ(LayerTypeName(LayerType::kConv), "conv");
  EXPECT_STREQ(LayerTypeName(LayerType::kFc), "fc");
  EXPECT_STREQ(LayerTypeName(LayerType::kLstm), "lstm");
  EXPECT_STREQ(LayerTypeName(LayerType::kOther), "other");
  EXPECT_EQ(DefaultBinSize(LayerType::kConv), 50u);
  EXPECT_EQ(DefaultBinSize(LayerType::kFc), 500u);
  EXPECT_EQ(DefaultBinSize(LayerType::kLstm), 500u);
  EXPECT_EQ(DefaultBinSize(LayerType::kOther), 500u);
  testing::ExpectNamesRoundTrip(
      {LayerType::kConv, LayerType::kFc, LayerType::kLstm, LayerType::kOther}, LayerTypeName,
      ParseLayerType, "attention");
}

}  // namespace
}  // namespace adacomp
