// Frame format version 1 at the byte level: the header and parameter-block
// writer (BeginFrame / FinishFrame) and the validating parser (ParseFrame).
#include "wire/format.h"

#include <cassert>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "core/crc32c.h"
#include "core/endian.h"

namespace adacomp::wire {
namespace {

using internal::LoadF32;
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

Status CorruptAt(size_t offset, const std::string& what) {
  return Status::Corruption("byte " + std::to_string(offset) + ": " + what);
}

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

}  // namespace adacomp::wire
