// Frame format version 1: writer, validating parser, payload walker, the
// decoded structure, and the public InspectFrame / DecodeAccumulate.
#include "wire/frame.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "core/bit_io.h"
#include "core/crc32c.h"
#include "core/endian.h"
#include "core/half.h"
#include "core/parallel.h"
#include "core/simd.h"

namespace adacomp::wire {
namespace {

using internal::BitReader;
using internal::LoadF32;
using internal::LoadU16;
using internal::LoadU32;

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llX", static_cast<unsigned long long>(v));
  return buf;
}

std::string FloatText(float v) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(v));
  return buf;
}

Status CorruptAt(size_t offset, const std::string& what) {
  return Status::Corruption("byte " + std::to_string(offset) + ": " + what);
}

bool IsSparse(Codec c) {
  return c == Codec::kAdaComp || c == Codec::kTopK || c == Codec::kThreshold;
}
bool HasSigns(Codec c, const Params& p) {
  return (c == Codec::kAdaComp && p.values == ValueMode::kTernary) || c == Codec::kThreshold;
}
int ValueBytes(Codec c, const Params& p) {
  if (c == Codec::kTopK) return 4;
  if (c == Codec::kAdaComp) {
    if (p.values == ValueMode::kFp16) return 2;
    if (p.values == ValueMode::kFp32) return 4;
  }
  return 0;
}

uint64_t CeilDiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

// Reads header fields with bounds checks; every error names the offset.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, size_t pos) : bytes_(bytes), pos_(pos) {}
  size_t pos() const { return pos_; }

  Status U8(const char* field, uint8_t* v) {
    if (pos_ >= bytes_.size()) return Truncated(field, 1);
    *v = bytes_[pos_++];
    return Status::OK();
  }
  Status F32(const char* field, float* v) {
    if (bytes_.size() - pos_ < 4 || pos_ > bytes_.size()) return Truncated(field, 4);
    *v = LoadF32(&bytes_[pos_]);
    pos_ += 4;
    return Status::OK();
  }
  // Canonical LEB128, at most `max`.
  Status Varint(const char* field, uint64_t max, uint64_t* v) {
    const size_t start = pos_;
    uint64_t value = 0;
    for (int shift = 0;; shift += 7) {
      if (pos_ >= bytes_.size()) return Truncated(field, 1);
      const uint8_t b = bytes_[pos_++];
      if (shift == 63 && b > 1) {
        return CorruptAt(start, std::string(field) + ": varint exceeds 64 bits");
      }
      value |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) {
        if (b == 0 && pos_ - start > 1) {
          return CorruptAt(start, std::string(field) + ": varint is not in shortest form");
        }
        break;
      }
    }
    if (value > max) {
      return CorruptAt(start, std::string(field) + " " + std::to_string(value) +
                                  " exceeds the maximum " + std::to_string(max));
    }
    *v = value;
    return Status::OK();
  }

 private:
  Status Truncated(const char* field, size_t need) const {
    return CorruptAt(pos_, std::string("truncated frame: ") + field + " needs " +
                               std::to_string(need) + " byte(s), " +
                               std::to_string(pos_ < bytes_.size() ? bytes_.size() - pos_ : 0) +
                               " left");
  }
  std::span<const uint8_t> bytes_;
  size_t pos_;
};

// Checks the semantic rules of a parameter block. Returns an empty string if
// valid, else a message naming the field.
std::string CheckParams(Codec codec, uint64_t elements, const Params& p) {
  auto finite = [](float v) { return std::isfinite(v); };
  switch (codec) {
    case Codec::kDense:
      return "";
    case Codec::kAdaComp:
      if (static_cast<uint8_t>(p.values) > 2)
        return "value mode " + std::to_string(int(p.values)) + " is unknown";
      if (p.bin_size == 0) return "bin_size is 0";
      if (p.code.k > kMaxCodeK || static_cast<uint8_t>(p.code.family) > 1)
        return "index code is invalid";
      if (p.selected > elements) {
        return "selected count " + std::to_string(p.selected) + " exceeds the element count " +
               std::to_string(elements);
      }
      if (p.values == ValueMode::kTernary) {
        if (!finite(p.scale) || std::signbit(p.scale)) {
          return "scale " + FloatText(p.scale) + " is not a finite non-negative number";
        }
      }
      return "";
    case Codec::kTopK:
    case Codec::kThreshold:
      if (p.code.k > kMaxCodeK || static_cast<uint8_t>(p.code.family) > 1)
        return "index code is invalid";
      if (p.selected > elements) {
        return "selected count " + std::to_string(p.selected) + " exceeds the element count " +
               std::to_string(elements);
      }
      if (codec == Codec::kThreshold && (!finite(p.scale) || !(p.scale > 0.0f))) {
        return "tau " + FloatText(p.scale) + " is not a finite positive number";
      }
      return "";
    case Codec::kOneBit:
      if (!finite(p.scale) || std::signbit(p.scale)) {
        return "positive mean " + FloatText(p.scale) + " is not finite and >= 0";
      }
      if (!finite(p.scale2) || p.scale2 > 0.0f) {
        return "negative mean " + FloatText(p.scale2) + " is not finite and <= 0";
      }
      return "";
    case Codec::kTernGrad:
      if (!finite(p.scale) || std::signbit(p.scale)) {
        return "s " + FloatText(p.scale) + " is not a finite non-negative number";
      }
      return "";
  }
  return "unknown codec";
}

// Expected payload size for the codecs whose payload size follows from the
// header alone; 0 with `fixed` false for sparse codecs.
uint64_t FixedPayloadBytes(Codec codec, uint64_t elements, bool* fixed) {
  *fixed = true;
  switch (codec) {
    case Codec::kDense:
      return 4 * elements;
    case Codec::kOneBit:
      return CeilDiv(elements, 8);
    case Codec::kTernGrad:
      return CeilDiv(elements, 5);
    default:
      *fixed = false;
      return 0;
  }
}

// ---- Payload walker ------------------------------------------------------
// Validates the payload of a parsed frame and reports each element to a sink:
//   sink.Dense(i, value)            dense
//   sink.Sparse(j, index, negative, raw)  sparse codecs; raw = f32 bits or half bits
//   sink.Bit(i, bit)                onebit
//   sink.Trit(i, trit)              terngrad
// With a sink that writes nothing it is the validation pass.

constexpr uint8_t kPow3[6] = {1, 3, 9, 27, 81, 243};

template <typename Sink>
Status WalkPayload(std::span<const uint8_t> frame, const Header& h, const Params& p, Sink& sink) {
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
      // Largest unary run that can still give a gap below n.
      const uint64_t max_q =
          rice ? n >> k
               : (n == 0 ? 0 : static_cast<uint64_t>(std::bit_width(((n - 1) >> k) + 1) - 1));
      uint64_t next = 0;
      for (uint64_t j = 0; j < count; ++j) {
        const size_t at = base + bits_offset + static_cast<size_t>(r.position() / 8);
        uint64_t q = 0;
        switch (r.GetUnary(max_q, &q)) {
          case BitReader::UnaryResult::kOk:
            break;
          case BitReader::UnaryResult::kTruncated:
            return CorruptAt(at, "index code of entry " + std::to_string(j) +
                                     " runs past the end of the payload");
          case BitReader::UnaryResult::kTooLong:
            return CorruptAt(at, "index of entry " + std::to_string(j) +
                                     " is out of range (gap quotient too large)");
        }
        if (!rice) {
          // Exp-Golomb: q is the bit count b of v - 2^b; v = 2^b + b bits.
          uint32_t vlow = 0;
          if (!r.Get(static_cast<int>(q), &vlow)) {
            return CorruptAt(at, "index code of entry " + std::to_string(j) +
                                     " runs past the end of the payload");
          }
          q = ((uint64_t{1} << q) | vlow) - 1;
          if (q > (n >> k)) {
            return CorruptAt(
                at, "index of entry " + std::to_string(j) + " is out of range (gap too large)");
          }
        }
        uint32_t low = 0;
        if (!r.Get(k, &low)) {
          return CorruptAt(
              at, "index code of entry " + std::to_string(j) + " runs past the end of the payload");
        }
        const uint64_t index = next + ((q << k) | low);
        if (index >= n) {
          return CorruptAt(at, "index " + std::to_string(index) + " of entry " + std::to_string(j) +
                                   " is out of range (elements " + std::to_string(n) + ")");
        }
        next = index + 1;
        uint32_t neg = 0;
        if (signs && !r.Get(1, &neg)) {
          return CorruptAt(
              at, "sign bit of entry " + std::to_string(j) + " runs past the end of the payload");
        }
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

struct FrameSink {
  Frame* f;
  bool signs;
  int vb;
  void Dense(uint64_t, float v) { f->values.push_back(v); }
  void Sparse(uint64_t, uint32_t index, bool negative, uint32_t raw) {
    f->indices.push_back(index);
    if (signs) f->negative.push_back(negative ? 1 : 0);
    if (vb == 4) f->values.push_back(std::bit_cast<float>(raw));
    if (vb == 2) f->half_values.push_back(static_cast<uint16_t>(raw));
  }
  void Bit(uint64_t, int bit) { f->symbols.push_back(static_cast<uint8_t>(bit)); }
  void Trit(uint64_t, uint8_t t) { f->symbols.push_back(t); }
};

// One entry's code at the start of the window w (bit 0 is the next bit of
// the stream; bits past the stream are zero), for a code family, k and
// sign bit. Returns false if the code is not one the fast path takes (no
// one bit, longer than 57 bits, an Exp-Golomb prefix out of range) or the
// index is not below n; otherwise sets its length in bits, index and sign.
template <bool kRice, bool kSigns>
[[gnu::always_inline]] inline bool DecodeCode(uint64_t w, int k, uint64_t low_mask, uint64_t next,
                                              uint64_t n, uint64_t* bits, uint64_t* index,
                                              uint32_t* negative) {
  if (w == 0) return false;
  const int z = std::countr_zero(w);
  uint64_t q, len;
  if constexpr (kRice) {
    q = static_cast<uint64_t>(z);
    len = q + 1;
  } else {
    if (2 * z + 1 > 57) return false;
    const uint64_t v = (uint64_t{1} << z) | ((w >> (z + 1)) & ((uint64_t{1} << z) - 1));
    q = v - 1;
    if (q > (n >> k)) return false;
    len = 2 * static_cast<uint64_t>(z) + 1;
  }
  const uint64_t total = len + static_cast<uint64_t>(k) + (kSigns ? 1 : 0);
  if (total > 57) return false;
  *index = next + ((q << k) | ((w >> len) & low_mask));
  if (*index >= n) return false;
  *bits = total;
  *negative = kSigns ? static_cast<uint32_t>((w >> (len + k)) & 1) : 0u;
  return true;
}

// Fast decoder of a sparse payload into entries: 64-bit peeks, one
// count-trailing-zeros per unary code, specialized on the code family,
// value bytes and sign bit. Returns true only if the payload is valid by
// every rule WalkPayload checks and every entry was written; on anything
// unusual (an error, or a code longer than 57 bits) it returns false, and
// the caller runs WalkPayload, which gives the answer and the error message.
//
// The bit position is a dependency chain from one entry to the next (load,
// shift, count zeros, add). While 8 bytes can be loaded, each load serves
// two entries when both fit in the 57-64 bits it brings (nearly always:
// codes average 6-10 bits), which shortens that chain per entry.
template <bool kRice, int kVb, bool kSigns>
[[gnu::noinline]] bool FastSparseEntriesT(std::span<const uint8_t> frame, const Header& h,
                                         const Params& p,
                        Entry* out) {
  const uint64_t count = p.selected;
  const uint64_t n = h.elements;
  const int k = p.code.k;
  const uint8_t* payload = frame.data() + h.payload_offset;
  const size_t bits_offset = static_cast<size_t>(count) * kVb;  // <= payload (ParseParams)
  const uint8_t* bs = payload + bits_offset;
  const size_t nbytes = h.payload_bytes - bits_offset;
  const uint64_t total_bits = uint64_t{nbytes} * 8;
  const uint64_t low_mask = (uint64_t{1} << k) - 1;
  const uint32_t scale_bits = std::bit_cast<uint32_t>(p.scale);
  // Entry j's value; false if it is not finite (fp32, fp16).
  auto value = [&](uint64_t j, uint32_t negative, float* v) {
    if constexpr (kVb == 4) {
      *v = LoadF32(payload + 4 * j);
      return std::isfinite(*v);
    } else if constexpr (kVb == 2) {
      const uint16_t half = LoadU16(payload + 2 * j);
      *v = internal::HalfToFloat(half);
      return internal::HalfIsFinite(half);
    } else {
      // +-scale, branch-free (the sign is random; -scale flips the sign bit).
      *v = std::bit_cast<float>(scale_bits | (negative << 31));
      return true;
    }
  };
  uint64_t pos = 0, next = 0, j = 0;
  while (j + 1 < count && (pos >> 3) + 8 <= nbytes) {
    const uint64_t shift = pos & 7;
    const uint64_t w = internal::LoadU64(bs + (pos >> 3)) >> shift;  // 64 - shift valid bits
    uint64_t ta, ia, tb, ib;
    uint32_t na, nb;
    if (!DecodeCode<kRice, kSigns>(w, k, low_mask, next, n, &ta, &ia, &na)) return false;
    float va, vb;
    if (!value(j, na, &va)) return false;
    out[j] = Entry{static_cast<uint32_t>(ia), va};
    // The second entry is taken only if it lies wholly in the window;
    // otherwise (or if it is bad) the next round reads it as the first.
    if (DecodeCode<kRice, kSigns>(w >> ta, k, low_mask, ia + 1, n, &tb, &ib, &nb) &&
        ta + tb <= 64 - shift) [[likely]] {
      if (!value(j + 1, nb, &vb)) return false;
      out[j + 1] = Entry{static_cast<uint32_t>(ib), vb};
      pos += ta + tb;
      next = ib + 1;
      j += 2;
    } else {
      pos += ta;
      next = ia + 1;
      j += 1;
    }
  }
  for (; j < count; ++j) {
    if (pos > total_bits) return false;
    const size_t byte = static_cast<size_t>(pos >> 3);
    uint64_t w;
    if (nbytes - byte >= 8) {
      w = internal::LoadU64(bs + byte);
    } else {
      w = 0;
      for (size_t i = byte; i < nbytes; ++i) w |= uint64_t{bs[i]} << (8 * (i - byte));
    }
    w >>= pos & 7;  // at least 57 bits of the stream (zeros past its end)
    uint64_t t, index;
    uint32_t negative;
    if (!DecodeCode<kRice, kSigns>(w, k, low_mask, next, n, &t, &index, &negative)) return false;
    float v;
    if (!value(j, negative, &v)) return false;
    out[j] = Entry{static_cast<uint32_t>(index), v};
    pos += t;
    next = index + 1;
  }
  // Ends exactly in the last byte, padding bits zero.
  if (pos > total_bits || (pos + 7) / 8 != nbytes) return false;
  if ((pos & 7) && (bs[pos >> 3] >> (pos & 7)) != 0) return false;
  return true;
}

bool FastSparseEntries(std::span<const uint8_t> frame, const Header& h, const Params& p,
                       Entry* out) {
  const int vb = ValueBytes(h.codec, p);
  const bool signs = HasSigns(h.codec, p);
  const bool rice = p.code.family == IndexFamily::kRice;
  if (vb == 0 && signs) {
    return rice ? FastSparseEntriesT<true, 0, true>(frame, h, p, out)
                : FastSparseEntriesT<false, 0, true>(frame, h, p, out);
  }
  if (vb == 4 && !signs) {
    return rice ? FastSparseEntriesT<true, 4, false>(frame, h, p, out)
                : FastSparseEntriesT<false, 4, false>(frame, h, p, out);
  }
  if (vb == 2 && !signs) {
    return rice ? FastSparseEntriesT<true, 2, false>(frame, h, p, out)
                : FastSparseEntriesT<false, 2, false>(frame, h, p, out);
  }
  return false;  // no such codec today; the walker handles it
}

void StoreParams(Codec codec, const Params& p, uint8_t* out) {
  size_t o = 0;
  auto f32 = [&](float v) {
    internal::StoreF32(out + o, v);
    o += 4;
  };
  switch (codec) {
    case Codec::kDense:
      break;
    case Codec::kAdaComp:
      out[o++] = static_cast<uint8_t>(p.values);
      out[o++] = p.code.Byte();
      o += internal::StoreVarint(out + o, p.bin_size);
      o += internal::StoreVarint(out + o, p.selected);
      if (p.values == ValueMode::kTernary) f32(p.scale);
      break;
    case Codec::kTopK:
      out[o++] = p.code.Byte();
      o += internal::StoreVarint(out + o, p.selected);
      break;
    case Codec::kThreshold:
      out[o++] = p.code.Byte();
      o += internal::StoreVarint(out + o, p.selected);
      f32(p.scale);
      break;
    case Codec::kOneBit:
      f32(p.scale);
      f32(p.scale2);
      break;
    case Codec::kTernGrad:
      f32(p.scale);
      break;
  }
}

Status ReadIndexCode(Cursor& c, IndexCode* code) {
  uint8_t b = 0;
  ADACOMP_RETURN_IF_ERROR(c.U8("index code", &b));
  if (b >> 6) {
    return CorruptAt(c.pos() - 1, "index code byte " + Hex(b) + " has reserved bits set");
  }
  code->k = b & 31;
  code->family = static_cast<IndexFamily>((b >> 5) & 1);
  return Status::OK();
}

Status ParseParams(std::span<const uint8_t> bytes, const Header& h, Params* p) {
  Cursor c(bytes.first(h.params_offset + h.params_bytes), h.params_offset);
  uint8_t u8 = 0;
  uint64_t v = 0;
  switch (h.codec) {
    case Codec::kDense:
      break;
    case Codec::kAdaComp:
      ADACOMP_RETURN_IF_ERROR(c.U8("value mode", &u8));
      if (u8 > 2) {
        return CorruptAt(c.pos() - 1,
                         "value mode byte " + Hex(u8) + " is unknown or has reserved bits set");
      }
      p->values = static_cast<ValueMode>(u8);
      ADACOMP_RETURN_IF_ERROR(ReadIndexCode(c, &p->code));
      ADACOMP_RETURN_IF_ERROR(c.Varint("bin_size", 0xFFFFFFFFull, &v));
      p->bin_size = static_cast<uint32_t>(v);
      ADACOMP_RETURN_IF_ERROR(c.Varint("selected count", h.elements, &p->selected));
      if (p->values == ValueMode::kTernary) ADACOMP_RETURN_IF_ERROR(c.F32("scale", &p->scale));
      break;
    case Codec::kTopK:
    case Codec::kThreshold:
      ADACOMP_RETURN_IF_ERROR(ReadIndexCode(c, &p->code));
      ADACOMP_RETURN_IF_ERROR(c.Varint("selected count", h.elements, &p->selected));
      if (h.codec == Codec::kThreshold) ADACOMP_RETURN_IF_ERROR(c.F32("tau", &p->scale));
      break;
    case Codec::kOneBit:
      ADACOMP_RETURN_IF_ERROR(c.F32("positive mean", &p->scale));
      ADACOMP_RETURN_IF_ERROR(c.F32("negative mean", &p->scale2));
      break;
    case Codec::kTernGrad:
      ADACOMP_RETURN_IF_ERROR(c.F32("s", &p->scale));
      break;
  }
  if (c.pos() != h.params_offset + h.params_bytes) {
    return CorruptAt(c.pos(), "parameter block length " + std::to_string(h.params_bytes) +
                                  " does not match the " +
                                  std::to_string(c.pos() - h.params_offset) +
                                  " bytes its fields use");
  }
  const std::string bad = CheckParams(h.codec, h.elements, *p);
  if (!bad.empty()) return CorruptAt(h.params_offset, "codec parameters: " + bad);
  // Payload size consistency.
  if (IsSparse(h.codec)) {
    const int vb = ValueBytes(h.codec, *p);
    const uint64_t value_bytes = p->selected * static_cast<uint64_t>(vb);
    const uint64_t min_bits =
        p->selected * (uint64_t{1} + p->code.k + (HasSigns(h.codec, *p) ? 1 : 0));
    if (value_bytes > h.payload_bytes || CeilDiv(min_bits, 8) > h.payload_bytes - value_bytes) {
      return CorruptAt(h.payload_offset, "payload length " + std::to_string(h.payload_bytes) +
                                             " is too short for " + std::to_string(p->selected) +
                                             " selected entries");
    }
  }
  return Status::OK();
}

}  // namespace

size_t ParamsBytes(Codec codec, const Params& p) {
  switch (codec) {
    case Codec::kDense:
      return 0;
    case Codec::kAdaComp:
      return 2 + internal::VarintLength(p.bin_size) + internal::VarintLength(p.selected) +
             (p.values == ValueMode::kTernary ? 4 : 0);
    case Codec::kTopK:
      return 1 + internal::VarintLength(p.selected);
    case Codec::kThreshold:
      return 1 + internal::VarintLength(p.selected) + 4;
    case Codec::kOneBit:
      return 8;
    case Codec::kTernGrad:
      return 4;
  }
  return 0;
}

size_t BeginFrame(std::vector<uint8_t>* out, Codec codec, uint32_t tensor_id, uint64_t elements,
                  const Params& params, size_t payload_bytes) {
  const size_t pbytes = ParamsBytes(codec, params);
  const size_t header = 4 + internal::VarintLength(tensor_id) + internal::VarintLength(elements) +
                        1 + pbytes + internal::VarintLength(payload_bytes);
  const size_t start = out->size();
  out->resize(start + header + payload_bytes + kCrcBytes);
  uint8_t* p = out->data() + start;
  p[0] = kMagic0;
  p[1] = kMagic1;
  p[2] = kVersion;
  p[3] = static_cast<uint8_t>(codec);
  size_t o = 4;
  o += internal::StoreVarint(p + o, tensor_id);
  o += internal::StoreVarint(p + o, elements);
  p[o++] = static_cast<uint8_t>(pbytes);
  StoreParams(codec, params, p + o);
  o += pbytes;
  o += internal::StoreVarint(p + o, payload_bytes);
  assert(o == header);
  return start + header;
}

void FinishFrame(std::vector<uint8_t>* out, size_t frame_start) {
  const size_t end = out->size() - kCrcBytes;
  const uint32_t crc = internal::Crc32cExtend(0, out->data() + frame_start, end - frame_start);
  internal::StoreU32(out->data() + end, crc);
}

uint64_t IndexCodeBits(std::span<const uint32_t> indices, IndexCode code) {
  const int k = code.k;
  const uint64_t bits = static_cast<uint64_t>(indices.size()) * (1 + static_cast<uint64_t>(k));
  if (code.family == IndexFamily::kRice) {
    return bits + internal::RiceSum(indices.data(), indices.size(), k);
  }
  return bits + 2 * internal::EgSum(indices.data(), indices.size(), k);
}

uint64_t IndexCodeBitsFrom(std::span<const uint32_t> indices, IndexCode code, uint64_t next0) {
  uint64_t bits = IndexCodeBits(indices, code);
  if (indices.empty() || next0 == 0) return bits;
  // IndexCodeBits took the first gap from 0; it is from next0.
  auto len = [&](uint64_t gap) -> uint64_t {
    const uint64_t q = gap >> code.k;
    return code.family == IndexFamily::kRice ? q : 2 * static_cast<uint64_t>(std::bit_width(q + 1) - 1);
  };
  return bits - len(indices[0]) + len(indices[0] - next0);
}

IndexCode ChooseIndexCode(std::span<const uint32_t> indices, uint64_t* code_bits) {
  if (code_bits) *code_bits = 0;
  if (indices.empty()) return {};
  // Start points: log2 of the mean gap (Rice), of the geometric mean
  // (Exp-Golomb); then descend. The Rice cost is convex in k (each step up
  // in k saves sum(ceil((g >> k) / 2)) bits, which shrinks as k grows, and
  // costs C bits), so its descent ends at the exact optimum; for
  // Exp-Golomb it ends at a local optimum, in practice the optimum.
  const internal::GapStats gs = internal::ComputeGapStats(indices.data(), indices.size());
  const uint64_t gap_sum = gs.sum, width_sum = gs.width_sum, max_gap = gs.max;
  const uint64_t count = indices.size();
  const int k_max = std::min(kMaxCodeK, static_cast<int>(std::bit_width(max_gap)));
  auto descend = [&](IndexFamily family, int k) {
    k = std::clamp(k, 0, k_max);
    uint64_t cost = IndexCodeBits(indices, {family, static_cast<uint8_t>(k)});
    bool moved = false;
    while (k > 0) {  // down while not worse (prefers the smaller k on ties)
      const uint64_t c = IndexCodeBits(indices, {family, static_cast<uint8_t>(k - 1)});
      if (c > cost) break;
      cost = c;
      --k;
      moved = true;
    }
    while (!moved && k < k_max) {  // else up while strictly better
      const uint64_t c = IndexCodeBits(indices, {family, static_cast<uint8_t>(k + 1)});
      if (c >= cost) break;
      cost = c;
      ++k;
    }
    return std::pair<IndexCode, uint64_t>{{family, static_cast<uint8_t>(k)}, cost};
  };
  const int rice_start = static_cast<int>(std::bit_width(gap_sum / count));
  const int eg_start = static_cast<int>(width_sum / count) - 1;
  const auto rice = descend(IndexFamily::kRice, rice_start);
  const auto eg = descend(IndexFamily::kExpGolomb, eg_start);
  const auto& best = eg.second < rice.second ? eg : rice;
  if (code_bits) *code_bits = best.second;
  return best.first;
}

namespace {
void WriteSignOfPlain(uint8_t* begin, uint8_t* end, std::span<const uint32_t> indices,
                      IndexCode code, const float* values, uint64_t next0, int fill0) {
  WriteSparseBits(
      begin, end, indices, code, true, [values](size_t j) { return std::signbit(values[j]); },
      next0, fill0);
}
#if defined(__x86_64__) && !defined(ADACOMP_NO_SIMD)
// The same code with BMI2's flag-free variable shifts (shlx/shrx), which
// take about a sixth off the writer's time per entry.
__attribute__((target("bmi,bmi2"))) void WriteSignOfBmi2(uint8_t* begin, uint8_t* end,
                                                         std::span<const uint32_t> indices,
                                                         IndexCode code, const float* values,
                                                         uint64_t next0, int fill0) {
  WriteSparseBits(
      begin, end, indices, code, true, [values](size_t j) { return std::signbit(values[j]); },
      next0, fill0);
}
#endif
}  // namespace

void WriteSparseBitsSignOf(uint8_t* begin, uint8_t* end, std::span<const uint32_t> indices,
                           IndexCode code, const float* values, uint64_t next0, int fill0) {
#if defined(__x86_64__) && !defined(ADACOMP_NO_SIMD)
  static const bool bmi2 = __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
  if (bmi2) return WriteSignOfBmi2(begin, end, indices, code, values, next0, fill0);
#endif
  WriteSignOfPlain(begin, end, indices, code, values, next0, fill0);
}

size_t SparsePayloadBytes(uint64_t count, uint64_t code_bits, bool signs, int value_bytes) {
  return static_cast<size_t>(count * value_bytes + CeilDiv(code_bits + (signs ? count : 0), 8));
}

Status ParseFrame(std::span<const uint8_t> bytes, const DecodeOptions& options, Header* h,
                  Params* p) {
  if (bytes.size() < 4) {
    return CorruptAt(bytes.size(), "truncated frame: " + std::to_string(bytes.size()) +
                                       " byte(s), the fixed header needs 4");
  }
  if (bytes[0] != kMagic0 || bytes[1] != kMagic1) {
    return CorruptAt(0, "bad magic " + Hex(bytes[0]) + " " + Hex(bytes[1]) +
                            " (expected 0x41 0x43, \"AC\"): not an adacomp frame");
  }
  h->version = bytes[2];
  if (h->version != kVersion) {
    return CorruptAt(2, "unsupported format version " + std::to_string(h->version) +
                            " (this build reads version 1)");
  }
  Cursor c(bytes, 4);
  uint64_t v = 0;
  ADACOMP_RETURN_IF_ERROR(c.Varint("tensor id", 0xFFFFFFFFull, &v));
  h->tensor_id = static_cast<uint32_t>(v);
  const size_t elements_offset = c.pos();
  ADACOMP_RETURN_IF_ERROR(
      c.Varint("element count", std::numeric_limits<uint64_t>::max(), &h->elements));
  uint8_t plen = 0;
  ADACOMP_RETURN_IF_ERROR(c.U8("parameter block length", &plen));
  h->params_offset = c.pos();
  h->params_bytes = plen;
  if (bytes.size() - c.pos() < plen) {
    return CorruptAt(c.pos(), "truncated frame: parameter block of " + std::to_string(plen) +
                                  " bytes, " + std::to_string(bytes.size() - c.pos()) + " left");
  }
  Cursor c2(bytes, c.pos() + plen);
  const size_t plen_offset = c2.pos();
  uint64_t payload_len = 0;
  ADACOMP_RETURN_IF_ERROR(
      c2.Varint("payload length", std::numeric_limits<uint64_t>::max(), &payload_len));
  h->payload_offset = c2.pos();
  // Frame length, computed without overflow.
  const uint64_t max_frame = options.max_frame_bytes;
  if (payload_len > max_frame || h->payload_offset + kCrcBytes > max_frame - payload_len) {
    return Status::OutOfRange("byte " + std::to_string(plen_offset) + ": payload length " +
                              std::to_string(payload_len) + " makes the frame larger than " +
                              "max_frame_bytes " + std::to_string(max_frame));
  }
  if (payload_len > bytes.size() || bytes.size() - payload_len < h->payload_offset + kCrcBytes) {
    return CorruptAt(plen_offset,
                     "truncated frame: payload length " + std::to_string(payload_len) + " needs " +
                         std::to_string(h->payload_offset + payload_len + kCrcBytes) +
                         " bytes in all, " + std::to_string(bytes.size()) + " available");
  }
  h->payload_bytes = static_cast<size_t>(payload_len);
  h->frame_bytes = h->payload_offset + h->payload_bytes + kCrcBytes;
  const size_t crc_at = h->frame_bytes - kCrcBytes;
  h->crc32c = LoadU32(&bytes[crc_at]);
  const uint32_t computed = internal::Crc32cExtend(0, bytes.data(), crc_at);
  if (computed != h->crc32c) {
    return CorruptAt(crc_at, "checksum mismatch: stored " + Hex(h->crc32c) + ", computed " +
                                 Hex(computed) + " (frame damaged)");
  }
  // The checksum holds; now every field's meaning.
  if (bytes[3] > kMaxCodecId) {
    return CorruptAt(3, "unknown codec id " + std::to_string(bytes[3]));
  }
  h->codec = static_cast<Codec>(bytes[3]);
  if (options.expected_tensor_id && *options.expected_tensor_id != h->tensor_id) {
    return Status::InvalidArgument("byte 4: tensor id " + std::to_string(h->tensor_id) +
                                   " is not the expected " +
                                   std::to_string(*options.expected_tensor_id));
  }
  if (h->elements > options.max_elements) {
    return Status::OutOfRange("byte " + std::to_string(elements_offset) + ": element count " +
                              std::to_string(h->elements) + " exceeds max_elements " +
                              std::to_string(options.max_elements));
  }
  if (h->elements > kMaxElements) {
    return CorruptAt(elements_offset, "element count " + std::to_string(h->elements) +
                                          " exceeds the format's limit 2^32-1");
  }
  bool fixed = false;
  const uint64_t want = FixedPayloadBytes(h->codec, h->elements, &fixed);
  if (fixed && want != h->payload_bytes) {
    return CorruptAt(plen_offset, "payload length " + std::to_string(h->payload_bytes) +
                                      " does not match the " + std::to_string(want) +
                                      " bytes that " + std::to_string(h->elements) + " " +
                                      std::string(CodecName(h->codec)) + " elements take");
  }
  *p = Params{};
  return ParseParams(bytes, *h, p);
}

Status DecodeFrame(std::span<const uint8_t> bytes, const DecodeOptions& options, Frame* frame,
                   size_t* frame_bytes) {
  Header h;
  Params p;
  ADACOMP_RETURN_IF_ERROR(ParseFrame(bytes, options, &h, &p));
  CountSink check;
  ADACOMP_RETURN_IF_ERROR(WalkPayload(bytes, h, p, check));
  // Validated: sizes below are bounded by the frame's length.
  Frame f;
  f.version = h.version;
  f.codec = h.codec;
  f.tensor_id = h.tensor_id;
  f.elements = h.elements;
  f.params = p;
  FrameSink sink{&f, HasSigns(h.codec, p), ValueBytes(h.codec, p)};
  if (IsSparse(h.codec)) {
    f.indices.reserve(p.selected);
  } else if (h.codec == Codec::kDense) {
    f.values.reserve(h.elements);
  } else {
    f.symbols.reserve(h.elements);
  }
  const Status st = WalkPayload(bytes, h, p, sink);
  if (!st.ok()) return Status::Internal("second decode pass failed: " + st.message());
  *frame = std::move(f);
  if (frame_bytes) *frame_bytes = h.frame_bytes;
  return Status::OK();
}

Status EncodeFrame(const Frame& f, std::vector<uint8_t>* out) {
  auto bad = [](const std::string& m) { return Status::InvalidArgument("EncodeFrame: " + m); };
  if (f.version != kVersion) return bad("version must be 1");
  if (static_cast<uint8_t>(f.codec) > kMaxCodecId) return bad("unknown codec");
  if (f.elements > kMaxElements) return bad("element count exceeds 2^32-1");
  Params p = f.params;
  const uint64_t n = f.elements;
  const Codec codec = f.codec;
  if (IsSparse(codec)) {
    if (p.selected != f.indices.size()) return bad("params.selected != indices.size()");
    uint64_t next = 0;
    for (uint32_t i : f.indices) {
      if (i < next || i >= n) return bad("indices must increase and be below elements");
      next = uint64_t{i} + 1;
    }
    const bool signs = HasSigns(codec, p);
    const int vb = ValueBytes(codec, p);
    if (f.negative.size() != (signs ? f.indices.size() : 0)) return bad("negative size");
    if (f.values.size() != (vb == 4 ? f.indices.size() : 0)) return bad("values size");
    if (f.half_values.size() != (vb == 2 ? f.indices.size() : 0)) return bad("half size");
  } else if (codec == Codec::kDense) {
    if (f.values.size() != n) return bad("dense needs one value per element");
  } else {
    if (f.symbols.size() != n) return bad("one symbol per element needed");
    const uint8_t limit = codec == Codec::kOneBit ? 1 : 2;
    for (uint8_t s : f.symbols) {
      if (s > limit) return bad("symbol out of range");
    }
  }
  for (float v : f.values) {
    if (!std::isfinite(v)) return bad("non-finite value");
  }
  for (uint16_t v : f.half_values) {
    if (!internal::HalfIsFinite(v)) return bad("non-finite half value");
  }
  const std::string pbad = CheckParams(codec, n, p);
  if (!pbad.empty()) return bad(pbad);

  size_t payload_bytes = 0;
  uint64_t code_bits = 0;
  if (IsSparse(codec)) {
    code_bits = IndexCodeBits(f.indices, p.code);
    payload_bytes =
        SparsePayloadBytes(f.indices.size(), code_bits, HasSigns(codec, p), ValueBytes(codec, p));
  } else {
    bool fixed = false;
    payload_bytes = static_cast<size_t>(FixedPayloadBytes(codec, n, &fixed));
  }
  const size_t start = out->size();
  const size_t at = BeginFrame(out, codec, f.tensor_id, n, p, payload_bytes);
  uint8_t* dst = out->data() + at;
  switch (codec) {
    case Codec::kDense:
      for (uint64_t i = 0; i < n; ++i) internal::StoreF32(dst + 4 * i, f.values[i]);
      break;
    case Codec::kOneBit:
      for (uint64_t i = 0; i < n; ++i) dst[i / 8] |= static_cast<uint8_t>(f.symbols[i] << (i % 8));
      break;
    case Codec::kTernGrad:
      for (uint64_t b = 0; b * 5 < n; ++b) {
        unsigned v = 0;
        for (uint64_t i = std::min<uint64_t>(n, 5 * b + 5); i-- > 5 * b;) v = v * 3 + f.symbols[i];
        dst[b] = static_cast<uint8_t>(v);
      }
      break;
    default: {
      const int vb = ValueBytes(codec, p);
      const size_t count = f.indices.size();
      for (size_t j = 0; j < count; ++j) {
        if (vb == 4) internal::StoreF32(dst + 4 * j, f.values[j]);
        if (vb == 2) internal::StoreU16(dst + 2 * j, f.half_values[j]);
      }
      WriteSparseBits(dst + count * vb, dst + payload_bytes, f.indices, p.code, HasSigns(codec, p),
                      [&](size_t j) { return f.negative[j] != 0; });
      break;
    }
  }
  FinishFrame(out, start);
  return Status::OK();
}

Status Dequantize(const Frame& f, std::span<float> dst) {
  if (dst.size() != f.elements) return Status::InvalidArgument("Dequantize: size mismatch");
  std::fill(dst.begin(), dst.end(), 0.0f);
  std::vector<uint8_t> bytes;
  ADACOMP_RETURN_IF_ERROR(EncodeFrame(f, &bytes));
  return DecodeAccumulate(bytes, dst);
}

}  // namespace adacomp::wire

namespace adacomp {

namespace {

FrameInfo MakeInfo(const wire::Header& h, const wire::Params& p, uint64_t nonzero_trits) {
  FrameInfo fi;
  fi.version = h.version;
  fi.codec = h.codec;
  fi.tensor_id = h.tensor_id;
  fi.elements = h.elements;
  fi.params_bytes = h.params_bytes;
  fi.payload_bytes = h.payload_bytes;
  fi.frame_bytes = h.frame_bytes;
  fi.crc32c = h.crc32c;
  switch (h.codec) {
    case Codec::kDense:
    case Codec::kOneBit:
      fi.selected = h.elements;
      break;
    case Codec::kTernGrad:
      fi.selected = nonzero_trits;
      break;
    default:
      fi.selected = p.selected;
      break;
  }
  fi.bin_size = p.bin_size;
  fi.values = p.values;
  fi.scale = p.scale;
  fi.scale2 = p.scale2;
  return fi;
}

}  // namespace

Status InspectFrame(std::span<const uint8_t> bytes, FrameInfo* info, const DecodeOptions& options) {
  wire::Header h;
  wire::Params p;
  ADACOMP_RETURN_IF_ERROR(wire::ParseFrame(bytes, options, &h, &p));
  wire::CountSink check;
  ADACOMP_RETURN_IF_ERROR(wire::WalkPayload(bytes, h, p, check));
  *info = MakeInfo(h, p, check.nonzero);
  return Status::OK();
}

namespace {

// A frame validated completely and ready to be added into a destination:
// sparse frames are decoded into (index, value) entries; dense and onebit
// frames are added straight from their payload; anything else (terngrad, or
// a frame the vector checks did not accept) is decoded by the general walker,
// into `floats` or, on the single-frame path, directly into the destination.
struct Ready {
  enum class Kind { kEntries, kFloatBytes, kSignBits, kFloats, kDone };
  Kind kind = Kind::kDone;
  const wire::Entry* entries = nullptr;  // kEntries, increasing indices
  size_t count = 0;
  const uint8_t* payload = nullptr;  // kFloatBytes, kSignBits
  const float* floats = nullptr;     // kFloats
  float pos = 0.0f, neg = 0.0f;      // kSignBits
  FrameInfo info;
};

// Per-frame scratch, kept per calling thread so that steady-state decoding
// does not allocate.
struct Slot {
  std::vector<wire::Entry> entries;
  std::vector<float> floats;
};

// Validates the frame at bytes[0] for a destination of `n` elements and
// prepares it in *r (its buffers in `slot`). Frames the vector paths do not
// take are walked twice (check, then add): into `direct` when it is given,
// otherwise into slot.floats.
Status Prepare(std::span<const uint8_t> bytes, size_t n, const DecodeOptions& options, Slot& slot,
               float* direct, Ready* r) {
  wire::Header h;
  wire::Params p;
  ADACOMP_RETURN_IF_ERROR(wire::ParseFrame(bytes, options, &h, &p));
  if (n != h.elements) {
    return Status::InvalidArgument("destination holds " + std::to_string(n) +
                                   " elements but the frame carries " + std::to_string(h.elements));
  }
  if (wire::IsSparse(h.codec)) {
    // One validating walk into (index, value) pairs (their number, the
    // selected count, was checked against the payload length).
    slot.entries.resize(p.selected);
    if (!wire::FastSparseEntries(bytes, h, p, slot.entries.data())) {
      wire::EntrySink collect{slot.entries.data(), h.codec, p};
      ADACOMP_RETURN_IF_ERROR(wire::WalkPayload(bytes, h, p, collect));
    }
    r->kind = Ready::Kind::kEntries;
    r->entries = slot.entries.data();
    r->count = slot.entries.size();
    r->info = MakeInfo(h, p, 0);
    return Status::OK();
  }
  // Dense and onebit: a vector validation pass; the walker below only runs
  // to name the error (or for terngrad).
  const uint8_t* payload = bytes.data() + h.payload_offset;
  if (h.codec == Codec::kDense && internal::MaxAbsBitsBytes(payload, n) < 0x7F800000u) {
    r->kind = Ready::Kind::kFloatBytes;
    r->payload = payload;
    r->info = MakeInfo(h, p, 0);
    return Status::OK();
  }
  if (h.codec == Codec::kOneBit && (n % 8 == 0 || (payload[n / 8] >> (n % 8)) == 0)) {
    r->kind = Ready::Kind::kSignBits;
    r->payload = payload;
    r->pos = p.scale;
    r->neg = p.scale2;
    r->info = MakeInfo(h, p, 0);
    return Status::OK();
  }
  wire::CountSink check;
  ADACOMP_RETURN_IF_ERROR(wire::WalkPayload(bytes, h, p, check));
  float* out = direct;
  if (!out) {
    // -0 is the identity of float addition (x + -0 == x for every x, -0
    // included): scratch[i] = -0 + v == v, and dst + scratch[i] then gives
    // exactly dst + v, or dst itself where the frame adds nothing. From +0,
    // a -0 value (terngrad's -s with s = 0) would turn a -0 of dst into +0.
    slot.floats.assign(n, -0.0f);
    out = slot.floats.data();
  }
  wire::AccumulateSink sink{out, h.codec, p};
  const Status st = wire::WalkPayload(bytes, h, p, sink);
  if (!st.ok()) return Status::Internal("second decode pass failed: " + st.message());
  r->kind = direct ? Ready::Kind::kDone : Ready::Kind::kFloats;
  r->floats = slot.floats.data();
  r->info = MakeInfo(h, p, check.nonzero);
  return Status::OK();
}

// Adds the prepared frame's values for elements [b, e) into dst; *cursor is
// the frame's first entry not yet added (kEntries), and moves on. b is a
// multiple of 8 (onebit payloads are added a byte at a time).
void AddRange(const Ready& r, float* dst, size_t b, size_t e, size_t* cursor) {
  switch (r.kind) {
    case Ready::Kind::kEntries: {
      // 128 entries ahead (measured: 32 left 20-40 % of the add's time on
      // misses at 1-8 % density; 128-512 were equal, 64 in between). The
      // indices increase but jump, so dst would otherwise miss the cache on
      // most entries.
      constexpr size_t kAhead = 128;
      const wire::Entry* en = r.entries;
      size_t j = *cursor;
      for (; j < r.count && en[j].index < e; ++j) {
        if (j + kAhead < r.count) __builtin_prefetch(dst + en[j + kAhead].index, 1);
        dst[en[j].index] += en[j].value;
      }
      *cursor = j;
      break;
    }
    case Ready::Kind::kFloatBytes:
      internal::AddFloatsFromBytes(dst + b, r.payload + 4 * b, e - b);
      break;
    case Ready::Kind::kSignBits:
      internal::AddSignBits(dst + b, r.payload + b / 8, e - b, r.pos, r.neg);
      break;
    case Ready::Kind::kFloats:
      internal::AddFloatsFromBytes(dst + b, reinterpret_cast<const uint8_t*>(r.floats + b), e - b);
      break;
    case Ready::Kind::kDone:
      break;
  }
}

// Elements per block of the multi-frame additions: 16 KB of dst, which stays
// in L1 while every frame's values for it are added.
constexpr size_t kBlockElements = 4096;
// Below this many elements x frames, one thread does everything (starting
// threads costs tens of microseconds).
constexpr uint64_t kMinParallelWork = uint64_t{1} << 20;

}  // namespace

Status DecodeAccumulate(std::span<const uint8_t> bytes, std::span<float> dst, FrameInfo* info,
                        const DecodeOptions& options) {
  thread_local Slot slot;
  Ready r;
  ADACOMP_RETURN_IF_ERROR(Prepare(bytes, dst.size(), options, slot, dst.data(), &r));
  size_t cursor = 0;
  AddRange(r, dst.data(), 0, dst.size(), &cursor);
  if (info) *info = r.info;
  return Status::OK();
}

namespace {

// DecodeAccumulateAll, and with `average` DecodeAverageAll.
Status DecodeAll(const char* name, bool average, std::span<const std::span<const uint8_t>> frames,
                 std::span<float> dst, std::span<FrameInfo> infos, const DecodeOptions& options,
                 size_t* failed_frame) {
  const size_t count = frames.size();
  if (!infos.empty() && infos.size() != count) {
    return Status::InvalidArgument(std::string(name) + ": " + std::to_string(infos.size()) +
                                   " infos for " + std::to_string(count) + " frames");
  }
  if (options.threads < 1 || options.threads > kMaxThreads) {
    return Status::InvalidArgument("DecodeOptions::threads is " + std::to_string(options.threads) +
                                   " (must be in 1.." + std::to_string(kMaxThreads) + ")");
  }
  if (count == 0) {
    if (average) return Status::InvalidArgument(std::string(name) + ": no frames to average");
    return Status::OK();
  }
  const size_t n = dst.size();
  int threads = options.threads;
  if (static_cast<uint64_t>(n) * count < kMinParallelWork) threads = 1;

  // 1. Validate and prepare every frame (frames spread over the threads);
  // nothing is written to dst until all of them passed.
  thread_local std::vector<Slot> slots;
  if (slots.size() < count) slots.resize(count);
  std::vector<Ready> ready(count);
  std::vector<Status> status(count);
  const int prep_workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), count));
  Slot* slot_base = slots.data();  // the calling thread's slots, also used by the workers
  internal::RunWorkers(prep_workers, [&](int w) {
    for (size_t j = static_cast<size_t>(w); j < count; j += static_cast<size_t>(prep_workers)) {
      status[j] = Prepare(frames[j], n, options, slot_base[j], nullptr, &ready[j]);
    }
  });
  for (size_t j = 0; j < count; ++j) {
    if (!status[j].ok()) {
      if (failed_frame) {
        *failed_frame = j;
        return status[j];
      }
      return status[j].WithContext("frame " + std::to_string(j) + " of " + std::to_string(count));
    }
  }

  // 2. The additions, block by block; within a block the frames are added
  // in their order, so each element receives exactly the sums that calling
  // DecodeAccumulate frame after frame would give. Threads take contiguous
  // ranges of whole blocks.
  const size_t blocks = (n + kBlockElements - 1) / kBlockElements;
  const int add_workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), blocks));
  float* out = dst.data();
  internal::RunWorkers(std::max(add_workers, 1), [&](int w) {
    const size_t b0 = blocks * static_cast<size_t>(w) / static_cast<size_t>(std::max(add_workers, 1));
    const size_t b1 =
        blocks * static_cast<size_t>(w + 1) / static_cast<size_t>(std::max(add_workers, 1));
    const size_t begin = b0 * kBlockElements, end = std::min(n, b1 * kBlockElements);
    if (begin >= end) return;
    std::vector<size_t> cursor(count, 0);
    for (size_t j = 0; j < count; ++j) {
      const Ready& r = ready[j];
      if (r.kind == Ready::Kind::kEntries && begin > 0) {
        cursor[j] = static_cast<size_t>(
            std::lower_bound(r.entries, r.entries + r.count, begin,
                             [](const wire::Entry& e, size_t v) { return e.index < v; }) -
            r.entries);
      }
    }
    const float divisor = static_cast<float>(count);
    for (size_t b = begin; b < end; b += kBlockElements) {
      const size_t e = std::min(end, b + kBlockElements);
      if (average) std::fill(out + b, out + e, 0.0f);
      for (size_t j = 0; j < count; ++j) AddRange(ready[j], out, b, e, &cursor[j]);
      if (average) internal::DivideFloats(out + b, e - b, divisor);
    }
  });
  for (size_t j = 0; j < infos.size(); ++j) infos[j] = ready[j].info;
  return Status::OK();
}

}  // namespace

Status DecodeAccumulateAll(std::span<const std::span<const uint8_t>> frames, std::span<float> dst,
                           std::span<FrameInfo> infos, const DecodeOptions& options,
                           size_t* failed_frame) {
  return DecodeAll("DecodeAccumulateAll", false, frames, dst, infos, options, failed_frame);
}

Status DecodeAverageAll(std::span<const std::span<const uint8_t>> frames, std::span<float> dst,
                        std::span<FrameInfo> infos, const DecodeOptions& options,
                        size_t* failed_frame) {
  return DecodeAll("DecodeAverageAll", true, frames, dst, infos, options, failed_frame);
}

}  // namespace adacomp
