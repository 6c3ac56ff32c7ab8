// wire/format.cc: the header and parameter-block parser. Truncations and
// bit flips, crafted invalid frames with a valid checksum, decode options.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <random>
#include <vector>

#include "core/endian.h"
#include "wire/frame.h"
#include "wire/frame_test_util.h"

namespace adacomp::wire {
namespace {

using namespace adacomp::wire::testing;  // NOLINT

// Every truncation and every single-bit flip is rejected, dst untouched.
TEST(FrameTest, TruncationsAndBitFlipsAreRejected) {
  for (const CodecConfig& cfg : AllConfigs()) {
    SCOPED_TRACE(Name(cfg));
    const auto frames = MakeFrames(cfg, 300, 2);
    const std::vector<uint8_t>& frame = frames[1];
    std::vector<float> dst(300);
    for (size_t i = 0; i < dst.size(); ++i) dst[i] = 0.25f * static_cast<float>(i);
    const std::vector<float> dst0 = dst;
    FrameInfo info;
    std::vector<float> scratch(300);
    ASSERT_TRUE(DecodeAccumulate(frame, scratch).ok());
    for (size_t len = 0; len < frame.size(); ++len) {
      std::span<const uint8_t> cut(frame.data(), len);
      ASSERT_FALSE(DecodeAccumulate(cut, dst).ok()) << "length " << len;
      ASSERT_FALSE(InspectFrame(cut, &info).ok());
    }
    std::vector<uint8_t> m = frame;
    for (size_t bit = 0; bit < 8 * frame.size(); ++bit) {
      m[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      const Status s = DecodeAccumulate(m, dst);
      ASSERT_FALSE(s.ok()) << "bit " << bit;
      m[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    }
    ASSERT_EQ(0, std::memcmp(dst.data(), dst0.data(), dst.size() * sizeof(float)));
  }
}

void ExpectError(const std::vector<uint8_t>& bytes, StatusCode code, const std::string& needle,
                 const DecodeOptions& opt = {}) {
  std::vector<float> dst(20, 1.0f);
  const Status s = DecodeAccumulate(bytes, dst, nullptr, opt);
  ASSERT_FALSE(s.ok()) << needle;
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("byte"), std::string::npos) << s.ToString();
  for (float v : dst) ASSERT_EQ(v, 1.0f);
}

TEST(FrameTest, CraftedInvalidFramesWithValidChecksum) {
  const std::vector<uint8_t> good = Encode(SmallAdaComp());
  // Layout: 0-1 magic, 2 version, 3 codec, 4 tensor id, 5 elements, 6 params
  // length, 7 value mode, 8 index code, 9 bin_size, 10 selected, 11-14 scale,
  // 15 payload length, 16.. payload.
  ASSERT_EQ(good[6], 8);
  {
    auto b = good;
    b[0] = 'X';
    ExpectError(b, StatusCode::kCorruption, "bad magic");
  }
  // One header byte changed, the checksum made right again.
  const struct {
    size_t at;
    uint8_t value;
    const char* error;
  } kBadBytes[] = {
      {2, 2, "unsupported format version 2"},
      {3, 9, "unknown codec id 9"},
      {7, 0x40, "reserved bits"},                           // value mode byte, a reserved bit
      {8, 0x42, "index code byte 0x42 has reserved bits"},  // reserved bit 6
      {9, 0, "bin_size is 0"},
      {10, 21, "selected count 21 exceeds"},
  };
  for (const auto& bad : kBadBytes) {
    SCOPED_TRACE(bad.error);
    auto b = good;
    b[bad.at] = bad.value;
    Reseal(&b);
    ExpectError(b, StatusCode::kCorruption, bad.error);
  }
  {
    auto b = good;
    internal::StoreF32(&b[11], INFINITY);
    Reseal(&b);
    ExpectError(b, StatusCode::kCorruption, "scale");
  }
  {
    auto b = good;
    b[4] = 0x83;  // tensor id 3 written in two bytes: 0x83 0x00 (not shortest)
    b.insert(b.begin() + 5, 0x00);
    Reseal(&b);
    ExpectError(b, StatusCode::kCorruption, "shortest form");
  }
  {
    auto b = good;
    b[6] = 7;  // params length one short
    Reseal(&b);
    ExpectError(b, StatusCode::kCorruption, "");
  }
  {
    // Index out of range: 3 entries but the last gap pushes past element 19.
    Frame f = SmallAdaComp();
    f.elements = 30;
    f.indices = {1, 7, 25};
    auto b = Encode(f);
    b[5] = 20;  // claim 20 elements
    Reseal(&b);
    ExpectError(b, StatusCode::kCorruption, "out of range");
  }
  {
    // Non-zero padding bit after the last entry.
    auto b = good;
    b[b.size() - 5] |= 0x80;
    Reseal(&b);
    ExpectError(b, StatusCode::kCorruption, "payload continues after the last entry");
  }
  {
    // An extra payload byte (length field grows by one, byte appended).
    auto b = good;
    b[15] += 1;
    b.insert(b.end() - 4, 0x00);
    Reseal(&b);
    ExpectError(b, StatusCode::kCorruption, "payload continues");
  }
  {
    auto b = good;
    b[b.size() - 1] ^= 0xFF;
    ExpectError(b, StatusCode::kCorruption, "checksum mismatch");
  }
  {
    auto b = good;
    b[15] = 0x7F;  // payload length past the end
    ExpectError(b, StatusCode::kCorruption, "truncated");
  }
  // Dense payload length mismatch and non-finite value.
  Frame d;
  d.codec = Codec::kDense;
  d.elements = 2;
  d.values = {1.0f, 2.0f};
  auto dense = Encode(d);
  {
    auto b = dense;
    internal::StoreF32(&b[b.size() - 8], NAN);
    Reseal(&b);
    std::vector<float> dst(2, 1.0f);
    Status s = DecodeAccumulate(b, dst);
    EXPECT_NE(s.message().find("not finite"), std::string::npos) << s.ToString();
    EXPECT_EQ(dst[1], 1.0f);
  }
  {
    auto b = dense;
    b[5] = 3;  // 3 elements, 8 payload bytes
    Reseal(&b);
    std::vector<float> dst(3, 1.0f);
    Status s = DecodeAccumulate(b, dst);
    EXPECT_NE(s.message().find("does not match"), std::string::npos) << s.ToString();
  }
}

TEST(FrameTest, DecodeOptionsLimits) {
  const std::vector<uint8_t> good = Encode(SmallAdaComp());
  std::vector<float> dst(20, 0.0f);
  DecodeOptions opt;
  opt.max_frame_bytes = good.size();
  EXPECT_TRUE(DecodeAccumulate(good, dst, nullptr, opt).ok());
  opt.max_frame_bytes = good.size() - 1;
  ExpectError(good, StatusCode::kOutOfRange, "max_frame_bytes", opt);
  opt = {};
  opt.max_elements = 19;
  ExpectError(good, StatusCode::kOutOfRange, "max_elements", opt);
  opt = {};
  opt.expected_tensor_id = 4;
  ExpectError(good, StatusCode::kInvalidArgument, "expected 4", opt);
  opt.expected_tensor_id = 3;
  EXPECT_TRUE(DecodeAccumulate(good, dst, nullptr, opt).ok());
  std::vector<float> wrong(21, 1.0f);
  EXPECT_EQ(DecodeAccumulate(good, wrong).code(), StatusCode::kInvalidArgument);
  for (float v : wrong) EXPECT_EQ(v, 1.0f);
}

}  // namespace
}  // namespace adacomp::wire
