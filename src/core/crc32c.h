// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as used by the frame
// checksum (docs/wire-format.md). Uses the SSE4.2 crc32 instruction when the
// CPU has it, else a table-driven slice-by-8 (tables built at compile time).
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace adacomp::internal {

// Continues a CRC32C: Crc32cExtend(0, data) is the CRC of data, and
// Crc32cExtend(Crc32cExtend(0, a), b) == Crc32c(a concatenated with b).
uint32_t Crc32cExtend(uint32_t crc, const uint8_t* data, size_t size);

// The portable slice-by-8 version (always available; tests compare the two).
uint32_t Crc32cPortable(uint32_t crc, const uint8_t* data, size_t size);

inline uint32_t Crc32c(std::span<const uint8_t> data) {
  return Crc32cExtend(0, data.data(), data.size());
}

}  // namespace adacomp::internal
