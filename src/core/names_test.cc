// Tests of core/names.h (the enum name tables) and of the name functions
// built on it: each name against a hand-written list, offsets, unknown
// values and names.
#include "core/names.h"

#include <gtest/gtest.h>

#include "adacomp/codec.h"
#include "core/test_util.h"

namespace adacomp {
namespace {

enum class Colour : int { kRed = 3, kGreen = 4, kBlue = 5 };
constexpr std::array<std::string_view, 3> kColours = {"red", "green", "blue"};

TEST(Names, OfAndFindWithAFirstValue) {
  EXPECT_EQ(names::Of(Colour::kRed, kColours, "?", 3), "red");
  EXPECT_EQ(names::Of(Colour::kBlue, kColours, "?", 3), "blue");
  EXPECT_EQ(names::Of(static_cast<Colour>(2), kColours, "?", 3), "?");
  EXPECT_EQ(names::Of(static_cast<Colour>(6), kColours, "?", 3), "?");
  EXPECT_EQ(names::Find<Colour>("green", kColours, 3), Colour::kGreen);
  EXPECT_FALSE(names::Find<Colour>("Green", kColours, 3).has_value());
  EXPECT_FALSE(names::Find<Colour>("", kColours, 3).has_value());
}

TEST(Names, ParseSaysWhatItGotAndWhatItExpected) {
  auto ok = names::Parse<Colour>("blue", kColours, "colour ", " (red, green or blue)", 3);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, Colour::kBlue);
  auto bad = names::Parse<Colour>("teal", kColours, "colour ", " (red, green or blue)", 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "colour 'teal' (red, green or blue)");
}

// The names are wire, CLI and report vocabulary: each one spelled out here.
TEST(Names, EveryEnumNameAsDocumented) {
  const std::pair<Codec, const char*> codecs[] = {
      {Codec::kDense, "dense"},   {Codec::kAdaComp, "adacomp"},
      {Codec::kTopK, "topk"},     {Codec::kThreshold, "threshold"},
      {Codec::kOneBit, "onebit"}, {Codec::kTernGrad, "terngrad"}};
  for (const auto& [codec, name] : codecs) EXPECT_EQ(CodecName(codec), name);
  EXPECT_EQ(CodecName(static_cast<Codec>(6)), "unknown");
  EXPECT_EQ(ValueModeName(ValueMode::kTernary), "ternary");
  EXPECT_EQ(ValueModeName(ValueMode::kFp16), "fp16");
  EXPECT_EQ(ValueModeName(ValueMode::kFp32), "fp32");
  EXPECT_EQ(ValueModeName(static_cast<ValueMode>(3)), "unknown");
  EXPECT_STREQ(LayerTypeName(static_cast<LayerType>(4)), "?");
  EXPECT_EQ(StatusCodeName(StatusCode::kOk), "OK");
  EXPECT_EQ(StatusCodeName(StatusCode::kIOError), "IOError");
  EXPECT_EQ(StatusCodeName(StatusCode::kInternal), "Internal");
  EXPECT_EQ(StatusCodeName(static_cast<StatusCode>(9)), "Unknown");
  testing::ExpectNamesRoundTrip({Codec::kDense, Codec::kAdaComp, Codec::kTopK, Codec::kThreshold,
                                 Codec::kOneBit, Codec::kTernGrad},
                                CodecName, ParseCodec, "zip");
  testing::ExpectNamesRoundTrip({ValueMode::kTernary, ValueMode::kFp16, ValueMode::kFp32},
                                ValueModeName, ParseValueMode, "fp8");
  auto bad = ParseCodec("zip");
  EXPECT_EQ(bad.status().message(),
            "unknown codec 'zip' (expected dense, adacomp, topk, threshold, onebit or terngrad)");
}

}  // namespace
}  // namespace adacomp
