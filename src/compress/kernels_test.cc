// The vector kernels against their scalar twins.
#include "compress/kernels.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/test_util.h"

namespace adacomp::internal {
namespace {

TEST(KernelsTest, MaxAbsSumMatchesScalar) {
  for (size_t n : {0, 1, 3, 4, 5, 15, 16, 17, 50, 63, 500, 1001}) {
    for (uint64_t seed = 0; seed < 5; ++seed) {
      auto r = testing::GradientLike(n, seed);
      auto g = testing::GradientLike(n, seed + 100);
      const float v = MaxAbsSum(r.data(), g.data(), n);
      EXPECT_EQ(v, MaxAbsSumScalar(r.data(), g.data(), n));
      float ref = 0;
      for (size_t j = 0; j < n; ++j) ref = std::max(ref, std::fabs(r[j] + g[j]));
      EXPECT_EQ(v, ref);
      if (n > 0) {  // the maximum at every position, including the tail
        for (size_t at : {size_t{0}, n / 2, n - 1}) {
          auto g2 = g;
          g2[at] = -1e30f;
          EXPECT_EQ(MaxAbsSum(r.data(), g2.data(), n), std::fabs(r[at] - 1e30f));
        }
      }
    }
  }
}

TEST(KernelsTest, MaxAbsSumCheckedMatchesAndFlags) {
  for (size_t n : {1, 3, 4, 5, 16, 17, 50, 500, 1001}) {
    auto r = testing::GradientLike(n, 1);
    auto g = testing::GradientLike(n, 2);
    bool bad = false;
    EXPECT_EQ(MaxAbsSumChecked(r.data(), g.data(), n, &bad),
              MaxAbsSumScalar(r.data(), g.data(), n));
    EXPECT_FALSE(bad);
    for (size_t at : {size_t{0}, n / 2, n - 1}) {
      for (float v : {std::nanf(""), std::numeric_limits<float>::infinity(), -3e38f}) {
        auto g2 = g;
        auto r2 = r;
        g2[at] = v;
        r2[at] = v == -3e38f ? -1e38f : r2[at];  // -3e38 + -1e38 overflows
        bool b1 = false, b2 = false;
        MaxAbsSumChecked(r2.data(), g2.data(), n, &b1);
        MaxAbsSumCheckedScalar(r2.data(), g2.data(), n, &b2);
        EXPECT_TRUE(b1) << n << " " << at << " " << v;
        EXPECT_TRUE(b2);
      }
    }
    // The largest finite sum is not flagged.
    auto g3 = g;
    auto r3 = r;
    g3[n - 1] = std::numeric_limits<float>::max();
    r3[n - 1] = 0.0f;
    bool b3 = false;
    EXPECT_EQ(MaxAbsSumChecked(r3.data(), g3.data(), n, &b3), std::numeric_limits<float>::max());
    EXPECT_FALSE(b3);
  }
}

TEST(KernelsTest, SelectMatchesScalarTwin) {
  for (size_t len : {1, 4, 5, 50, 63, 64, 65, 128, 500, 777}) {
    for (uint64_t seed = 0; seed < 4; ++seed) {
      auto r = testing::GradientLike(len, seed);
      auto g = testing::GradientLike(len, seed + 7);
      g[len / 2] = -r[len / 2];  // G == 0 exactly
      if (len > 3) g[1] = 0.0f;
      const float m = MaxAbsSumScalar(r.data(), g.data(), len);
      for (float mm : {m, m * 0.5f, 0.0f}) {
        const size_t words = (len + 63) / 64;
        std::vector<uint64_t> s1(words, ~0ull), n1(words, ~0ull), s2(words), n2(words);
        auto r1 = r, r2 = r;
        SelectTernary(r1.data(), g.data(), len, mm, 0.125f, s1.data(), n1.data());
        SelectTernaryScalar(r2.data(), g.data(), len, mm, 0.125f, s2.data(), n2.data());
        EXPECT_EQ(s1, s2);
        EXPECT_EQ(n1, n2);
        EXPECT_EQ(0, std::memcmp(r1.data(), r2.data(), len * 4));
        // And against the definition.
        for (size_t j = 0; j < len; ++j) {
          const float gj = r[j] + g[j];
          const bool pick = std::fabs(gj + g[j]) >= mm && gj != 0.0f;
          ASSERT_EQ(((s1[j / 64] >> (j % 64)) & 1) != 0, pick) << j;
          ASSERT_EQ(((n1[j / 64] >> (j % 64)) & 1) != 0, pick && gj < 0) << j;
          const float want = pick ? (gj < 0 ? gj + 0.125f : gj - 0.125f) : gj;
          ASSERT_EQ(std::bit_cast<uint32_t>(r1[j]), std::bit_cast<uint32_t>(want)) << j;
        }
        auto r3 = r, r4 = r;
        SelectKeep(r3.data(), g.data(), len, mm, s1.data());
        SelectKeepScalar(r4.data(), g.data(), len, mm, s2.data());
        EXPECT_EQ(s1, s2);
        EXPECT_EQ(0, std::memcmp(r3.data(), r4.data(), len * 4));
      }
    }
  }
}

TEST(KernelsTest, NegativeBitsMatchesScalar) {
  for (size_t n : {0, 1, 7, 8, 9, 16, 100, 1003}) {
    auto g = testing::GradientLike(n, 9);
    if (n > 2) g[2] = -0.0f;  // not negative
    std::vector<uint8_t> a((n + 7) / 8, 0xAA), b((n + 7) / 8, 0x55);
    NegativeBits(g.data(), n, a.data());
    NegativeBitsScalar(g.data(), n, b.data());
    EXPECT_EQ(a, b);
    for (size_t j = 0; j < n; ++j) ASSERT_EQ((a[j / 8] >> (j % 8)) & 1, g[j] < 0.0f ? 1 : 0);
    if (n % 8) {
      EXPECT_EQ(a.back() >> (n % 8), 0);
    }
  }
}

TEST(KernelsTest, AnyHugeOrNonFinite) {
  const float big = std::ldexp(1.0f, 127);
  const float just_below = std::nextafter(big, 0.0f);
  for (size_t n : {1, 7, 8, 9, 100, 1003}) {
    for (size_t at : {size_t{0}, n / 2, n - 1}) {
      for (float bad : {big, -big, std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity(), std::nanf(""),
                        std::numeric_limits<float>::max()}) {
        std::vector<float> g = testing::GradientLike(n, 4);
        EXPECT_FALSE(AnyHugeOrNonFinite(g.data(), n));
        g[at] = just_below;
        EXPECT_FALSE(AnyHugeOrNonFinite(g.data(), n));
        EXPECT_FALSE(AnyHugeOrNonFiniteScalar(g.data(), n));
        g[at] = bad;
        EXPECT_TRUE(AnyHugeOrNonFinite(g.data(), n)) << n << " " << at << " " << bad;
        EXPECT_TRUE(AnyHugeOrNonFiniteScalar(g.data(), n));
      }
    }
  }
  EXPECT_FALSE(AnyHugeOrNonFinite(nullptr, 0));
}

}  // namespace
}  // namespace adacomp::internal
