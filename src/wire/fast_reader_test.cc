// wire/fast_reader.cc and the writer's one-store path: FastSparseEntries (in
// DecodeAccumulate) against the general bit-by-bit walker that DecodeFrame
// uses, on random and mutated frames.
#include "wire/fast_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "adacomp/codec.h"
#include "core/crc32c.h"
#include "core/endian.h"
#include "core/half.h"
#include "wire/frame.h"

namespace adacomp::wire {
namespace {

// The dense values a frame carries, from the decoded structure (slow path).
std::vector<float> Expected(const Frame& f) {
  std::vector<float> out(f.elements, 0.0f);
  for (size_t j = 0; j < f.indices.size(); ++j) {
    float v = 0.0f;
    if (!f.values.empty()) {
      v = f.values[j];
    } else if (!f.half_values.empty()) {
      v = internal::HalfToFloat(f.half_values[j]);
    } else {
      v = f.negative[j] ? -f.params.scale : f.params.scale;
    }
    out[f.indices[j]] += v;
  }
  return out;
}

Frame RandomSparse(std::mt19937_64& rng, Codec codec, ValueMode mode, uint64_t n, double density,
                   IndexCode code) {
  Frame f;
  f.codec = codec;
  f.elements = n;
  f.params.values = mode;
  f.params.bin_size = 50;
  f.params.code = code;
  f.params.scale = codec == Codec::kTopK ? 0.0f : 0.375f;
  std::bernoulli_distribution pick(density);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint64_t j = 0; j < n; ++j) {
    if (!pick(rng)) continue;
    f.indices.push_back(static_cast<uint32_t>(j));
    const bool sv = codec == Codec::kTopK || (codec == Codec::kAdaComp && mode == ValueMode::kFp32);
    const bool hv = codec == Codec::kAdaComp && mode == ValueMode::kFp16;
    if (sv) f.values.push_back(normal(rng));
    if (hv) f.half_values.push_back(internal::FloatToHalf(normal(rng)));
    if (!sv && !hv) f.negative.push_back(static_cast<uint8_t>(rng() & 1));
  }
  f.params.selected = f.indices.size();
  return f;
}

void Reseal(std::vector<uint8_t>* bytes) {
  const size_t end = bytes->size() - 4;
  internal::StoreU32(bytes->data() + end, internal::Crc32cExtend(0, bytes->data(), end));
}

TEST(FastPathsTest, RandomSparseFramesDecodeLikeTheWalker) {
  std::mt19937_64 rng(5);
  const Codec codecs[] = {Codec::kAdaComp, Codec::kTopK, Codec::kThreshold};
  for (Codec codec : codecs) {
    for (ValueMode mode : {ValueMode::kTernary, ValueMode::kFp16, ValueMode::kFp32}) {
      if (codec != Codec::kAdaComp && mode != ValueMode::kTernary) continue;
      for (uint64_t n : {1ull, 9ull, 1000ull, 30000ull}) {
        for (double density : {0.001, 0.03, 0.5, 1.0}) {
          for (IndexFamily fam : {IndexFamily::kRice, IndexFamily::kExpGolomb}) {
            // k = 0 with sparse data gives unary runs far longer than 57
            // bits (the general path); larger k the one-store path.
            for (uint8_t k : {0, 1, 4, 9, 20, 31}) {
              Frame f = RandomSparse(rng, codec, mode, n, density, {fam, k});
              std::vector<uint8_t> bytes;
              ASSERT_TRUE(EncodeFrame(f, &bytes).ok());
              Frame back;
              ASSERT_TRUE(DecodeFrame(bytes, {}, &back).ok());
              ASSERT_EQ(back.indices, f.indices);
              const auto want = Expected(back);
              std::vector<float> got(n, 0.0f);
              ASSERT_TRUE(DecodeAccumulate(bytes, got).ok());
              ASSERT_EQ(0, std::memcmp(got.data(), want.data(), 4 * n))
                  << CodecName(codec) << " n=" << n << " d=" << density << " k=" << int(k);
              // The fast reader itself takes every valid frame, long codes
              // included, with the walker's entries.
              {
                Header h;
                Params p;
                ASSERT_TRUE(ParseFrame(bytes, {}, &h, &p).ok());
                std::vector<Entry> fast(p.selected), walked(p.selected);
                ASSERT_TRUE(FastSparseEntries(bytes, h, p, fast.data()))
                    << CodecName(codec) << " n=" << n << " d=" << density << " k=" << int(k);
                EntrySink collect{walked.data(), h.codec, p};
                ASSERT_TRUE(WalkPayload(bytes, h, p, collect).ok());
                for (size_t j = 0; j < fast.size(); ++j) {
                  ASSERT_EQ(fast[j].index, walked[j].index) << "entry " << j;
                  ASSERT_EQ(std::bit_cast<uint32_t>(fast[j].value),
                            std::bit_cast<uint32_t>(walked[j].value))
                      << "entry " << j;
                }
              }

              // Mutations with a valid checksum: the fast reader must accept
              // exactly what the walker accepts, and leave dst alone on error.
              for (int m = 0; m < 6 && bytes.size() > 12; ++m) {
                std::vector<uint8_t> bad = bytes;
                Header h;
                Params p;
                ASSERT_TRUE(ParseFrame(bad, {}, &h, &p).ok());
                if (h.payload_bytes == 0) break;
                const size_t at = h.payload_offset + rng() % h.payload_bytes;
                bad[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
                Reseal(&bad);
                Frame fb;
                const bool slow_ok = DecodeFrame(bad, {}, &fb).ok();
                std::vector<float> dst(n, 1.0f);
                const bool fast_ok = DecodeAccumulate(bad, dst).ok();
                ASSERT_EQ(fast_ok, slow_ok) << "mutation at byte " << at;
                if (fast_ok) {
                  auto w = Expected(fb);
                  for (auto& v : w) v += 1.0f;
                  ASSERT_EQ(0, std::memcmp(dst.data(), w.data(), 4 * n));
                } else {
                  for (float v : dst) ASSERT_EQ(v, 1.0f);
                }
              }
            }
          }
        }
      }
    }
  }
}

// The half-size form of +-scale payloads (FastSignedIndices, which the
// decoders use for them) against FastSparseEntries on the same frames.
TEST(FastPathsTest, SignedIndicesCarryTheEntriesOfTernaryFrames) {
  std::mt19937_64 rng(11);
  for (Codec codec : {Codec::kAdaComp, Codec::kThreshold, Codec::kTopK}) {
    for (ValueMode mode : {ValueMode::kTernary, ValueMode::kFp16, ValueMode::kFp32}) {
      if (codec != Codec::kAdaComp && mode != ValueMode::kTernary) continue;
      for (uint64_t n : {1ull, 1000ull, 30000ull}) {
        for (double density : {0.01, 0.5}) {
          for (IndexFamily fam : {IndexFamily::kRice, IndexFamily::kExpGolomb}) {
            for (uint8_t k : {0, 4, 9}) {
              Frame f = RandomSparse(rng, codec, mode, n, density, {fam, k});
              std::vector<uint8_t> bytes;
              ASSERT_TRUE(EncodeFrame(f, &bytes).ok());
              Header h;
              Params p;
              ASSERT_TRUE(ParseFrame(bytes, {}, &h, &p).ok());
              const bool ternary = codec != Codec::kTopK && mode == ValueMode::kTernary;
              ASSERT_EQ(IsSignedLayout(h, p), ternary) << CodecName(codec);
              std::vector<uint32_t> packed(p.selected + 1, 0xDEADBEEFu);
              ASSERT_EQ(FastSignedIndices(bytes, h, p, packed.data()), ternary);
              if (!ternary) continue;
              std::vector<Entry> entries(p.selected);
              ASSERT_TRUE(FastSparseEntries(bytes, h, p, entries.data()));
              const uint32_t scale = std::bit_cast<uint32_t>(p.scale);
              for (size_t j = 0; j < entries.size(); ++j) {
                ASSERT_EQ(packed[j] & 0x7FFFFFFFu, entries[j].index) << "entry " << j;
                ASSERT_EQ(scale | (packed[j] & 0x80000000u),
                          std::bit_cast<uint32_t>(entries[j].value))
                    << "entry " << j;
              }
              ASSERT_EQ(packed[p.selected], 0xDEADBEEFu);  // nothing past the entries
            }
          }
        }
      }
    }
  }
}

// Ternary Rice payloads are read a table lookup of several codes at a time
// (k up to 9; larger k code by code): at every k, at densities that make
// short and long codes, against the bit-by-bit walker; and on frames with
// one bit flipped (the checksum made valid again), the fast reader takes
// exactly the frames the walker takes, with its entries.
TEST(FastPathsTest, GroupedTernaryReaderMatchesTheWalkerAtEveryK) {
  std::mt19937_64 rng(17);
  auto walk = [](std::span<const uint8_t> bytes, const Header& h, const Params& p,
                 std::vector<uint32_t>* out) {
    std::vector<Entry> walked(p.selected);
    EntrySink collect{walked.data(), h.codec, p};
    if (!WalkPayload(bytes, h, p, collect).ok()) return false;
    out->clear();
    for (const Entry& e : walked) {
      out->push_back(e.index | (std::signbit(e.value) ? 0x80000000u : 0u));
    }
    return true;
  };
  int mutated_taken = 0, mutated_refused = 0;
  for (uint8_t k = 0; k <= 12; ++k) {
    for (uint64_t n : {5ull, 37ull, 4000ull}) {
      for (double density : {0.02, 0.28, 0.7, 1.0}) {
        Frame f = RandomSparse(rng, Codec::kAdaComp, ValueMode::kTernary, n, density,
                               {IndexFamily::kRice, k});
        std::vector<uint8_t> bytes;
        ASSERT_TRUE(EncodeFrame(f, &bytes).ok());
        Header h;
        Params p;
        ASSERT_TRUE(ParseFrame(bytes, {}, &h, &p).ok());
        std::vector<uint32_t> want;
        ASSERT_TRUE(walk(bytes, h, p, &want));
        std::vector<uint32_t> got(p.selected + 1, 0xDEADBEEFu);
        ASSERT_TRUE(FastSignedIndices(bytes, h, p, got.data()))
            << "k=" << int(k) << " n=" << n << " d=" << density;
        ASSERT_EQ(got[p.selected], 0xDEADBEEFu);  // nothing past the entries
        got.pop_back();
        ASSERT_EQ(got, want) << "k=" << int(k) << " n=" << n << " d=" << density;

        for (int m = 0; m < 8 && h.payload_bytes > 0; ++m) {
          std::vector<uint8_t> bad = bytes;
          const size_t at = h.payload_offset + rng() % h.payload_bytes;
          bad[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
          Reseal(&bad);
          Header hb;
          Params pb;
          ASSERT_TRUE(ParseFrame(bad, {}, &hb, &pb).ok());
          std::vector<uint32_t> walked;
          const bool walk_ok = walk(bad, hb, pb, &walked);
          std::vector<uint32_t> fast(pb.selected);
          const bool fast_ok = FastSignedIndices(bad, hb, pb, fast.data());
          ASSERT_EQ(fast_ok, walk_ok)
              << "k=" << int(k) << " n=" << n << " d=" << density << " byte " << at;
          if (fast_ok) {
            ASSERT_EQ(fast, walked);
          }
          (fast_ok ? mutated_taken : mutated_refused) += 1;
        }
      }
    }
  }
  // Both answers occurred, so both were compared.
  EXPECT_GT(mutated_taken, 50);
  EXPECT_GT(mutated_refused, 50);
}

// A ternary frame whose scale is 0 carries only zeros: ZeroWhereCarried
// zeroes nothing, and decoding adds +-0 (so a -0 of dst where a +0 entry
// lands becomes +0, as IEEE addition gives).
TEST(FastPathsTest, TernaryFrameOfScaleZeroCarriesNothing) {
  Frame f;
  f.codec = Codec::kAdaComp;
  f.elements = 10;
  f.params.values = ValueMode::kTernary;
  f.params.bin_size = 5;
  f.params.code = {IndexFamily::kRice, 1};
  f.params.scale = 0.0f;
  f.indices = {1, 4, 7};
  f.negative = {0, 1, 0};
  f.params.selected = f.indices.size();
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(EncodeFrame(f, &bytes).ok());
  std::vector<float> dst(10, 2.5f);
  dst[1] = -0.0f;
  dst[4] = -0.0f;
  uint64_t zeroed = 7;
  ASSERT_TRUE(ZeroWhereCarried(bytes, dst, &zeroed).ok());
  EXPECT_EQ(zeroed, 0u);
  EXPECT_EQ(dst[0], 2.5f);
  EXPECT_TRUE(std::signbit(dst[1]));
  ASSERT_TRUE(DecodeAccumulate(bytes, dst).ok());
  EXPECT_FALSE(std::signbit(dst[1]));  // -0 + +0
  EXPECT_TRUE(std::signbit(dst[4]));   // -0 + -0
  EXPECT_EQ(dst[7], 2.5f);
}

}  // namespace
}  // namespace adacomp::wire
