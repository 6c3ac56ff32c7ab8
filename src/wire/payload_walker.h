// The general payload walker: validates the payload of a frame that
// ParseFrame accepted, bit by bit by every rule of docs/wire-format.md, and
// reports each element to a sink. It is the definition of a valid payload
// (the fast reader in wire/fast_reader.h must agree with it) and names the
// byte of every error. Sinks for counting, adding into a buffer and
// collecting sparse entries are here; the Frame sink is in frame.cc.
// Internal to adacomp_core. Thread safety: reentrant; a sink is owned by
// its caller.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/bit_io.h"
#include "core/endian.h"
#include "core/half.h"
#include "wire/format.h"

namespace adacomp::wire {

// ---- Payload walker ------------------------------------------------------
// Validates the payload of a parsed frame and reports each element to a sink:
//   sink.Dense(i, value)            dense
//   sink.Sparse(j, index, negative, raw)  sparse codecs; raw = f32 bits or half bits
//   sink.Bit(i, bit)                onebit
//   sink.Trit(i, trit)              terngrad
// With a sink that writes nothing it is the validation pass.

inline constexpr uint8_t kPow3[6] = {1, 3, 9, 27, 81, 243};

// ---- One sparse entry's code ---------------------------------------------
// The largest unary run of a sparse frame's index code that can still give a
// gap below n (Rice: the quotient; Exp-Golomb: the bit count of the gap).
inline uint64_t MaxUnaryRun(uint64_t n, int k, bool rice) {
  if (rice) return n >> k;
  return n == 0 ? 0 : static_cast<uint64_t>(std::bit_width(((n - 1) >> k) + 1) - 1);
}

// How reading one entry's code went.
enum class CodeStatus {
  kOk,
  kTruncated,         // the index code runs past the end of the payload
  kQuotientTooLarge,  // the unary run is longer than max_q
  kGapTooLarge,       // an Exp-Golomb gap above n >> k
  kIndexOutOfRange,   // the index is not below n (*index holds it)
  kSignTruncated,     // the sign bit runs past the end of the payload
};

// Reads one entry's index code, and its sign bit when `signs`, from r by the
// rules of docs/wire-format.md: the gap from `next` (the index after the
// previous entry), max_q from MaxUnaryRun. The one definition that the
// walker and the fast reader's long codes (wire/fast_reader.cc) share.
inline CodeStatus ReadEntryCode(internal::BitReader& r, bool rice, int k, bool signs,
                                uint64_t max_q, uint64_t next, uint64_t n, uint64_t* index,
                                uint32_t* negative) {
  using internal::BitReader;
  uint64_t q = 0;
  switch (r.GetUnary(max_q, &q)) {
    case BitReader::UnaryResult::kOk:
      break;
    case BitReader::UnaryResult::kTruncated:
      return CodeStatus::kTruncated;
    case BitReader::UnaryResult::kTooLong:
      return CodeStatus::kQuotientTooLarge;
  }
  if (!rice) {
    // Exp-Golomb: q is the bit count b of v - 2^b; v = 2^b + b bits.
    uint32_t vlow = 0;
    if (!r.Get(static_cast<int>(q), &vlow)) return CodeStatus::kTruncated;
    q = ((uint64_t{1} << q) | vlow) - 1;
    if (q > (n >> k)) return CodeStatus::kGapTooLarge;
  }
  uint32_t low = 0;
  if (!r.Get(k, &low)) return CodeStatus::kTruncated;
  *index = next + ((q << k) | low);
  if (*index >= n) return CodeStatus::kIndexOutOfRange;
  *negative = 0;
  if (signs && !r.Get(1, negative)) return CodeStatus::kSignTruncated;
  return CodeStatus::kOk;
}

template <typename Sink>
Status WalkPayload(std::span<const uint8_t> frame, const Header& h, const Params& p, Sink& sink) {
  using internal::BitReader;
  using internal::LoadF32;
  using internal::LoadU16;
  using internal::LoadU32;
  const uint8_t* payload = frame.data() + h.payload_offset;
  const size_t base = h.payload_offset;
  const uint64_t n = h.elements;
  switch (h.codec) {
    case Codec::kDense: {
      for (uint64_t i = 0; i < n; ++i) {
        const float v = LoadF32(payload + 4 * i);
        if (!std::isfinite(v)) {
          return CorruptAt(base + 4 * i,
                           "value of element " + std::to_string(i) + " is not finite");
        }
        sink.Dense(i, v);
      }
      return Status::OK();
    }
    case Codec::kOneBit: {
      const uint64_t full = n / 8;
      for (uint64_t b = 0; b < full; ++b) {
        const uint8_t byte = payload[b];
        for (int t = 0; t < 8; ++t) sink.Bit(8 * b + t, (byte >> t) & 1);
      }
      const int rest = static_cast<int>(n % 8);
      if (rest) {
        const uint8_t byte = payload[full];
        if (byte >> rest)
          return CorruptAt(base + full, "padding bits after the last sign bit are not zero");
        for (int t = 0; t < rest; ++t) sink.Bit(8 * full + t, (byte >> t) & 1);
      }
      return Status::OK();
    }
    case Codec::kTernGrad: {
      const uint64_t bytes = CeilDiv(n, 5);
      for (uint64_t b = 0; b < bytes; ++b) {
        unsigned v = payload[b];
        const int trits = static_cast<int>(b + 1 < bytes ? 5 : n - 5 * b);
        if (v >= kPow3[trits]) {
          return CorruptAt(base + b, "trit byte " + std::to_string(v) + " is not below 3^" +
                                         std::to_string(trits));
        }
        for (int t = 0; t < trits; ++t) {
          sink.Trit(5 * b + t, static_cast<uint8_t>(v % 3));
          v /= 3;
        }
      }
      return Status::OK();
    }
    case Codec::kAdaComp:
    case Codec::kTopK:
    case Codec::kThreshold: {
      const uint64_t count = p.selected;
      const int vb = ValueBytes(h.codec, p);
      const bool signs = HasSigns(h.codec, p);
      const int k = p.code.k;
      const bool rice = p.code.family == IndexFamily::kRice;
      const uint8_t* values = payload;
      const size_t bits_offset = static_cast<size_t>(count) * vb;
      BitReader r(payload + bits_offset, payload + h.payload_bytes);
      const uint64_t max_q = MaxUnaryRun(n, k, rice);
      uint64_t next = 0;
      for (uint64_t j = 0; j < count; ++j) {
        const size_t at = base + bits_offset + static_cast<size_t>(r.position() / 8);
        auto entry = [j] { return "entry " + std::to_string(j); };  // for errors only
        uint64_t index = 0;
        uint32_t neg = 0;
        switch (ReadEntryCode(r, rice, k, signs, max_q, next, n, &index, &neg)) {
          case CodeStatus::kOk:
            break;
          case CodeStatus::kTruncated:
            return CorruptAt(at, "index code of " + entry() + " runs past the end of the payload");
          case CodeStatus::kQuotientTooLarge:
            return CorruptAt(at,
                             "index of " + entry() + " is out of range (gap quotient too large)");
          case CodeStatus::kGapTooLarge:
            return CorruptAt(at, "index of " + entry() + " is out of range (gap too large)");
          case CodeStatus::kIndexOutOfRange:
            return CorruptAt(at, "index " + std::to_string(index) + " of " + entry() +
                                     " is out of range (elements " + std::to_string(n) + ")");
          case CodeStatus::kSignTruncated:
            return CorruptAt(at, "sign bit of " + entry() + " runs past the end of the payload");
        }
        next = index + 1;
        uint32_t raw = 0;
        if (vb == 4) {
          raw = LoadU32(values + 4 * j);
          if (!std::isfinite(std::bit_cast<float>(raw))) {
            return CorruptAt(base + 4 * j,
                             "value of entry " + std::to_string(j) + " is not finite");
          }
        } else if (vb == 2) {
          raw = LoadU16(values + 2 * j);
          if (!internal::HalfIsFinite(static_cast<uint16_t>(raw))) {
            return CorruptAt(base + 2 * j,
                             "value of entry " + std::to_string(j) + " is not finite");
          }
        }
        sink.Sparse(j, static_cast<uint32_t>(index), neg != 0, raw);
      }
      if (!r.AtZeroPaddedEnd()) {
        return CorruptAt(base + bits_offset + static_cast<size_t>(r.position() / 8),
                         "payload continues after the last entry (padding bits or bytes not zero "
                         "or extra bytes)");
      }
      return Status::OK();
    }
  }
  return Status::Internal("unreachable codec");
}

struct CountSink {
  uint64_t nonzero = 0;
  void Dense(uint64_t, float) {}
  void Sparse(uint64_t, uint32_t, bool, uint32_t) {}
  void Bit(uint64_t, int) {}
  void Trit(uint64_t, uint8_t t) { nonzero += t != 0; }
};

struct AccumulateSink {
  float* dst;
  Codec codec;
  Params p;
  void Dense(uint64_t i, float v) { dst[i] += v; }
  void Sparse(uint64_t, uint32_t index, bool negative, uint32_t raw) {
    float v;
    switch (codec) {
      case Codec::kAdaComp:
        if (p.values == ValueMode::kTernary) {
          v = negative ? -p.scale : p.scale;
        } else if (p.values == ValueMode::kFp16) {
          v = internal::HalfToFloat(static_cast<uint16_t>(raw));
        } else {
          v = std::bit_cast<float>(raw);
        }
        break;
      case Codec::kThreshold:
        v = negative ? -p.scale : p.scale;
        break;
      default:
        v = std::bit_cast<float>(raw);
        break;
    }
    dst[index] += v;
  }
  void Bit(uint64_t i, int bit) { dst[i] += bit ? p.scale2 : p.scale; }
  void Trit(uint64_t i, uint8_t t) {
    if (t == 1) dst[i] += p.scale;
    if (t == 2) dst[i] -= p.scale;
  }
};

// One decoded entry of a sparse frame.
struct Entry {
  uint32_t index;
  float value;
};

// Records the dequantized entries of a sparse frame.
struct EntrySink {
  Entry* out;
  Codec codec;
  Params p;
  void Dense(uint64_t, float) {}
  void Sparse(uint64_t j, uint32_t index, bool negative, uint32_t raw) {
    float v;
    if (codec == Codec::kTopK || (codec == Codec::kAdaComp && p.values == ValueMode::kFp32)) {
      v = std::bit_cast<float>(raw);
    } else if (codec == Codec::kAdaComp && p.values == ValueMode::kFp16) {
      v = internal::HalfToFloat(static_cast<uint16_t>(raw));
    } else {
      v = negative ? -p.scale : p.scale;  // adacomp ternary, threshold
    }
    out[j] = Entry{index, v};
  }
  void Bit(uint64_t, int) {}
  void Trit(uint64_t, uint8_t) {}
};

}  // namespace adacomp::wire
