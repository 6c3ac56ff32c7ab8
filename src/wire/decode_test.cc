// wire/decode.cc: DecodeAccumulate on following frames; DecodeAccumulateAll
// and DecodeAverageAll (several frames of one tensor
// into one buffer, in blocks, on 1-3 threads) against DecodeAccumulate called
// frame after frame (and a scalar division), bit for bit; and their
// all-or-nothing behaviour on bad frames; ZeroWhereCarried against the
// decoded frame.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "adacomp/codec.h"
#include "core/crc32c.h"
#include "core/endian.h"
#include "core/test_util.h"
#include "wire/frame.h"
#include "wire/frame_test_util.h"

namespace adacomp {
namespace {

CodecConfig Config(Codec codec, ValueMode values = ValueMode::kTernary, uint32_t bin = 50) {
  CodecConfig c;
  c.codec = codec;
  c.values = values;
  c.bin_size = bin;
  c.density = 0.02;
  c.tau = 2e-3f;
  c.seed = 7;
  return c;
}

// One frame per "learner": learner q compresses its own gradient twice (the
// second frame, from a non-zero residue, is kept).
std::vector<std::vector<uint8_t>> MakeFrames(const std::vector<CodecConfig>& configs, uint64_t n,
                                             uint64_t seed) {
  std::vector<std::vector<uint8_t>> frames;
  for (size_t q = 0; q < configs.size(); ++q) {
    auto c = Compressor::Create(configs[q], 3, n);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    std::vector<uint8_t> f;
    for (int step = 0; step < 2; ++step) {
      f.clear();
      EXPECT_TRUE((*c)->Compress(testing::GradientLike(n, seed * 1000 + q * 10 + step), &f).ok());
    }
    frames.push_back(std::move(f));
  }
  return frames;
}

std::vector<std::span<const uint8_t>> Spans(const std::vector<std::vector<uint8_t>>& frames) {
  std::vector<std::span<const uint8_t>> s;
  for (const auto& f : frames) s.emplace_back(f);
  return s;
}

void ExpectBitEqual(const std::vector<float>& a, const std::vector<float>& b,
                    const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], 4) != 0) {
      FAIL() << what << ": element " << i << ": " << a[i] << " vs " << b[i];
    }
  }
}

// Sequential DecodeAccumulate (the definition) vs DecodeAccumulateAll with
// 1, 2 and 3 threads, starting from the same non-zero destination.
void CheckSame(const std::vector<CodecConfig>& configs, uint64_t n, uint64_t seed) {
  const auto frames = MakeFrames(configs, n, seed);
  const auto start = testing::GradientLike(n, seed + 99);
  std::vector<float> want = start;
  std::vector<FrameInfo> want_info(frames.size());
  for (size_t q = 0; q < frames.size(); ++q) {
    ASSERT_TRUE(DecodeAccumulate(frames[q], want, &want_info[q]).ok());
  }
  for (int threads : {1, 2, 3}) {
    std::vector<float> got = start;
    std::vector<FrameInfo> info(frames.size());
    DecodeOptions o;
    o.threads = threads;
    const Status st = DecodeAccumulateAll(Spans(frames), got, info, o);
    ASSERT_TRUE(st.ok()) << st.ToString();
    const std::string what = "n=" + std::to_string(n) + " frames=" + std::to_string(frames.size()) +
                             " threads=" + std::to_string(threads);
    ExpectBitEqual(got, want, what);
    for (size_t q = 0; q < frames.size(); ++q) {
      EXPECT_EQ(info[q].frame_bytes, frames[q].size()) << what;
      EXPECT_EQ(info[q].selected, want_info[q].selected) << what;
      EXPECT_EQ(info[q].codec, configs[q].codec) << what;
    }
    // The average: zero, add frame after frame, divide by the count.
    std::vector<float> mean(n, 0.0f);
    for (const auto& f : frames) ASSERT_TRUE(DecodeAccumulate(f, mean).ok());
    for (auto& v : mean) v = v / static_cast<float>(frames.size());
    std::vector<float> avg = start;  // overwritten
    const Status sa = DecodeAverageAll(Spans(frames), avg, {}, o);
    ASSERT_TRUE(sa.ok()) << sa.ToString();
    ExpectBitEqual(avg, mean, "average, " + what);
  }
}

TEST(DecodeAccumulateAllTest, AdaCompMatchesFrameAfterFrame) {
  // Sizes around the 4096-element block and the 2^20 threading threshold.
  for (uint64_t n : {1ull, 7ull, 4095ull, 4096ull, 4097ull, 3 * 4096ull + 13, 300'001ull}) {
    for (size_t p : {1u, 2u, 5u}) {
      CheckSame(std::vector<CodecConfig>(p, Config(Codec::kAdaComp)), n, n + p);
    }
  }
}

TEST(DecodeAccumulateAllTest, EveryCodecAndMixedFramesMatch) {
  const std::vector<CodecConfig> all = {
      Config(Codec::kDense),
      Config(Codec::kAdaComp, ValueMode::kTernary, 500),
      Config(Codec::kAdaComp, ValueMode::kFp16),
      Config(Codec::kAdaComp, ValueMode::kFp32),
      Config(Codec::kTopK),
      Config(Codec::kThreshold),
      Config(Codec::kOneBit),
      Config(Codec::kTernGrad),
  };
  for (uint64_t n : {13ull, 8192ull + 5, 270'000ull}) {
    for (const auto& c : all) CheckSame({c, c, c}, n, n);
    CheckSame(all, n, n + 1);  // one frame of each codec into one buffer
  }
}

TEST(DecodeAccumulateAllTest, NoFramesLeavesDestination) {
  std::vector<float> dst = {1.0f, 2.0f};
  EXPECT_TRUE(DecodeAccumulateAll({}, dst).ok());
  EXPECT_EQ(dst, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(DecodeAverageAll({}, dst).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dst, (std::vector<float>{1.0f, 2.0f}));
}

TEST(DecodeAccumulateAllTest, BadFrameLeavesDestinationUntouched) {
  const uint64_t n = 300'001;  // large enough for the threaded path
  const auto good = MakeFrames(std::vector<CodecConfig>(4, Config(Codec::kAdaComp)), n, 5);
  const auto start = testing::GradientLike(n, 11);
  for (size_t bad = 0; bad < good.size(); ++bad) {
    for (int threads : {1, 2}) {
      auto frames = good;
      frames[bad][frames[bad].size() / 2] ^= 0x04;  // damaged in transit
      std::vector<float> dst = start;
      DecodeOptions o;
      o.threads = threads;
      size_t failed = 99;
      Status st = DecodeAccumulateAll(Spans(frames), dst, {}, o, &failed);
      EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
      EXPECT_NE(st.message().find("checksum mismatch"), std::string::npos) << st.ToString();
      EXPECT_EQ(failed, bad);
      ExpectBitEqual(dst, start, "after a corrupt frame");
      // Without failed_frame the position is in the message.
      st = DecodeAccumulateAll(Spans(frames), dst, {}, o);
      EXPECT_NE(st.message().find("frame " + std::to_string(bad) + " of 4"), std::string::npos)
          << st.ToString();
      ExpectBitEqual(dst, start, "after a corrupt frame");
      st = DecodeAverageAll(Spans(frames), dst, {}, o, &failed);
      EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
      ExpectBitEqual(dst, start, "average after a corrupt frame");
    }
  }
}

TEST(DecodeAccumulateAllTest, TwoBadFramesReportTheFirst) {
  auto frames = MakeFrames(std::vector<CodecConfig>(3, Config(Codec::kTopK)), 5000, 2);
  frames[1].resize(frames[1].size() - 3);  // truncated
  frames[2][0] ^= 1;                       // bad magic
  std::vector<float> dst(5000, 0.5f);
  size_t failed = 99;
  DecodeOptions o;
  o.threads = 3;
  const Status st = DecodeAccumulateAll(Spans(frames), dst, {}, o, &failed);
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  EXPECT_EQ(failed, 1u);
  EXPECT_EQ(dst, std::vector<float>(5000, 0.5f));
}

TEST(DecodeAccumulateAllTest, WrongSizesAndArgumentsAreRejected) {
  const auto frames = MakeFrames(std::vector<CodecConfig>(2, Config(Codec::kAdaComp)), 1000, 3);
  std::vector<float> dst(999, 0.0f);
  size_t failed = 99;
  Status st = DecodeAccumulateAll(Spans(frames), dst, {}, {}, &failed);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("destination holds 999"), std::string::npos) << st.ToString();
  EXPECT_EQ(failed, 0u);
  EXPECT_EQ(dst, std::vector<float>(999, 0.0f));

  std::vector<float> ok(1000, 0.0f);
  std::vector<FrameInfo> one(1);
  st = DecodeAccumulateAll(Spans(frames), ok, one);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  DecodeOptions o;
  for (int t : {0, -3, 257}) {
    o.threads = t;
    st = DecodeAccumulateAll(Spans(frames), ok, {}, o);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find("1..256"), std::string::npos) << st.ToString();
  }
  o.threads = 1;
  o.expected_tensor_id = 4;  // the frames are tensor 3's
  st = DecodeAccumulateAll(Spans(frames), ok, {}, o);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(ok, std::vector<float>(1000, 0.0f));
}

// Payload bits flipped with the checksum fixed up, so that the frames reach
// the readers (two frames are read together): the all-frames call fails
// exactly when a frame-after-frame decode fails, with the same message, and
// otherwise gives the same sums. Also frames the fast reader leaves to the
// general walker (a Rice code longer than 57 bits).
TEST(DecodeAccumulateAllTest, MutatedFramesBehaveAsFrameAfterFrame) {
  const uint64_t n = 20000;
  std::vector<CodecConfig> configs = {Config(Codec::kAdaComp), Config(Codec::kAdaComp),
                                      Config(Codec::kAdaComp, ValueMode::kFp16),
                                      Config(Codec::kTopK), Config(Codec::kTopK)};
  const auto good = MakeFrames(configs, n, 9);
  // A valid frame with one long unary code: gap 200 at Rice k = 0.
  wire::Frame lf;
  lf.codec = Codec::kThreshold;
  lf.tensor_id = 3;
  lf.elements = n;
  lf.params.code = {wire::IndexFamily::kRice, 0};
  lf.params.scale = 0.25f;
  for (uint32_t i : {1u, 2u, 203u, 204u, 9000u}) {
    lf.indices.push_back(i);
    lf.negative.push_back(static_cast<uint8_t>(i & 1));
  }
  lf.params.selected = lf.indices.size();
  std::vector<uint8_t> long_code;
  ASSERT_TRUE(wire::EncodeFrame(lf, &long_code).ok());
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    auto frames = good;
    if (trial % 3 == 0) frames[trial % 5] = long_code;
    auto& f = frames[(trial / 3) % 5];
    FrameInfo fi;
    ASSERT_TRUE(InspectFrame(f, &fi).ok());
    const size_t payload_start = f.size() - 4 - fi.payload_bytes;
    if (fi.payload_bytes > 0 && trial % 3 != 0) {
      for (int flips = 1 + trial % 2; flips > 0; --flips) {
        f[payload_start + rng() % fi.payload_bytes] ^= static_cast<uint8_t>(1u << (rng() % 8));
      }
      internal::StoreU32(f.data() + f.size() - 4,
                         internal::Crc32cExtend(0, f.data(), f.size() - 4));
    }
    const auto start = testing::GradientLike(n, trial);
    std::vector<float> want = start;
    Status want_st;
    size_t want_bad = 99;
    for (size_t q = 0; q < frames.size() && want_st.ok(); ++q) {
      std::vector<float> one = want;  // frame after frame, stopping at the first error
      want_st = DecodeAccumulate(frames[q], one);
      if (want_st.ok())
        want = one;
      else
        want_bad = q;
    }
    std::vector<float> got = start;
    size_t bad = 99;
    DecodeOptions o;
    o.threads = 1 + trial % 2;
    const Status st = DecodeAccumulateAll(Spans(frames), got, {}, o, &bad);
    ASSERT_EQ(st.ok(), want_st.ok())
        << "trial " << trial << ": " << st.ToString() << " vs " << want_st.ToString();
    if (st.ok()) {
      ExpectBitEqual(got, want, "trial " + std::to_string(trial));
    } else {
      EXPECT_EQ(st.ToString(), want_st.ToString()) << "trial " << trial;
      EXPECT_EQ(bad, want_bad) << "trial " << trial;
      ExpectBitEqual(got, start, "untouched, trial " + std::to_string(trial));
    }
  }
}

// Signed zeros: a terngrad frame with s = 0 adds -0 where its trit says -s
// and nothing elsewhere; -0 + -0 stays -0 and +0 + -0 is +0, as frame after
// frame (found by fuzz_decode: the scratch the frame was decoded into
// started at +0, which turned dst's -0 into +0).
TEST(DecodeAccumulateAllTest, SignedZerosAsFrameAfterFrame) {
  wire::Frame f;
  f.codec = Codec::kTernGrad;
  f.tensor_id = 1;
  f.elements = 6;
  f.params.scale = 0.0f;
  f.symbols = {2, 1, 0, 2, 1, 0};
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(wire::EncodeFrame(f, &bytes).ok());
  const std::vector<float> start = {-0.0f, -0.0f, -0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<float> want = start, got = start;
  ASSERT_TRUE(DecodeAccumulate(bytes, want).ok());
  ASSERT_TRUE(DecodeAccumulate(bytes, want).ok());
  const std::vector<std::vector<uint8_t>> frames = {bytes, bytes};
  ASSERT_TRUE(DecodeAccumulateAll(Spans(frames), got).ok());
  ExpectBitEqual(got, want, "terngrad, s = 0");
  EXPECT_TRUE(std::signbit(got[0]) && std::signbit(got[2]));  // -0 kept
}

TEST(DecodeAccumulateAllTest, FrameSpansMayRunPastTheFrame) {
  // As in a learner's message: frames back to back, each span from a frame's
  // start to the end of the message.
  const auto frames = MakeFrames(std::vector<CodecConfig>(2, Config(Codec::kAdaComp)), 6000, 4);
  std::vector<uint8_t> message = frames[0];
  message.insert(message.end(), frames[1].begin(), frames[1].end());
  std::vector<float> want(6000, 0.0f), got(6000, 0.0f);
  ASSERT_TRUE(DecodeAccumulate(frames[0], want).ok());
  ASSERT_TRUE(DecodeAccumulate(frames[0], want).ok());
  std::vector<std::span<const uint8_t>> spans = {message, message};
  std::vector<FrameInfo> info(2);
  ASSERT_TRUE(DecodeAccumulateAll(spans, got, info).ok());
  ExpectBitEqual(got, want, "two spans of one message");
  EXPECT_EQ(info[0].frame_bytes, frames[0].size());
}

}  // namespace
}  // namespace adacomp

namespace adacomp::wire {
namespace {

using namespace adacomp::wire::testing;  // NOLINT

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

}  // namespace
}  // namespace adacomp::wire

// DecodeAverageMessages: whole messages (one frame per tensor, concatenated)
// against DecodeAverageAll per tensor; all or nothing on bad messages.
namespace adacomp {
namespace {

struct Messages {
  std::vector<uint64_t> sizes;              // elements per tensor
  std::vector<std::vector<uint8_t>> bytes;  // one message per learner
};

// `learners` messages over tensors of `sizes` elements, tensor id k + 10,
// each learner with its own codec config (cycled from `configs`).
Messages MakeMessages(const std::vector<CodecConfig>& configs, int learners,
                      std::vector<uint64_t> sizes) {
  Messages m;
  m.sizes = std::move(sizes);
  for (int q = 0; q < learners; ++q) {
    std::vector<uint8_t> msg;
    for (size_t k = 0; k < m.sizes.size(); ++k) {
      const CodecConfig& cfg = configs[(static_cast<size_t>(q) + k) % configs.size()];
      auto c = Compressor::Create(cfg, static_cast<uint32_t>(k + 10), m.sizes[k]);
      EXPECT_TRUE(c.ok()) << c.status().ToString();
      EXPECT_TRUE((*c)->Compress(testing::GradientLike(m.sizes[k], 100 * q + k), &msg).ok());
    }
    m.bytes.push_back(std::move(msg));
  }
  return m;
}

std::vector<MessageTensor> Tensors(const Messages& m, std::vector<std::vector<float>>* dsts) {
  std::vector<MessageTensor> t;
  for (size_t k = 0; k < m.sizes.size(); ++k) {
    t.push_back({static_cast<uint32_t>(k + 10), std::span<float>((*dsts)[k])});
  }
  return t;
}

std::vector<std::vector<float>> Filled(const Messages& m, float v) {
  std::vector<std::vector<float>> d;
  for (uint64_t n : m.sizes) d.emplace_back(n, v);
  return d;
}

TEST(DecodeAverageMessagesTest, MatchesDecodeAverageAllPerTensor) {
  const std::vector<CodecConfig> configs = {
      Config(Codec::kAdaComp),  Config(Codec::kAdaComp, ValueMode::kFp16),
      Config(Codec::kTopK),     Config(Codec::kDense),
      Config(Codec::kTernGrad), Config(Codec::kOneBit)};
  for (int learners : {1, 3, 4}) {
    const Messages m = MakeMessages(configs, learners, {0, 1, 77, 5000, 300000});
    for (int threads : {1, 2}) {
      auto got = Filled(m, 3.0f);
      std::vector<FrameInfo> infos(m.sizes.size() * learners);
      DecodeOptions o;
      o.threads = threads;
      const Status st = DecodeAverageMessages(Spans(m.bytes), Tensors(m, &got), infos, o);
      ASSERT_TRUE(st.ok()) << st.ToString();
      std::vector<size_t> cursor(static_cast<size_t>(learners), 0);
      for (size_t k = 0; k < m.sizes.size(); ++k) {
        std::vector<std::span<const uint8_t>> frames;
        for (int q = 0; q < learners; ++q) {
          frames.push_back(std::span<const uint8_t>(m.bytes[q]).subspan(cursor[q]));
        }
        std::vector<FrameInfo> want_info(static_cast<size_t>(learners));
        std::vector<float> want(m.sizes[k], -1.0f);
        ASSERT_TRUE(DecodeAverageAll(frames, want, want_info).ok());
        ExpectBitEqual(got[k], want, "tensor " + std::to_string(k));
        for (int q = 0; q < learners; ++q) {
          const FrameInfo& fi = infos[k * learners + q];
          EXPECT_EQ(fi.tensor_id, k + 10);
          EXPECT_EQ(fi.frame_bytes, want_info[q].frame_bytes);
          EXPECT_EQ(fi.selected, want_info[q].selected);
          cursor[q] += fi.frame_bytes;
        }
      }
      for (int q = 0; q < learners; ++q) EXPECT_EQ(cursor[q], m.bytes[q].size());
    }
  }
}

// Runs DecodeAverageMessages on damaged messages: it must fail, leave every
// dst as it was, and say where.
void ExpectRejected(const Messages& m, const std::vector<std::vector<uint8_t>>& bytes,
                    size_t want_message, size_t want_tensor, const std::string& needle) {
  auto dsts = Filled(m, 0.5f);
  MessageError where;
  const Status st = DecodeAverageMessages(Spans(bytes), Tensors(m, &dsts), {}, {}, &where);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(where.message, want_message) << st.ToString();
  EXPECT_EQ(where.tensor, want_tensor) << st.ToString();
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.ToString();
  for (const auto& d : dsts) {
    for (float v : d) ASSERT_EQ(v, 0.5f);
  }
  // Without *error the position is in the text.
  auto dsts2 = Filled(m, 0.5f);
  const Status st2 = DecodeAverageMessages(Spans(bytes), Tensors(m, &dsts2));
  EXPECT_NE(st2.message().find("message " + std::to_string(want_message)), std::string::npos)
      << st2.ToString();
}

// Where each frame of a message ends.
std::vector<size_t> FrameEnds(std::span<const uint8_t> message) {
  std::vector<size_t> ends;
  size_t at = 0;
  FrameInfo fi;
  while (at < message.size() && InspectFrame(message.subspan(at), &fi).ok()) {
    at += fi.frame_bytes;
    ends.push_back(at);
  }
  return ends;
}

TEST(DecodeAverageMessagesTest, TruncatedLeftoverAndCorruptMessagesLeaveDstUntouched) {
  const Messages m =
      MakeMessages({Config(Codec::kAdaComp), Config(Codec::kTopK)}, 3, {40, 1000, 20000});
  const auto ends0 = FrameEnds(m.bytes[0]), ends = FrameEnds(m.bytes[1]);
  ASSERT_EQ(ends.size(), 3u);
  // Truncated inside each frame, and cut between frames (a frame missing).
  for (size_t k = 0; k < ends.size(); ++k) {
    auto cut = m.bytes;
    cut[1].resize(ends[k] - 3);
    ExpectRejected(m, cut, 1, k, "truncated");
    if (k + 1 < ends.size()) {
      cut = m.bytes;
      cut[1].resize(ends[k]);
      ExpectRejected(m, cut, 1, k + 1, "truncated");
    }
  }
  auto empty = m.bytes;
  empty[2].clear();
  ExpectRejected(m, empty, 2, 0, "truncated");
  // Bytes after the last frame: a whole extra frame, or one byte.
  auto extra = m.bytes;
  extra[0].insert(extra[0].end(), m.bytes[0].begin(), m.bytes[0].begin() + 20);
  ExpectRejected(m, extra, 0, 3, "bytes after its last frame");
  extra = m.bytes;
  extra[2].push_back(0);
  ExpectRejected(m, extra, 2, 3, "1 bytes after its last frame");
  // A flipped byte in the second frame of message 2; the first error in
  // tensor order wins over a later tensor of an earlier message.
  auto bad = m.bytes;
  bad[2][ends[0] + 10] ^= 0x10;
  bad[0][ends0[1] + 10] ^= 0x10;
  ExpectRejected(m, bad, 2, 1, "");
  // Two messages bad at the same tensor: the first message is reported.
  bad = m.bytes;
  bad[2][5] ^= 0x01;
  bad[1][5] ^= 0x01;
  ExpectRejected(m, bad, 1, 0, "");
  // Frames in the wrong order (tensor ids do not match).
  std::vector<std::vector<uint8_t>> swapped = m.bytes;
  const auto at = [&](size_t i) { return m.bytes[0].begin() + static_cast<std::ptrdiff_t>(i); };
  swapped[0].assign(at(ends0[0]), at(ends0[1]));
  swapped[0].insert(swapped[0].end(), at(0), at(ends0[0]));
  swapped[0].insert(swapped[0].end(), at(ends0[1]), m.bytes[0].end());
  ExpectRejected(m, swapped, 0, 0, "expected 10");
}

TEST(DecodeAverageMessagesTest, ArgumentsAreChecked) {
  const Messages m = MakeMessages({Config(Codec::kAdaComp)}, 2, {100, 10});
  auto dsts = Filled(m, 1.0f);
  EXPECT_EQ(DecodeAverageMessages({}, Tensors(m, &dsts)).code(), StatusCode::kInvalidArgument);
  std::vector<FrameInfo> infos(3);
  EXPECT_EQ(DecodeAverageMessages(Spans(m.bytes), Tensors(m, &dsts), infos).code(),
            StatusCode::kInvalidArgument);
  DecodeOptions o;
  o.threads = 0;
  EXPECT_EQ(DecodeAverageMessages(Spans(m.bytes), Tensors(m, &dsts), {}, o).code(),
            StatusCode::kInvalidArgument);
  // A destination of the wrong size is the frame's error.
  std::vector<std::vector<float>> wrong = {std::vector<float>(100, 1.0f),
                                           std::vector<float>(11, 1.0f)};
  std::vector<MessageTensor> t = {{10, wrong[0]}, {11, wrong[1]}};
  MessageError where;
  EXPECT_FALSE(DecodeAverageMessages(Spans(m.bytes), t, {}, {}, &where).ok());
  EXPECT_EQ(where.tensor, 1u);
  for (const auto& d : wrong) {
    for (float v : d) ASSERT_EQ(v, 1.0f);
  }
  for (const auto& d : dsts) {
    for (float v : d) ASSERT_EQ(v, 1.0f);
  }
  // No tensors and empty messages: nothing to do.
  std::vector<std::vector<uint8_t>> none(2);
  EXPECT_TRUE(DecodeAverageMessages(Spans(none), {}).ok());
}

// ZeroWhereCarried zeroes exactly the elements a scalar test of the decoded
// frame finds non-zero, for every codec (sparse frames by their entries, the
// others by their values), and changes nothing on a bad frame.
TEST(ZeroWhereCarriedTest, ZeroesExactlyTheNonZeroDecodedElements) {
  const std::vector<CodecConfig> all = {Config(Codec::kDense),
                                        Config(Codec::kAdaComp, ValueMode::kTernary, 500),
                                        Config(Codec::kAdaComp, ValueMode::kFp16),
                                        Config(Codec::kTopK),
                                        Config(Codec::kThreshold),
                                        Config(Codec::kOneBit),
                                        Config(Codec::kTernGrad)};
  for (uint64_t n : {13ull, 8192ull + 5}) {
    for (const auto& c : all) {
      const std::vector<uint8_t> frame = MakeFrames({c}, n, 5)[0];
      std::vector<float> decoded(n, 0.0f);
      ASSERT_TRUE(DecodeAccumulate(frame, decoded).ok());
      std::vector<float> dst(n);
      for (uint64_t i = 0; i < n; ++i) dst[i] = 1.0f + static_cast<float>(i);
      uint64_t zeroed = 0;
      ASSERT_TRUE(ZeroWhereCarried(frame, dst, &zeroed).ok()) << CodecName(c.codec);
      uint64_t expect = 0;
      for (uint64_t i = 0; i < n; ++i) {
        const bool carried = decoded[i] != 0.0f;
        expect += carried ? 1 : 0;
        EXPECT_EQ(dst[i], carried ? 0.0f : 1.0f + static_cast<float>(i))
            << CodecName(c.codec) << " element " << i;
      }
      EXPECT_EQ(zeroed, expect) << CodecName(c.codec);
      if (c.codec != Codec::kTernGrad) {
        EXPECT_GT(expect, 0u) << CodecName(c.codec);
      }
      if (c.codec == Codec::kAdaComp || c.codec == Codec::kTopK) {
        EXPECT_LT(expect, n) << CodecName(c.codec);  // sparse: some elements kept
      }
    }
  }
}

TEST(ZeroWhereCarriedTest, BadFramesLeaveDestinationUntouched) {
  const uint64_t n = 4096;
  std::vector<uint8_t> frame =
      MakeFrames({Config(Codec::kAdaComp, ValueMode::kTernary, 500)}, n, 9)[0];
  const std::vector<float> ones(n, 1.0f);
  std::vector<float> dst = ones;
  std::vector<float> small(n - 1, 1.0f);
  EXPECT_FALSE(ZeroWhereCarried(frame, small).ok());  // wrong size
  std::vector<uint8_t> bad = frame;
  bad[bad.size() - 1] ^= 0x40;  // checksum no longer matches
  EXPECT_FALSE(ZeroWhereCarried(bad, dst).ok());
  EXPECT_FALSE(ZeroWhereCarried(std::span<const uint8_t>(frame).first(frame.size() - 3), dst).ok());
  EXPECT_EQ(dst, ones);
  EXPECT_EQ(small, std::vector<float>(n - 1, 1.0f));
}

}  // namespace
}  // namespace adacomp
