// The decoded structure of a frame: DecodeFrame, EncodeFrame, Dequantize.
#include "wire/frame.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "core/endian.h"
#include "core/half.h"
#include "wire/payload_walker.h"

namespace adacomp::wire {
namespace {

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

}  // namespace

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
