// Limits of the decoder (issue 7 item 5): a frame larger than
// DecodeOptions::max_frame_bytes, an element count above max_elements or not
// matching the destination, and a tensor id other than expected_tensor_id
// are rejected before the destination (or *info) is touched, and before
// anything is allocated from the header's claims. Frames come from the real
// compressors of every codec; hostile headers are written byte by byte here.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "adacomp/codec.h"
#include "fuzz_util.h"

namespace adacomp {
namespace {

struct Case {
  const char* name;
  Codec codec;
  ValueMode values;
};

const Case kCases[] = {
    {"dense", Codec::kDense, ValueMode::kTernary},
    {"adacomp_ternary", Codec::kAdaComp, ValueMode::kTernary},
    {"adacomp_fp16", Codec::kAdaComp, ValueMode::kFp16},
    {"adacomp_fp32", Codec::kAdaComp, ValueMode::kFp32},
    {"topk", Codec::kTopK, ValueMode::kTernary},
    {"threshold", Codec::kThreshold, ValueMode::kTernary},
    {"onebit", Codec::kOneBit, ValueMode::kTernary},
    {"terngrad", Codec::kTernGrad, ValueMode::kTernary},
};

constexpr uint32_t kId = 17;
constexpr size_t kN = 300;

std::vector<uint8_t> MakeFrame(const Case& c) {
  CodecConfig cfg;
  cfg.codec = c.codec;
  cfg.values = c.values;
  cfg.bin_size = 20;
  cfg.density = 0.1;
  cfg.tau = 0.3f;
  auto comp = Compressor::Create(cfg, kId, kN);
  EXPECT_TRUE(comp.ok());
  std::vector<float> g(kN);
  for (size_t i = 0; i < kN; ++i) g[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
  std::vector<uint8_t> frame;
  EXPECT_TRUE((*comp)->Compress(g, &frame).ok());
  return frame;
}

// A destination whose every element is a NaN with a distinct payload: any
// write, even of the same value, and any read-modify-write shows.
std::vector<float> Canary(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = std::bit_cast<float>(static_cast<uint32_t>(0x7FC00000u | (i & 0x3FFFFF)));
  return v;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return fuzz::FirstBitDifference(a, b) < 0;
}

// DecodeAccumulate must fail with `code`, leaving dst and info as they were.
void ExpectRejected(std::span<const uint8_t> frame, size_t dst_size, const DecodeOptions& o,
                    StatusCode code, const std::string& what) {
  SCOPED_TRACE(what);
  std::vector<float> dst = Canary(dst_size);
  const std::vector<float> before = dst;
  FrameInfo info;
  info.tensor_id = 0xABCDEF;
  const Status s = DecodeAccumulate(frame, dst, &info, o);
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_TRUE(SameBits(dst, before)) << "dst was touched: " << s.ToString();
  EXPECT_EQ(info.tensor_id, 0xABCDEFu) << "info was written";
}

class LimitsTest : public ::testing::TestWithParam<Case> {};

TEST_P(LimitsTest, GoodFrameIsAcceptedWithTightLimits) {
  const std::vector<uint8_t> frame = MakeFrame(GetParam());
  DecodeOptions o;
  o.max_frame_bytes = frame.size();
  o.max_elements = kN;
  o.expected_tensor_id = kId;
  std::vector<float> dst(kN, 0.0f);
  FrameInfo info;
  const Status s = DecodeAccumulate(frame, dst, &info, o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(info.frame_bytes, frame.size());
  EXPECT_EQ(info.tensor_id, kId);
  EXPECT_EQ(info.elements, kN);
}

TEST_P(LimitsTest, FrameLargerThanMaxFrameBytes) {
  const std::vector<uint8_t> frame = MakeFrame(GetParam());
  DecodeOptions o;
  o.max_frame_bytes = frame.size() - 1;
  ExpectRejected(frame, kN, o, StatusCode::kOutOfRange, "one byte over");
  o.max_frame_bytes = 0;
  ExpectRejected(frame, kN, o, StatusCode::kOutOfRange, "limit 0");
  FrameInfo info;
  EXPECT_EQ(InspectFrame(frame, &info, o).code(), StatusCode::kOutOfRange);
}

TEST_P(LimitsTest, ElementCountAboveMaxElements) {
  const std::vector<uint8_t> frame = MakeFrame(GetParam());
  DecodeOptions o;
  o.max_elements = kN - 1;
  ExpectRejected(frame, kN, o, StatusCode::kOutOfRange, "max_elements one short");
}

TEST_P(LimitsTest, ElementCountNotMatchingDestination) {
  const std::vector<uint8_t> frame = MakeFrame(GetParam());
  for (size_t n : {size_t{0}, size_t{1}, kN - 1, kN + 1, 2 * kN}) {
    ExpectRejected(frame, n, DecodeOptions{}, StatusCode::kInvalidArgument,
                   "dst of " + std::to_string(n));
  }
}

TEST_P(LimitsTest, UnexpectedTensorId) {
  const std::vector<uint8_t> frame = MakeFrame(GetParam());
  for (uint32_t other : {0u, kId - 1, kId + 1, 0xFFFFFFFFu}) {
    DecodeOptions o;
    o.expected_tensor_id = other;
    SCOPED_TRACE("expected id " + std::to_string(other));
    std::vector<float> dst = Canary(kN);
    const std::vector<float> before = dst;
    const Status s = DecodeAccumulate(frame, dst, nullptr, o);
    EXPECT_TRUE(s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound)
        << s.ToString();
    EXPECT_NE(s.message().find(std::to_string(kId)), std::string::npos)
        << "the message should name the frame's id: " << s.message();
    EXPECT_TRUE(SameBits(dst, before));
    FrameInfo info;
    EXPECT_FALSE(InspectFrame(frame, &info, o).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, LimitsTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- Hostile headers, written by hand (docs/wire-format.md layout) ----------

void PutVarint(std::vector<uint8_t>* b, uint64_t v) {
  while (v >= 0x80) {
    b->push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  b->push_back(static_cast<uint8_t>(v));
}

// A terngrad frame header claiming `elements` and `payload` bytes, with
// `actual_payload` bytes present and a valid checksum over what is there.
std::vector<uint8_t> TernGradHeader(uint64_t elements, uint64_t payload, size_t actual_payload) {
  std::vector<uint8_t> b = {0x41, 0x43, 1, 5};
  PutVarint(&b, kId);
  PutVarint(&b, elements);
  b.push_back(4);
  b.insert(b.end(), {0, 0, 0x80, 0x3F});  // s = 1.0f
  PutVarint(&b, payload);
  b.resize(b.size() + actual_payload, 0);
  b.resize(b.size() + 4, 0);
  const uint32_t crc = internal::Crc32cExtend(0, b.data(), b.size() - 4);
  for (int i = 0; i < 4; ++i) b[b.size() - 4 + i] = static_cast<uint8_t>(crc >> (8 * i));
  return b;
}

TEST(HostileHeaders, WellFormedTernGradHeaderDecodes) {
  // The helper itself is right: 10 elements in 2 bytes decode.
  const std::vector<uint8_t> b = TernGradHeader(10, 2, 2);
  std::vector<float> dst(10, 0.0f);
  const Status s = DecodeAccumulate(b, dst);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(HostileHeaders, HugePayloadLengthIsOutOfRangeNotTruncation) {
  // Claims 2^40 payload bytes, has 8: the size limit answers first, and
  // nothing of that size is allocated (ASan/malloc limits would show it).
  for (uint64_t claim : {uint64_t{1} << 40, std::numeric_limits<uint64_t>::max() - 2}) {
    const std::vector<uint8_t> b = TernGradHeader(10, claim, 8);
    DecodeOptions o;
    o.max_frame_bytes = 1 << 20;
    ExpectRejected(b, 10, o, StatusCode::kOutOfRange, "payload claim " + std::to_string(claim));
    ExpectRejected(b, 10, DecodeOptions{}, StatusCode::kOutOfRange, "default limits");
  }
}

TEST(HostileHeaders, PayloadClaimBeyondTheBufferIsTruncation) {
  const std::vector<uint8_t> b = TernGradHeader(10, 1000, 2);
  ExpectRejected(b, 10, DecodeOptions{}, StatusCode::kCorruption, "claims 1000, has 2");
}

TEST(HostileHeaders, HugeElementCountIsRejectedBeforeDst) {
  // 2^40 elements with default limits (2^31), 2^20 with small ones; dst has
  // the claimed count modulo what we can allocate (here 0 and 10): the answer
  // must be the limit, not a size mismatch found after some work.
  const std::vector<uint8_t> b = TernGradHeader(uint64_t{1} << 40, 2, 2);
  ExpectRejected(b, 0, DecodeOptions{}, StatusCode::kOutOfRange, "2^40 elements");
  ExpectRejected(b, 10, DecodeOptions{}, StatusCode::kOutOfRange, "2^40 elements, dst 10");
  const std::vector<uint8_t> c = TernGradHeader((uint64_t{1} << 20) + 1, 2, 2);
  DecodeOptions o;
  o.max_elements = uint64_t{1} << 20;
  ExpectRejected(c, 10, o, StatusCode::kOutOfRange, "2^20+1 elements");
}

TEST(HostileHeaders, ElementCountNotMatchingPayloadIsCorruption) {
  // 11 elements need 3 trit bytes; 2 are there.
  const std::vector<uint8_t> b = TernGradHeader(11, 2, 2);
  ExpectRejected(b, 11, DecodeOptions{}, StatusCode::kCorruption, "11 elements in 2 bytes");
}

TEST(HostileHeaders, TensorIdCheckedBeforeDstSize) {
  const std::vector<uint8_t> b = TernGradHeader(10, 2, 2);
  DecodeOptions o;
  o.expected_tensor_id = kId + 1;
  std::vector<float> dst = Canary(10);
  const std::vector<float> before = dst;
  const Status s = DecodeAccumulate(b, dst, nullptr, o);
  EXPECT_TRUE(s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound)
      << s.ToString();
  EXPECT_TRUE(SameBits(dst, before));
}

}  // namespace
}  // namespace adacomp
