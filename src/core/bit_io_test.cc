#include "core/bit_io.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "core/endian.h"
#include "core/half.h"

namespace adacomp::internal {
namespace {

TEST(BitIoTest, RoundTripRandomFields) {
  std::mt19937 rng(7);
  std::vector<std::pair<uint32_t, int>> fields;
  uint64_t bits = 0;
  for (int i = 0; i < 5000; ++i) {
    const int n = static_cast<int>(rng() % 33);
    const uint32_t v = n == 0 ? 0 : static_cast<uint32_t>(rng() & ((uint64_t{1} << n) - 1));
    fields.push_back({v, n});
    bits += static_cast<uint64_t>(n);
  }
  std::vector<uint8_t> buf((bits + 7) / 8);
  BitWriter w(buf.data(), buf.data() + buf.size());
  for (auto [v, n] : fields) w.Put(v, n);
  EXPECT_EQ(w.Finish(), buf.data() + buf.size());
  BitReader r(buf.data(), buf.data() + buf.size());
  for (auto [v, n] : fields) {
    uint32_t got = 0;
    ASSERT_TRUE(r.Get(n, &got));
    EXPECT_EQ(got, v);
  }
  EXPECT_EQ(r.position(), bits);
  EXPECT_TRUE(r.AtZeroPaddedEnd());
}

TEST(BitIoTest, LsbFirstLayout) {
  uint8_t buf[2] = {0, 0};
  BitWriter w(buf, buf + 2);
  w.Put(1, 1);  // bit 0
  w.Put(0, 2);  // bits 1-2
  w.Put(5, 3);  // bits 3-5: 101
  w.Put(5, 3);  // bits 6-8: 1 0 1
  w.Finish();
  EXPECT_EQ(buf[0], 0b01101001);
  EXPECT_EQ(buf[1], 0b00000001);
}

TEST(BitIoTest, UnaryAndEnd) {
  // 70 zeros then a one, then 3 zero padding bits... in 9 bytes.
  std::vector<uint8_t> buf(9, 0);
  BitWriter w(buf.data(), buf.data() + buf.size());
  w.PutZeros(70);
  w.Put(1, 1);
  w.Finish();
  BitReader r(buf.data(), buf.data() + buf.size());
  uint64_t q = 0;
  ASSERT_EQ(r.GetUnary(1000, &q), BitReader::UnaryResult::kOk);
  EXPECT_EQ(q, 70u);
  EXPECT_TRUE(r.AtZeroPaddedEnd());
  BitReader r2(buf.data(), buf.data() + buf.size());
  EXPECT_EQ(r2.GetUnary(69, &q), BitReader::UnaryResult::kTooLong);
  std::vector<uint8_t> zeros(3, 0);
  BitReader r3(zeros.data(), zeros.data() + 3);
  EXPECT_EQ(r3.GetUnary(1000, &q), BitReader::UnaryResult::kTruncated);
  uint8_t one = 0x80;  // bits 0-6 zero, bit 7 set
  BitReader r4(&one, &one + 1);
  EXPECT_FALSE(r4.AtZeroPaddedEnd());
  uint32_t v;
  ASSERT_TRUE(r4.Get(3, &v));
  EXPECT_FALSE(r4.AtZeroPaddedEnd());
  EXPECT_FALSE(r4.Get(6, &v));
}

TEST(EndianTest, VarintAndLoads) {
  uint8_t buf[16];
  for (uint64_t v : {0ull, 1ull, 127ull, 128ull, 300ull, 0xFFFFFFFFull, ~0ull}) {
    const int n = StoreVarint(buf, v);
    EXPECT_EQ(n, VarintLength(v));
    uint64_t back = 0;
    for (int i = n - 1; i >= 0; --i) back = (back << 7) | (buf[i] & 0x7F);
    EXPECT_EQ(back, v);
    EXPECT_EQ(buf[n - 1] & 0x80, 0);
  }
  StoreU32(buf, 0x11223344u);
  EXPECT_EQ(buf[0], 0x44);
  EXPECT_EQ(LoadU32(buf), 0x11223344u);
  StoreU64(buf, 0x0102030405060708ull);
  EXPECT_EQ(buf[0], 0x08);
  EXPECT_EQ(LoadU64(buf), 0x0102030405060708ull);
}

// Value of a half from its definition.
double HalfValue(uint16_t h) {
  const int e = (h >> 10) & 31;
  const int m = h & 1023;
  const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -mag : mag;
}

// Nearest finite half (ties to even mantissa), by exhaustive search over magnitudes.
uint16_t SlowNearestHalf(float f) {
  const double a = std::fabs(static_cast<double>(f));
  uint16_t best = 0;
  for (uint16_t h = 1; h <= 0x7BFF; ++h) {
    const double d = std::fabs(HalfValue(h) - a), db = std::fabs(HalfValue(best) - a);
    if (d < db || (d == db && (h & 1) == 0)) best = h;
  }
  return static_cast<uint16_t>(best | (std::signbit(f) ? 0x8000 : 0));
}

TEST(HalfTest, ExhaustiveHalfToFloat) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t hh = static_cast<uint16_t>(h);
    const float f = HalfToFloat(hh);
    if (!HalfIsFinite(hh)) {
      EXPECT_FALSE(std::isfinite(f));
      continue;
    }
    EXPECT_EQ(static_cast<double>(f), HalfValue(hh)) << h;
    EXPECT_EQ(FloatToHalf(f), hh) << h;  // exact round trip
  }
}

TEST(HalfTest, RoundingMatchesSlowReference) {
  std::mt19937 rng(3);
  std::vector<float> probes = {0.0f,     -0.0f,    65504.0f, 65519.0f,         -65504.0f, 1e-8f,
                               2.98e-8f, 5.96e-8f, 6.1e-5f,  6.103515625e-05f, 1.0f / 3,  0.1f};
  for (int i = 0; i < 300; ++i) {
    probes.push_back(std::ldexp(static_cast<float>(rng() % 100000) / 100000.0f,
                                static_cast<int>(rng() % 42) - 26) *
                     (rng() % 2 ? 1.0f : -1.0f));
  }
  // Exact midpoints between neighbouring halves.
  for (uint16_t h : {0x0001, 0x0002, 0x03FF, 0x0400, 0x3C00, 0x3C01, 0x7BFE}) {
    probes.push_back(static_cast<float>((HalfValue(h) + HalfValue(h + 1)) / 2));
  }
  for (float f : probes) EXPECT_EQ(FloatToHalf(f), SlowNearestHalf(f)) << f;
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);  // rounds past the largest finite
  EXPECT_EQ(FloatToHalf(1e9f), 0x7C00);
}

}  // namespace
}  // namespace adacomp::internal
