// The reduce-scatter's messages (see include/adacomp/slices.h).
#include <algorithm>
#include <cstring>
#include <string>

#include "adacomp/slices.h"
#include "comm/ring.h"
#include "core/endian.h"
#include "core/half.h"
#include "wire/frame.h"

namespace adacomp {
namespace {

using comm_internal::RingChunk;

// The first byte of an owner's message.
constexpr uint8_t kSlicesOk = 0;
constexpr uint8_t kSlicesFailed = 1;

void PutVarint(uint64_t v, std::vector<uint8_t>* out) {
  uint8_t b[10];
  const int n = internal::StoreVarint(b, v);
  out->insert(out->end(), b, b + n);
}

// Reads a shortest-form varint at *at; false when truncated or not shortest.
bool GetVarint(std::span<const uint8_t> in, size_t* at, uint64_t* v) {
  *v = 0;
  for (int i = 0; i < 10 && *at < in.size(); ++i) {
    const uint8_t b = in[(*at)++];
    if (i == 9 && b > 1) return false;
    *v |= static_cast<uint64_t>(b & 0x7F) << (7 * i);
    if (!(b & 0x80)) return b != 0 || i == 0;
  }
  return false;
}

}  // namespace

SliceBounds SliceOf(uint64_t n, int p, int d) {
  const comm_internal::Chunk c = RingChunk(static_cast<size_t>(n), p, d);
  return {c.begin, c.size};
}

uint64_t SummedSlicesBytes(uint32_t tensor_id, std::span<const float> values, int p,
                           ValueMode mode) {
  uint64_t bytes = 0;
  std::vector<uint8_t> scratch;
  for (int d = 0; d < p; ++d) {
    const comm_internal::Chunk c = RingChunk(values.size(), p, d);
    if (c.size == 0) continue;
    scratch.clear();
    if (!EncodeSummedSlice(tensor_id, values.subspan(c.begin, c.size), &scratch, mode).ok()) {
      bytes += 4 * c.size;
      continue;
    }
    bytes += scratch.size();
  }
  return bytes;
}

namespace {

// Bytes of an empty topk piece of a slice of a tensor of `elements`
// elements cut into p slices: a piece's header and parameter block.
uint64_t PieceHeaderBytes(uint32_t tensor_id, uint64_t elements, int p) {
  wire::Frame f;
  f.codec = Codec::kTopK;
  f.tensor_id = tensor_id;
  f.elements = (elements + static_cast<uint64_t>(p) - 1) / static_cast<uint64_t>(p);
  std::vector<uint8_t> out;
  if (!wire::EncodeFrame(f, &out).ok()) return 0;
  return out.size();
}

}  // namespace

ReceiveEstimate EstimateReceive(uint32_t tensor_id, int p, bool by_slices, uint64_t wire_bytes,
                                std::span<const float> averaged, ValueMode summed, bool exact) {
  const double q = p;
  const double extra =
      q * (q - 1) * static_cast<double>(PieceHeaderBytes(tensor_id, averaged.size(), p));
  const double w = static_cast<double>(wire_bytes);
  const double frames = by_slices ? std::max(0.0, w - extra) : w;
  const double pieces = by_slices ? w : w + extra;
  auto reduce_scatter = [&](double slices) {
    return pieces * (q - 1) / (q * q) + slices * (q - 1) / q + 8 * (q - 1);
  };
  ReceiveEstimate e;
  e.allgather = frames * (q - 1) / q;
  if (!exact) {
    uint64_t nonzero = 0;
    for (float v : averaged) {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      nonzero += bits != 0;
    }
    const double floor = (summed == ValueMode::kFp16 ? 2.0 : 4.0) * static_cast<double>(nonzero);
    e.reduce_scatter = reduce_scatter(floor);
    if (e.reduce_scatter >= e.allgather) return e;
  }
  e.reduce_scatter =
      reduce_scatter(static_cast<double>(SummedSlicesBytes(tensor_id, averaged, p, summed)));
  return e;
}

Status CutFrame(std::span<const uint8_t> frame, int p, std::vector<std::vector<uint8_t>>* pieces) {
  wire::Frame f;
  ADACOMP_RETURN_IF_ERROR(wire::DecodeFrame(frame, DecodeOptions{}, &f));
  const bool sparse = wire::IsSparse(f.codec);
  for (int d = 0; d < p; ++d) {
    const comm_internal::Chunk c = RingChunk(static_cast<size_t>(f.elements), p, d);
    if (c.size == 0) continue;
    wire::Frame g;
    g.codec = f.codec;
    g.tensor_id = f.tensor_id;
    g.elements = c.size;
    g.params = f.params;
    if (sparse) {
      const auto lo = std::lower_bound(f.indices.begin(), f.indices.end(), c.begin);
      const auto hi = std::lower_bound(lo, f.indices.end(), c.begin + c.size);
      const size_t first = static_cast<size_t>(lo - f.indices.begin());
      const size_t count = static_cast<size_t>(hi - lo);
      g.indices.reserve(count);
      for (auto it = lo; it != hi; ++it) g.indices.push_back(*it - static_cast<uint32_t>(c.begin));
      auto part = [&](const auto& all, auto* into) {
        if (!all.empty()) into->assign(all.begin() + first, all.begin() + first + count);
      };
      part(f.negative, &g.negative);
      part(f.values, &g.values);
      part(f.half_values, &g.half_values);
      g.params.selected = count;
      g.params.code = wire::ChooseIndexCode(g.indices);
    } else if (f.codec == Codec::kDense) {
      g.values.assign(f.values.begin() + c.begin, f.values.begin() + c.begin + c.size);
    } else {
      g.symbols.assign(f.symbols.begin() + c.begin, f.symbols.begin() + c.begin + c.size);
    }
    ADACOMP_RETURN_IF_ERROR(wire::EncodeFrame(g, &(*pieces)[d]));
  }
  return Status::OK();
}

Status EncodeSummedSlice(uint32_t tensor_id, std::span<const float> values,
                         std::vector<uint8_t>* out, ValueMode mode) {
  wire::Frame f;
  f.tensor_id = tensor_id;
  f.elements = values.size();
  if (mode == ValueMode::kFp16) {
    // An adacomp fp16-mode frame: every element whose binary16 rounding has
    // non-zero bits, with that value (dense slices cost 2 bytes and about
    // a bit of index code per element).
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t h = internal::FloatToHalf(values[i]);
      if (!internal::HalfIsFinite(h)) {
        return Status::OutOfRange("an averaged value (" + std::to_string(values[i]) +
                                  ") overflows float16");
      }
      if (h == 0) continue;
      f.indices.push_back(static_cast<uint32_t>(i));
      f.half_values.push_back(h);
    }
    f.codec = Codec::kAdaComp;
    f.params.values = ValueMode::kFp16;
    f.params.bin_size = 1;
    f.params.selected = f.indices.size();
    f.params.code = wire::ChooseIndexCode(f.indices);
    return wire::EncodeFrame(f, out);
  }
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    if (bits != 0) f.indices.push_back(static_cast<uint32_t>(i));
  }
  uint64_t code_bits = 0;
  const wire::IndexCode code = wire::ChooseIndexCode(f.indices, &code_bits);
  const size_t sparse_payload = wire::SparsePayloadBytes(f.indices.size(), code_bits, false, 4);
  // The topk parameter block (index code, selected) is a few bytes longer
  // than dense's empty one.
  const size_t sparse_extra = 1 + static_cast<size_t>(internal::VarintLength(f.indices.size()));
  if (sparse_payload + sparse_extra < 4 * values.size()) {
    f.codec = Codec::kTopK;
    f.params.code = code;
    f.params.selected = f.indices.size();
    f.values.reserve(f.indices.size());
    for (uint32_t i : f.indices) f.values.push_back(values[i]);
  } else {
    f.codec = Codec::kDense;
    f.indices.clear();
    f.values.assign(values.begin(), values.end());
  }
  return wire::EncodeFrame(f, out);
}

void StartSlicesMessage(std::vector<uint8_t>* out) { out->push_back(kSlicesOk); }

void PutSliceStats(const SliceStats& stats, std::vector<uint8_t>* out) {
  PutVarint(stats.bytes, out);
  PutVarint(stats.selected, out);
}

void SlicesFailedMessage(const Status& why, std::vector<uint8_t>* out) {
  out->assign({kSlicesFailed, static_cast<uint8_t>(why.code())});
  const std::string& text = why.message();
  out->insert(out->end(), text.begin(), text.end());
}

Status ReadSlicesMessage(std::span<const uint8_t> m, std::span<const MessageTensor> slices,
                         std::span<SliceStats> stats, bool decode, size_t* bad_slice) {
  size_t dummy;
  size_t& bad = bad_slice ? *bad_slice : dummy;
  bad = slices.size();
  if (m.empty()) return Status::Corruption("empty message");
  if (m[0] == kSlicesFailed) {
    if (m.size() < 2 || m[1] == 0 || m[1] > static_cast<uint8_t>(StatusCode::kInternal)) {
      return Status::Corruption("a failure without a valid status code");
    }
    return Status(static_cast<StatusCode>(m[1]),
                  "it could not sum them: " +
                      std::string(reinterpret_cast<const char*>(m.data()) + 2, m.size() - 2));
  }
  if (m[0] != kSlicesOk) {
    return Status::Corruption("unknown message kind " + std::to_string(m[0]));
  }
  size_t at = 1;
  for (size_t i = 0; i < slices.size(); ++i) {
    if (!GetVarint(m, &at, &stats[i].bytes) || !GetVarint(m, &at, &stats[i].selected)) {
      bad = i;
      return Status::Corruption("byte " + std::to_string(at) + ": bad piece statistics");
    }
  }
  if (slices.empty()) {
    if (at != m.size()) {
      return Status::Corruption(std::to_string(m.size() - at) + " bytes after the last slice");
    }
    return Status::OK();
  }
  if (!decode) return Status::OK();
  const std::span<const uint8_t> frames = m.subspan(at);
  MessageError where;
  const Status st = DecodeAverageMessages({&frames, 1}, slices, {}, {}, &where);
  if (!st.ok() && where.tensor < slices.size()) bad = where.tensor;
  return st;
}

}  // namespace adacomp
