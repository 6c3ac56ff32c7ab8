// wire/payload_walker.h's ReadEntryCode, the one reader of a sparse entry's
// code that the walker and the fast reader's long codes share: each outcome
// on a stream written bit by bit here, against values worked out by hand
// from docs/wire-format.md (unary run of zeros ended by a one; Rice: the run
// is the quotient; Exp-Golomb: the run z, then z bits, gap quotient
// (2^z | bits) - 1; then k low bits; then the sign bit).
#include "wire/payload_walker.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "core/bit_io.h"

namespace adacomp::wire {
namespace {

// (value, bit count) pairs, appended low bit first, padded with zero bits to
// whole bytes (or to `bytes` bytes when given).
std::vector<uint8_t> Bits(const std::vector<std::pair<uint32_t, int>>& fields, size_t bytes = 0) {
  size_t total = 0;
  for (const auto& f : fields) total += static_cast<size_t>(f.second);
  std::vector<uint8_t> out(std::max(bytes, (total + 7) / 8), 0);
  internal::BitWriter w(out.data(), out.data() + out.size());
  for (const auto& [v, n] : fields) w.Put(v, n);
  w.Finish();
  return out;
}

struct Read {
  CodeStatus status;
  uint64_t index = 0;
  uint32_t negative = 0;
  uint64_t bits = 0;
};

Read ReadOne(const std::vector<uint8_t>& s, bool rice, int k, bool signs, uint64_t next,
             uint64_t n) {
  internal::BitReader r(s.data(), s.data() + s.size());
  Read out;
  out.status =
      ReadEntryCode(r, rice, k, signs, MaxUnaryRun(n, k, rice), next, n, &out.index, &out.negative);
  out.bits = r.position();
  return out;
}

TEST(EntryCodeTest, MaxUnaryRun) {
  EXPECT_EQ(MaxUnaryRun(100, 2, true), 25u);  // gaps 0..99: quotients 0..24 (and 25 too long)
  EXPECT_EQ(MaxUnaryRun(0, 0, false), 0u);
  // Exp-Golomb, k 0, n 10: gap quotients 0..9, v = q + 1 in 1..10, at most 3 bits past the
  // leading one (bit width of 10, less one).
  EXPECT_EQ(MaxUnaryRun(10, 0, false), 3u);
  EXPECT_EQ(MaxUnaryRun(16, 1, false), 3u);  // (15 >> 1) + 1 = 8: bit width 4
}

TEST(EntryCodeTest, RiceEntryWithSign) {
  // Gap 9 at k 2: quotient 2 (two zeros and a one), low bits 01, sign 1.
  const auto s = Bits({{0b100, 3}, {1, 2}, {1, 1}});
  const Read r = ReadOne(s, true, 2, true, 5, 100);
  ASSERT_EQ(r.status, CodeStatus::kOk);
  EXPECT_EQ(r.index, 5u + 9u);
  EXPECT_EQ(r.negative, 1u);
  EXPECT_EQ(r.bits, 6u);
}

TEST(EntryCodeTest, ExpGolombEntryWithoutSign) {
  // Exp-Golomb at k 1: run 2, then bits 01 (v = 0b101 = 5, quotient 4), low
  // bit 1: gap (4 << 1) | 1 = 9.
  const auto s = Bits({{0b100, 3}, {0b01, 2}, {1, 1}});
  const Read r = ReadOne(s, false, 1, false, 0, 100);
  ASSERT_EQ(r.status, CodeStatus::kOk);
  EXPECT_EQ(r.index, 9u);
  EXPECT_EQ(r.negative, 0u);
  EXPECT_EQ(r.bits, 6u);
}

TEST(EntryCodeTest, EachError) {
  // A run of zeros to the end of the stream, shorter than max_q (25).
  EXPECT_EQ(ReadOne({0x00}, true, 2, true, 0, 100).status, CodeStatus::kTruncated);
  // Eight zeros where max_q is 4 (n 16, k 2).
  EXPECT_EQ(ReadOne({0x00, 0xff}, true, 2, false, 0, 16).status, CodeStatus::kQuotientTooLarge);
  // Exp-Golomb, n 10, k 0: run 3, bits 111: v 15, quotient 14 > 10.
  EXPECT_EQ(ReadOne(Bits({{0b1000, 4}, {0b111, 3}}), false, 0, false, 0, 10).status,
            CodeStatus::kGapTooLarge);
  // Exp-Golomb bits past the end: run 6 and its one fill 7 bits of the one
  // byte, and 6 bits should follow.
  EXPECT_EQ(ReadOne(Bits({{0b1000000, 7}}), false, 0, false, 0, 1000).status,
            CodeStatus::kTruncated);
  // Rice low bits past the end: 7 zeros, a one, then nothing (k 2).
  EXPECT_EQ(ReadOne({0x80}, true, 2, false, 0, 1000).status, CodeStatus::kTruncated);
  // Index 8 + 3 = 11 with n 10 (Rice, k 2: quotient 0, low bits 11).
  const Read out = ReadOne(Bits({{1, 1}, {3, 2}}), true, 2, false, 8, 10);
  EXPECT_EQ(out.status, CodeStatus::kIndexOutOfRange);
  EXPECT_EQ(out.index, 11u);
  // The code fills the byte exactly (5 zeros, a one, 2 low bits); its sign
  // bit would be the ninth.
  EXPECT_EQ(ReadOne(Bits({{0b100000, 6}, {2, 2}}), true, 2, true, 0, 1000).status,
            CodeStatus::kSignTruncated);
  // The same code without a sign bit is whole: gap (5 << 2) | 2 = 22.
  const Read whole = ReadOne(Bits({{0b100000, 6}, {2, 2}}), true, 2, false, 0, 1000);
  EXPECT_EQ(whole.status, CodeStatus::kOk);
  EXPECT_EQ(whole.index, 22u);
}

}  // namespace
}  // namespace adacomp::wire
