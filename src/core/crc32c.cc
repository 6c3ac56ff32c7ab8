// CRC32C, slice-by-8 over compile-time tables.
#include "core/crc32c.h"

#include <array>
#include <cstring>

#include "core/cpu.h"
#include "core/endian.h"

#if ADACOMP_X86_SIMD
#include <nmmintrin.h>
#endif

namespace adacomp::internal {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables MakeTables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][i] = c;
  }
  for (int s = 1; s < 8; ++s) {
    for (uint32_t i = 0; i < 256; ++i) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
  return t;
}

constexpr Tables kTables = MakeTables();

}  // namespace

#if ADACOMP_X86_SIMD
namespace {

// The SSE4.2 crc32 instruction computes exactly this CRC (Castagnoli), 8
// bytes per instruction: several GB/s in one stream, enough here.
ADACOMP_TARGET_SSE42 uint32_t Crc32cHardware(uint32_t crc, const uint8_t* data, size_t size) {
  uint64_t c = ~crc;
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, data, 8);
    c = _mm_crc32_u64(c, word);
    data += 8;
    size -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (size--) c32 = _mm_crc32_u8(c32, *data++);
  return ~c32;
}

}  // namespace
#endif

uint32_t Crc32cExtend(uint32_t crc, const uint8_t* data, size_t size) {
#if ADACOMP_X86_SIMD
  if (CpuHasSse42()) return Crc32cHardware(crc, data, size);
#endif
  return Crc32cPortable(crc, data, size);
}

uint32_t Crc32cPortable(uint32_t crc, const uint8_t* data, size_t size) {
  uint32_t c = ~crc;
  while (size >= 8) {
    const uint32_t lo = LoadU32(data) ^ c;
    const uint32_t hi = LoadU32(data + 4);
    c = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^
        kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
    data += 8;
    size -= 8;
  }
  while (size--) c = (c >> 8) ^ kTables[0][(c ^ *data++) & 0xFF];
  return ~c;
}

}  // namespace adacomp::internal
