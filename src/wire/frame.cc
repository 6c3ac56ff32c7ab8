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

// Fast decoder of a sparse payload into entries: 64-bit peeks, one
// count-trailing-zeros per unary code. Returns true only if the payload is
// valid by every rule WalkPayload checks and every entry was written; on
// anything unusual (an error, or a code longer than 57 bits) it returns
// false, and the caller runs WalkPayload, which gives the answer and the
// error message.
bool FastSparseEntries(std::span<const uint8_t> frame, const Header& h, const Params& p,
                       Entry* out) {
  const uint64_t count = p.selected;
  const uint64_t n = h.elements;
  const int vb = ValueBytes(h.codec, p);
  const bool signs = HasSigns(h.codec, p);
  const int sign_bits = signs ? 1 : 0;
  const int k = p.code.k;
  const bool rice = p.code.family == IndexFamily::kRice;
  const uint8_t* payload = frame.data() + h.payload_offset;
  const size_t bits_offset = static_cast<size_t>(count) * vb;  // <= payload (ParseParams)
  const uint8_t* bs = payload + bits_offset;
  const size_t nbytes = h.payload_bytes - bits_offset;
  const uint64_t total_bits = uint64_t{nbytes} * 8;
  const uint64_t low_mask = (uint64_t{1} << k) - 1;
  const uint32_t scale_bits = std::bit_cast<uint32_t>(p.scale);
  uint64_t pos = 0, next = 0;
  for (uint64_t j = 0; j < count; ++j) {
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
    if (w == 0) return false;
    const int z = std::countr_zero(w);
    uint64_t q, len;
    if (rice) {
      q = static_cast<uint64_t>(z);
      len = q + 1;
    } else {
      if (2 * z + 1 > 57) return false;
      const uint64_t v = (uint64_t{1} << z) | ((w >> (z + 1)) & ((uint64_t{1} << z) - 1));
      q = v - 1;
      if (q > (n >> k)) return false;
      len = 2 * static_cast<uint64_t>(z) + 1;
    }
    const uint64_t total = len + static_cast<uint64_t>(k + sign_bits);
    if (total > 57) return false;
    const uint64_t index = next + ((q << k) | ((w >> len) & low_mask));
    if (index >= n) return false;
    pos += total;
    next = index + 1;
    float v;
    if (vb == 4) {
      v = LoadF32(payload + 4 * j);
      if (!std::isfinite(v)) return false;
    } else if (vb == 2) {
      const uint16_t half = LoadU16(payload + 2 * j);
      if (!internal::HalfIsFinite(half)) return false;
      v = internal::HalfToFloat(half);
    } else {
      // +-scale, branch-free (the sign is random; -scale flips the sign bit).
      const uint32_t neg = signs ? static_cast<uint32_t>((w >> (len + k)) & 1) : 0u;
      v = std::bit_cast<float>(scale_bits | (neg << 31));
    }
    out[j] = Entry{static_cast<uint32_t>(index), v};
  }
  // Ends exactly in the last byte, padding bits zero.
  if (pos > total_bits || (pos + 7) / 8 != nbytes) return false;
  if ((pos & 7) && (bs[pos >> 3] >> (pos & 7)) != 0) return false;
  return true;
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
                      IndexCode code, const float* values) {
  WriteSparseBits(begin, end, indices, code, true,
                  [values](size_t j) { return std::signbit(values[j]); });
}
#if defined(__x86_64__) && !defined(ADACOMP_NO_SIMD)
// The same code with BMI2's flag-free variable shifts (shlx/shrx), which
// take about a sixth off the writer's time per entry.
__attribute__((target("bmi,bmi2"))) void WriteSignOfBmi2(uint8_t* begin, uint8_t* end,
                                                         std::span<const uint32_t> indices,
                                                         IndexCode code, const float* values) {
  WriteSparseBits(begin, end, indices, code, true,
                  [values](size_t j) { return std::signbit(values[j]); });
}
#endif
}  // namespace

void WriteSparseBitsSignOf(uint8_t* begin, uint8_t* end, std::span<const uint32_t> indices,
                           IndexCode code, const float* values) {
#if defined(__x86_64__) && !defined(ADACOMP_NO_SIMD)
  static const bool bmi2 = __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
  if (bmi2) return WriteSignOfBmi2(begin, end, indices, code, values);
#endif
  WriteSignOfPlain(begin, end, indices, code, values);
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

Status DecodeAccumulate(std::span<const uint8_t> bytes, std::span<float> dst, FrameInfo* info,
                        const DecodeOptions& options) {
  wire::Header h;
  wire::Params p;
  ADACOMP_RETURN_IF_ERROR(wire::ParseFrame(bytes, options, &h, &p));
  if (dst.size() != h.elements) {
    return Status::InvalidArgument("destination holds " + std::to_string(dst.size()) +
                                   " elements but the frame carries " + std::to_string(h.elements));
  }
  if (wire::IsSparse(h.codec)) {
    // One validating walk into a per-thread scratch of (index, value) pairs
    // (its size, the selected count, was checked against the payload
    // length), then the additions, prefetching ahead: the indices increase
    // but jump, so dst would otherwise miss the cache on most entries.
    thread_local std::vector<wire::Entry> scratch;
    scratch.resize(p.selected);
    if (!wire::FastSparseEntries(bytes, h, p, scratch.data())) {
      wire::EntrySink collect{scratch.data(), h.codec, p};
      ADACOMP_RETURN_IF_ERROR(wire::WalkPayload(bytes, h, p, collect));
    }
    float* out = dst.data();
    const wire::Entry* e = scratch.data();
    const size_t count = scratch.size();
    // 128 entries ahead (measured: 32 left 20-40 % of the add's time on
    // misses at 1-8 % density; 128-512 were equal, 64 in between).
    constexpr size_t kAhead = 128;
    for (size_t j = 0; j < count; ++j) {
      if (j + kAhead < count) __builtin_prefetch(out + e[j + kAhead].index, 1);
      out[e[j].index] += e[j].value;
    }
    if (info) *info = MakeInfo(h, p, 0);
    return Status::OK();
  }
  // Dense and onebit: a vector validation pass, then a vector add (the
  // walker below only runs to name the error).
  const uint8_t* payload = bytes.data() + h.payload_offset;
  const size_t n = static_cast<size_t>(h.elements);
  if (h.codec == Codec::kDense && internal::MaxAbsBitsBytes(payload, n) < 0x7F800000u) {
    internal::AddFloatsFromBytes(dst.data(), payload, n);
    if (info) *info = MakeInfo(h, p, 0);
    return Status::OK();
  }
  if (h.codec == Codec::kOneBit && (n % 8 == 0 || (payload[n / 8] >> (n % 8)) == 0)) {
    internal::AddSignBits(dst.data(), payload, n, p.scale, p.scale2);
    if (info) *info = MakeInfo(h, p, 0);
    return Status::OK();
  }
  wire::CountSink check;
  ADACOMP_RETURN_IF_ERROR(wire::WalkPayload(bytes, h, p, check));
  wire::AccumulateSink sink{dst.data(), h.codec, p};
  const Status st = wire::WalkPayload(bytes, h, p, sink);
  if (!st.ok()) return Status::Internal("second decode pass failed: " + st.message());
  if (info) *info = MakeInfo(h, p, check.nonzero);
  return Status::OK();
}

}  // namespace adacomp
