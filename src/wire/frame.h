// The decoded structure of one frame (Frame) with DecodeFrame / EncodeFrame,
// so tests, tools and fuzzers can check encode -> decode -> re-encode byte
// identity. Internal to adacomp_core. The frame layout itself is in
// wire/format.h (included here, with wire/index_code.h, so that one include
// gives the whole wire vocabulary).
//
// Allocation is bounded by the frame's size; every reader treats its bytes
// as untrusted. Thread safety: all functions are reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/status.h"
#include "wire/format.h"
#include "wire/index_code.h"

namespace adacomp::wire {

// The decoded structure of a frame, for tests, tools and fuzzers.
struct Frame {
  uint8_t version = kVersion;
  Codec codec = Codec::kDense;
  uint32_t tensor_id = 0;
  uint64_t elements = 0;
  Params params;
  std::vector<uint32_t> indices;      // sparse codecs: selected indices, increasing
  std::vector<uint8_t> negative;      // adacomp ternary, threshold: 1 = negative, per index
  std::vector<float> values;          // dense: N values; topk, adacomp fp32: one per index
  std::vector<uint16_t> half_values;  // adacomp fp16: one per index (raw IEEE half)
  std::vector<uint8_t> symbols;       // onebit: N bits (1 = negative); terngrad: N trits
                                      // (0 -> 0, 1 -> +s, 2 -> -s)
};

// Fully validates and decodes the frame at bytes[0]. *frame_bytes (optional)
// receives the frame's length. Allocation is bounded by the frame's size.
Status DecodeFrame(std::span<const uint8_t> bytes, const DecodeOptions& options, Frame* frame,
                   size_t* frame_bytes = nullptr);

// Appends the canonical encoding of `frame` to *out. InvalidArgument (and
// *out unchanged) if the structure is inconsistent (sizes, ranges, order).
Status EncodeFrame(const Frame& frame, std::vector<uint8_t>* out);

// The dequantized value one frame carries per element (tools, tests):
// writes frame.elements values (zeros where nothing was sent) into dst.
Status Dequantize(const Frame& frame, std::span<float> dst);

}  // namespace adacomp::wire
