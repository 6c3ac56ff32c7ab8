#include "core/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace adacomp::internal {
namespace {

uint32_t CrcOf(const std::string& s) {
  return Crc32c({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}

// Bit-at-a-time CRC32C, written from the definition.
uint32_t SlowCrc(const std::vector<uint8_t>& d) {
  uint32_t c = 0xFFFFFFFFu;
  for (uint8_t b : d) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(CrcOf(""), 0u);
  EXPECT_EQ(CrcOf("123456789"), 0xE3069283u);
  EXPECT_EQ(CrcOf("a"), 0xC1D04330u);
  // RFC 3720 B.4: 32 bytes of zeros, of 0xFF, ascending.
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF), inc(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(inc), 0x46DD794Eu);
}

TEST(Crc32cTest, MatchesBitwiseAndExtends) {
  std::vector<uint8_t> d(1000);
  uint32_t x = 12345;
  for (auto& b : d) {
    x = x * 1103515245u + 12345u;
    b = static_cast<uint8_t>(x >> 16);
  }
  for (size_t len : {0, 1, 7, 8, 9, 15, 16, 17, 63, 100, 1000}) {
    std::vector<uint8_t> part(d.begin(), d.begin() + len);
    EXPECT_EQ(Crc32c(part), SlowCrc(part)) << len;
    EXPECT_EQ(Crc32cPortable(0, part.data(), part.size()), SlowCrc(part)) << len;
    for (size_t cut : {size_t{0}, len / 3, len}) {
      uint32_t c = Crc32cExtend(0, part.data(), cut);
      c = Crc32cExtend(c, part.data() + cut, len - cut);
      EXPECT_EQ(c, SlowCrc(part));
    }
  }
}

}  // namespace
}  // namespace adacomp::internal
