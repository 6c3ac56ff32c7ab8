// Helpers shared by the fuzz targets, the replay driver's targets and the
// limits test (not part of the library).
//
// - FUZZ_CHECK: a property check that aborts with a message (libFuzzer and
//   the replay driver both report an abort as a failure; it is not compiled
//   out by NDEBUG, unlike assert).
// - LightParse / Reseal: a deliberately minimal, independent reading of the
//   frame layout of docs/wire-format.md (magic 2, version 1, codec 1, varint
//   tensor id, varint element count, u8 parameter length, parameters, varint
//   payload length, payload, CRC32C u32). It validates nothing but bounds; it
//   only locates the checksum so the fuzzer can recompute it ("reseal") and
//   get past the CRC to the deeper checks, and it gives the element count a
//   header claims so that a rejected frame can be fed a destination of that
//   size.
// - ByteSource: reads fuzz input bytes, then continues with a deterministic
//   generator once the input is used up, so short inputs still build whole
//   tensors.
// Thread safety: none needed (each fuzz input runs on one thread).
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "core/crc32c.h"

#define FUZZ_CHECK(cond, ...)                                                                \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s\n  ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                     \
      std::fprintf(stderr, "\n");                                                            \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

namespace adacomp::fuzz {

struct LightFrame {
  uint64_t tensor_id = 0;
  uint64_t elements = 0;  // as claimed by the header, unchecked
  size_t crc_at = 0;      // offset of the 4 checksum bytes
  size_t end = 0;         // offset just past the frame
};

// Little-endian base-128 varint, at most 10 bytes, no canonical-form check.
inline bool LightVarint(std::span<const uint8_t> b, size_t* pos, uint64_t* v) {
  uint64_t value = 0;
  for (int i = 0; i < 10; ++i) {
    if (*pos >= b.size()) return false;
    const uint8_t byte = b[(*pos)++];
    value |= static_cast<uint64_t>(byte & 0x7F) << (7 * i);
    if (!(byte & 0x80)) {
      *v = value;
      return true;
    }
  }
  return false;
}

inline std::optional<LightFrame> LightParse(std::span<const uint8_t> b) {
  LightFrame f;
  size_t pos = 4;  // magic, version, codec
  if (b.size() < pos) return std::nullopt;
  if (!LightVarint(b, &pos, &f.tensor_id)) return std::nullopt;
  if (!LightVarint(b, &pos, &f.elements)) return std::nullopt;
  if (pos >= b.size()) return std::nullopt;
  pos += 1 + b[pos];  // parameter block
  if (pos > b.size()) return std::nullopt;
  uint64_t payload = 0;
  if (!LightVarint(b, &pos, &payload)) return std::nullopt;
  if (payload > b.size() - pos || b.size() - pos - payload < 4) return std::nullopt;
  f.crc_at = pos + static_cast<size_t>(payload);
  f.end = f.crc_at + 4;
  return f;
}

// Recomputes the checksum of the frame at b[0] in place.
inline void Reseal(std::span<uint8_t> b, const LightFrame& f) {
  const uint32_t crc = internal::Crc32cExtend(0, b.data(), f.crc_at);
  for (int i = 0; i < 4; ++i) b[f.crc_at + i] = static_cast<uint8_t>(crc >> (8 * i));
}

// Bitwise equality of two float arrays (distinguishes -0 from +0, compares NaN
// payloads); returns the first differing index or -1.
inline long FirstBitDifference(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return static_cast<long>(i);
  }
  return -1;
}

// A destination "canary" pattern: finite, mixed signs, includes -0, +0, a
// denormal and a huge value, so that most writes, even of +0, change bits.
inline void FillPattern(std::span<float> dst, uint32_t salt) {
  static const float kPattern[8] = {
      -0.0f, std::bit_cast<float>(0x00000001u), 1.5f, -2.25f, 0.0f, 3.0e38f, -7.0f, 0.125f};
  for (size_t i = 0; i < dst.size(); ++i) dst[i] = kPattern[(i + salt) & 7];
}

class ByteSource {
 public:
  ByteSource(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint8_t U8() {
    if (pos_ < size_) {
      const uint8_t b = data_[pos_++];
      state_ = state_ * 0x100000001B3ull ^ b;  // the generator is keyed by the input
      return b;
    }
    // xorshift64* once the input is exhausted.
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return static_cast<uint8_t>((state_ * 0x2545F4914F6CDD1Dull) >> 56);
  }
  uint16_t U16() { return static_cast<uint16_t>(U8() | (U8() << 8)); }
  uint32_t U32() { return static_cast<uint32_t>(U16()) | (static_cast<uint32_t>(U16()) << 16); }
  uint64_t U64() { return static_cast<uint64_t>(U32()) | (static_cast<uint64_t>(U32()) << 32); }
  bool exhausted() const { return pos_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  uint64_t state_ = 0x9E3779B97F4A7C15ull;
};

}  // namespace adacomp::fuzz
