// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as used by the frame
// checksum (docs/wire-format.md). Table-driven slice-by-8; thread-safe (the
// tables are built at compile time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace adacomp::internal {

// Continues a CRC32C: Crc32cExtend(0, data) is the CRC of data, and
// Crc32cExtend(Crc32cExtend(0, a), b) == Crc32c(a concatenated with b).
uint32_t Crc32cExtend(uint32_t crc, const uint8_t* data, size_t size);

inline uint32_t Crc32c(std::span<const uint8_t> data) {
  return Crc32cExtend(0, data.data(), data.size());
}

}  // namespace adacomp::internal
