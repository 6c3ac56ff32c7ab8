// The AVX2 helpers of core/simd.h against their scalar twins.
#include "core/simd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/test_util.h"

namespace adacomp::internal {
namespace {

// Unused in an ADACOMP_NO_SIMD build, whose vector tests are skipped.
[[maybe_unused]] std::vector<uint32_t> RandomIndices(size_t count, uint64_t max_gap,
                                                     uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> idx;
  uint64_t next = 0;
  for (size_t j = 0; j < count; ++j) {
    // Mostly small gaps, some large, a few near the 32-bit limit.
    const uint64_t r = rng() % 100;
    uint64_t gap = r < 70 ? rng() % 8 : r < 97 ? rng() % (max_gap + 1) : rng() % (1ull << 31);
    if (next + gap > 0xFFFFFFFEull) break;
    next += gap;
    idx.push_back(static_cast<uint32_t>(next));
    ++next;
    if (next > 0xFFFFFFFEull) break;
  }
  return idx;
}

TEST(SimdTest, GapSumsMatchScalar) {
  if (!CpuHasAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
#if ADACOMP_X86_SIMD
  for (size_t count : {0, 1, 2, 8, 9, 17, 1000, 4099}) {
    for (uint64_t max_gap : {0ull, 5ull, 1000ull, 1ull << 24, 1ull << 30}) {
      const auto idx = RandomIndices(count, max_gap, count * 31 + max_gap);
      for (int k = 0; k <= 31; ++k) {
        ASSERT_EQ(RiceSumAvx2(idx.data(), idx.size(), k), RiceSumScalar(idx.data(), idx.size(), k));
        ASSERT_EQ(EgSumAvx2(idx.data(), idx.size(), k), EgSumScalar(idx.data(), idx.size(), k))
            << count << " " << max_gap << " " << k;
      }
      ASSERT_EQ(SumGapsAvx2(idx.data(), idx.size()), SumGapsScalar(idx.data(), idx.size()));
    }
  }
  // Gaps whose (gap >> k) + 1 is just below, at and above powers of two,
  // including 2^32 - 1.
  std::vector<uint32_t> edge;
  uint64_t next = 0;
  for (uint64_t g : {0ull, 1ull, 2ull, 3ull, (1ull << 24) - 2, (1ull << 24) - 1, 1ull << 24,
                     (1ull << 25) - 1, 7ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull}) {
    next += g;
    edge.push_back(static_cast<uint32_t>(next));
    ++next;
  }
  const std::vector<uint32_t> top = {0xFFFFFFFEu, 0, 0, 0, 0, 0, 0, 0, 0};  // gap 2^32 - 2
  for (int k = 0; k <= 31; ++k) {
    ASSERT_EQ(EgSumAvx2(edge.data(), edge.size(), k), EgSumScalar(edge.data(), edge.size(), k));
    ASSERT_EQ(RiceSumAvx2(edge.data(), edge.size(), k), RiceSumScalar(edge.data(), edge.size(), k));
    ASSERT_EQ(EgSumAvx2(top.data(), 1, k), EgSumScalar(top.data(), 1, k));
  }
  ASSERT_EQ(SumGapsAvx2(edge.data(), edge.size()), SumGapsScalar(edge.data(), edge.size()));
#endif
}

TEST(SimdTest, MaxAbsBitsMatchesScalar) {
  if (!CpuHasAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
#if ADACOMP_X86_SIMD
  for (size_t n : {0, 1, 7, 8, 31, 32, 33, 100, 5003}) {
    auto v = testing::GradientLike(n, n);
    EXPECT_EQ(MaxAbsBitsAvx2(v.data(), n), MaxAbsBitsScalar(v.data(), n));
    for (size_t at : {size_t{0}, n / 2, n ? n - 1 : 0}) {
      if (n == 0) break;
      for (float bad : {std::numeric_limits<float>::infinity(), -std::nanf(""),
                        -std::numeric_limits<float>::max(), -0.0f}) {
        auto w = v;
        w[at] = bad;
        ASSERT_EQ(MaxAbsBitsAvx2(w.data(), n), MaxAbsBitsScalar(w.data(), n)) << n << " " << at;
      }
    }
  }
#endif
}

TEST(SimdTest, PayloadHelpersMatchScalar) {
  if (!CpuHasAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
#if ADACOMP_X86_SIMD
  for (size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 100, 1003}) {
    const auto v = testing::GradientLike(n, n + 3);
    // At an odd offset, as in a frame.
    std::vector<uint8_t> bytes(4 * n + 1);
    if (n > 0) std::memcpy(bytes.data() + 1, v.data(), 4 * n);
    const uint8_t* src = bytes.data() + 1;
    EXPECT_EQ(MaxAbsBitsBytesAvx2(src, n), MaxAbsBitsBytesScalar(src, n));
    EXPECT_EQ(MaxAbsBitsBytesScalar(src, n), MaxAbsBitsScalar(v.data(), n));
    if (n > 0) {
      auto w = bytes;
      const float nan = std::nanf("");
      std::memcpy(w.data() + 1 + 4 * (n - 1), &nan, 4);
      EXPECT_GE(MaxAbsBitsBytesAvx2(w.data() + 1, n), 0x7F800000u);
    }
    auto a = testing::GradientLike(n, 7), b = a;
    AddFloatsFromBytesAvx2(a.data(), src, n);
    AddFloatsFromBytesScalar(b.data(), src, n);
    EXPECT_TRUE(n == 0 || std::memcmp(a.data(), b.data(), 4 * n) == 0);
    std::vector<uint8_t> bits((n + 7) / 8 + 1);
    for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint8_t>(i * 37 + 11);
    auto c = testing::GradientLike(n, 8), d = c;
    AddSignBitsAvx2(c.data(), bits.data() + 1, n, 0.5f, -0.25f);
    AddSignBitsScalar(d.data(), bits.data() + 1, n, 0.5f, -0.25f);
    EXPECT_TRUE(n == 0 || std::memcmp(c.data(), d.data(), 4 * n) == 0);
  }
#endif
}

// DivideFloats (the dispatcher: a multiplication for powers of two, the
// AVX2 division otherwise) against x / d, bit for bit, on gradient-like
// values plus zeros, subnormals, the largest float, Inf and NaN.
TEST(SimdTest, DivideFloatsMatchesScalarDivision) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float d : {1.0f, 2.0f, 3.0f, 4.0f, 0.5f, 7.0f, -8.0f, 16.0f, 0x1p-120f, 0x1p126f, 0x1p127f,
                  0x1p-149f, 1e-3f, 1e30f}) {
    for (size_t n : {0u, 1u, 7u, 8u, 9u, 1001u}) {
      auto x = testing::GradientLike(n, 11);
      const float specials[] = {0.0f, -0.0f, 0x1p-149f,     -0x1p-130f, 0x1.fffffep127f,
                                inf,  -inf,  std::nanf(""), 1.5f};
      for (size_t i = 0; i < n && i < std::size(specials); ++i) x[i * 3 % n] = specials[i];
      auto want = x;
      for (auto& v : want) v = v / d;
      DivideFloats(x.data(), n, d);
      for (size_t i = 0; i < n; ++i) {
        if (std::isnan(want[i])) {
          EXPECT_TRUE(std::isnan(x[i])) << "d=" << d << " i=" << i;
        } else {
          EXPECT_EQ(std::memcmp(&x[i], &want[i], 4), 0)
              << "d=" << d << " i=" << i << ": " << x[i] << " vs " << want[i];
        }
      }
    }
  }
}

}  // namespace
}  // namespace adacomp::internal
