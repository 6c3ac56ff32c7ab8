// wire/index_code.cc: the choice of code is optimal over all k (Rice) and
// close to it overall; pieces of the bit stream written by the parallel
// writer make the whole.
#include "wire/index_code.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <span>
#include <vector>

namespace adacomp::wire {
namespace {

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

// The pieces a multi-threaded compress writes (WriteSparseBitsSignOf with
// next0 and fill0, placed by IndexCodeBitsFrom) make the same bytes as one
// call over all entries, for both code families and several k, with long
// codes (gaps up to 2^31) among them.
TEST(FastPathsTest, PiecesOfTheBitStreamMakeTheWhole) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const IndexCode code{trial % 2 ? IndexFamily::kRice : IndexFamily::kExpGolomb,
                         static_cast<uint8_t>((trial / 2) % 4 == 3 ? 20 : (trial / 2) % 4 * 3)};
    // Gaps up to 2^31 where the code stays short enough to write quickly
    // (Exp-Golomb, or Rice with k = 20); Rice with a small k still gets
    // codes of thousands of bits.
    const bool huge = code.family == IndexFamily::kExpGolomb || code.k >= 20;
    std::vector<uint32_t> idx;
    std::vector<float> val;
    uint64_t next = 0;
    const size_t count = 1 + rng() % 3000;
    for (size_t j = 0; j < count; ++j) {
      const uint64_t r = rng() % 100;
      const uint64_t gap = r < 80   ? rng() % 40
                           : r < 98 ? rng() % 5000
                                    : rng() % (huge ? (1ull << 31) : 20000);
      if (next + gap > 0xFFFFFFF0ull) break;
      idx.push_back(static_cast<uint32_t>(next + gap));
      val.push_back((rng() & 1) ? 1.0f : -1.0f);
      next += gap + 1;
    }
    const uint64_t whole_bits = IndexCodeBits(idx, code) + idx.size();
    std::vector<uint8_t> whole((whole_bits + 7) / 8);
    WriteSparseBitsSignOf(whole.data(), whole.data() + whole.size(), idx, code, val.data());
    // Cut into 1-6 pieces at random points.
    std::vector<size_t> cuts = {0, idx.size()};
    for (int c = static_cast<int>(rng() % 6); c > 0; --c) cuts.push_back(rng() % (idx.size() + 1));
    std::sort(cuts.begin(), cuts.end());
    std::vector<uint8_t> merged(whole.size(), 0);
    uint64_t offset = 0;
    for (size_t c = 0; c + 1 < cuts.size(); ++c) {
      const std::span<const uint32_t> piece(idx.data() + cuts[c], cuts[c + 1] - cuts[c]);
      const uint64_t next0 = cuts[c] ? uint64_t{idx[cuts[c] - 1]} + 1 : 0;
      const uint64_t bits = IndexCodeBitsFrom(piece, code, next0) + piece.size();
      const int fill0 = static_cast<int>(offset & 7);
      std::vector<uint8_t> buf((fill0 + bits + 7) / 8);
      if (!buf.empty()) {
        WriteSparseBitsSignOf(buf.data(), buf.data() + buf.size(), piece, code,
                              val.data() + cuts[c], next0, fill0);
        merged[offset >> 3] |= buf[0];
        for (size_t b = 1; b < buf.size(); ++b) merged[(offset >> 3) + b] = buf[b];
      }
      offset += bits;
    }
    ASSERT_EQ(offset, whole_bits) << "trial " << trial;
    ASSERT_EQ(merged, whole) << "trial " << trial << " k " << int(code.k);
  }
}

}  // namespace
}  // namespace adacomp::wire
