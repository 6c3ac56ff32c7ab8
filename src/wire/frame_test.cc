// Frame format: round trips, truncation and bit flips, crafted invalid
// frames with a valid checksum, decode options.
#include "wire/frame.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <random>
#include <vector>

#include "core/crc32c.h"
#include "core/endian.h"
#include "core/test_util.h"

namespace adacomp::wire {
namespace {

std::vector<CodecConfig> AllConfigs() {
  std::vector<CodecConfig> out;
  for (uint8_t id = 0; id <= kMaxCodecId; ++id) {
    CodecConfig c;
    c.codec = static_cast<Codec>(id);
    c.bin_size = 50;
    c.density = 0.05;
    c.tau = 1e-3f;
    c.seed = 9;
    out.push_back(c);
    if (c.codec == Codec::kAdaComp) {
      c.values = ValueMode::kFp16;
      out.push_back(c);
      c.values = ValueMode::kFp32;
      out.push_back(c);
    }
  }
  return out;
}

std::string Name(const CodecConfig& c) {
  std::string name(CodecName(c.codec));
  if (c.codec == Codec::kAdaComp) {
    name += '/';
    name += ValueModeName(c.values);
  }
  return name;
}

// Frames of `steps` successive steps of one tensor.
std::vector<std::vector<uint8_t>> MakeFrames(const CodecConfig& cfg, size_t n, int steps) {
  auto comp = std::move(Compressor::Create(cfg, 5, n).value());
  std::vector<std::vector<uint8_t>> frames;
  for (int s = 0; s < steps; ++s) {
    std::vector<uint8_t> f;
    EXPECT_TRUE(comp->Compress(testing::GradientLike(n, 11 * s + n), &f).ok());
    frames.push_back(f);
  }
  return frames;
}

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

// Replaces the checksum so that a deliberately broken frame passes it.
void Reseal(std::vector<uint8_t>* f) {
  const size_t end = f->size() - 4;
  internal::StoreU32(f->data() + end, internal::Crc32cExtend(0, f->data(), end));
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

std::vector<uint8_t> Encode(const Frame& f) {
  std::vector<uint8_t> out;
  EXPECT_TRUE(EncodeFrame(f, &out).ok());
  return out;
}

Frame SmallAdaComp() {
  Frame f;
  f.codec = Codec::kAdaComp;
  f.tensor_id = 3;
  f.elements = 20;
  f.params.bin_size = 10;
  f.params.scale = 0.5f;
  f.params.selected = 3;
  f.params.code = {IndexFamily::kRice, 2};
  f.indices = {1, 7, 19};
  f.negative = {0, 1, 1};
  return f;
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
  {
    auto b = good;
    b[2] = 2;
    Reseal(&b);
    ExpectError(b, StatusCode::kCorruption, "unsupported format version 2");
  }
  {
    auto b = good;
    b[3] = 9;
    Reseal(&b);
    ExpectError(b, StatusCode::kCorruption, "unknown codec id 9");
  }
  {
    auto b = good;
    b[7] = 0x40;  // reserved bit
    Reseal(&b);
    ExpectError(b, StatusCode::kCorruption, "reserved bits");
  }
  {
    auto b = good;
    b[8] = 0x42;  // index code byte, reserved bit 6
    Reseal(&b);
    ExpectError(b, StatusCode::kCorruption, "index code byte 0x42 has reserved bits");
  }
  {
    auto b = good;
    b[9] = 0;
    Reseal(&b);
    ExpectError(b, StatusCode::kCorruption, "bin_size is 0");
  }
  {
    auto b = good;
    b[10] = 21;
    Reseal(&b);
    ExpectError(b, StatusCode::kCorruption, "selected count 21 exceeds");
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

TEST(FrameTest, AccumulatesSeveralLearnersAndFollowingFrames) {
  std::vector<uint8_t> two = Encode(SmallAdaComp());
  const size_t first = two.size();
  Frame g = SmallAdaComp();
  g.negative = {1, 1, 1};
  ASSERT_TRUE(EncodeFrame(g, &two).ok());
  std::vector<float> dst(20, 0.0f);
  FrameInfo info;
  ASSERT_TRUE(DecodeAccumulate(two, dst, &info).ok());  // decodes the first frame only
  EXPECT_EQ(info.frame_bytes, first);
  ASSERT_TRUE(DecodeAccumulate(std::span(two).subspan(first), dst).ok());
  EXPECT_EQ(dst[1], 0.0f);
  EXPECT_EQ(dst[7], -1.0f);
  EXPECT_EQ(dst[19], -1.0f);
  EXPECT_EQ(dst[0], 0.0f);
  EXPECT_EQ(info.selected, 3u);
  EXPECT_EQ(info.scale, 0.5f);
  EXPECT_EQ(info.bin_size, 10u);
}

TEST(FrameTest, IndexCodeChoice) {
  // Evenly spread indices: Rice wins; clustered ones (mixture of small and
  // huge gaps): Exp-Golomb wins. Either way the choice is optimal over all k.
  std::vector<uint32_t> even, clustered;
  for (uint32_t i = 0; i < 1000; ++i) even.push_back(i * 100 + (i * 37) % 50);
  for (uint32_t i = 0; i < 1000; ++i) clustered.push_back((i / 10) * 100000 + (i % 10) * 3);
  std::mt19937 rng(5);
  std::vector<std::vector<uint32_t>> sets = {even, clustered};
  for (int t = 0; t < 40; ++t) {  // random sets of various densities and mixtures
    std::vector<uint32_t> idx;
    uint32_t at = 0;
    const uint32_t small = 1 + rng() % 64, large = 1 + rng() % 100000;
    const int mix = static_cast<int>(rng() % 10);
    for (int e = 0; e < 500; ++e) {
      at += 1 + rng() % (static_cast<int>(rng() % 10) < mix ? large : small);
      idx.push_back(at);
    }
    sets.push_back(idx);
  }
  for (const auto& idx : sets) {
    uint64_t chosen_bits = 0;
    const IndexCode chosen = ChooseIndexCode(idx, &chosen_bits);
    EXPECT_EQ(chosen_bits, IndexCodeBits(idx, chosen));
    uint64_t best_rice = ~0ull, best_any = ~0ull;
    for (int f = 0; f < 2; ++f) {
      for (int k = 0; k <= kMaxCodeK; ++k) {
        const uint64_t bits =
            IndexCodeBits(idx, {static_cast<IndexFamily>(f), static_cast<uint8_t>(k)});
        best_any = std::min(best_any, bits);
        if (f == 0) best_rice = std::min(best_rice, bits);
      }
    }
    // Never worse than the best Rice code (exact by convexity), and within
    // 1% of the best code overall.
    EXPECT_LE(IndexCodeBits(idx, chosen), best_rice);
    EXPECT_LE(IndexCodeBits(idx, chosen), best_any + best_any / 100);
  }
  EXPECT_EQ(ChooseIndexCode(even).family, IndexFamily::kRice);
  EXPECT_EQ(ChooseIndexCode(clustered).family, IndexFamily::kExpGolomb);
  EXPECT_EQ(ChooseIndexCode({}), IndexCode{});
  std::vector<uint32_t> dense(100);
  for (uint32_t i = 0; i < 100; ++i) dense[i] = i;
  EXPECT_EQ(ChooseIndexCode(dense), IndexCode{});
  EXPECT_EQ(IndexCodeBits(dense, {}), 100u);
  // Exp-Golomb k = 0: gap 0 -> "1", gap 1 -> "010"+..., lengths 1, 3, 3, 5.
  EXPECT_EQ(IndexCodeBits(std::vector<uint32_t>{0, 2, 5, 9}, {IndexFamily::kExpGolomb, 0}),
            1u + 3 + 3 + 5);
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
