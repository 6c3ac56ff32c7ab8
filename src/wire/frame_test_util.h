// Frames for the wire tests: every codec configuration, frames of a few
// steps of one tensor, a small hand-made AdaComp frame, and resealing a
// deliberately damaged frame with a valid checksum. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "adacomp/codec.h"
#include "core/crc32c.h"
#include "core/endian.h"
#include "core/test_util.h"
#include "wire/frame.h"

namespace adacomp::wire::testing {

using adacomp::testing::GradientLike;

inline std::vector<CodecConfig> AllConfigs() {
  std::vector<CodecConfig> out;
  for (uint8_t id = 0; id <= kMaxCodecId; ++id) {
    CodecConfig c;
    c.codec = static_cast<Codec>(id);
    c.bin_size = 50;
    c.density = 0.05;
    c.tau = 1e-3f;
    c.seed = 9;
    out.push_back(c);
    if (c.codec == Codec::kAdaComp) {
      c.values = ValueMode::kFp16;
      out.push_back(c);
      c.values = ValueMode::kFp32;
      out.push_back(c);
    }
  }
  return out;
}

inline std::string Name(const CodecConfig& c) {
  std::string name(CodecName(c.codec));
  if (c.codec == Codec::kAdaComp) {
    name += '/';
    name += ValueModeName(c.values);
  }
  return name;
}

// Frames of `steps` successive steps of one tensor.
inline std::vector<std::vector<uint8_t>> MakeFrames(const CodecConfig& cfg, size_t n, int steps) {
  auto comp = std::move(Compressor::Create(cfg, 5, n).value());
  std::vector<std::vector<uint8_t>> frames;
  for (int s = 0; s < steps; ++s) {
    std::vector<uint8_t> f;
    EXPECT_TRUE(comp->Compress(GradientLike(n, 11 * s + n), &f).ok());
    frames.push_back(f);
  }
  return frames;
}

// Replaces the checksum so that a deliberately broken frame passes it.
inline void Reseal(std::vector<uint8_t>* f) {
  const size_t end = f->size() - 4;
  internal::StoreU32(f->data() + end, internal::Crc32cExtend(0, f->data(), end));
}

inline std::vector<uint8_t> Encode(const Frame& f) {
  std::vector<uint8_t> out;
  EXPECT_TRUE(EncodeFrame(f, &out).ok());
  return out;
}

// An AdaComp ternary frame, scale 0.5, sending `indices` with the signs
// `negative` (1 = negative), written with the Rice code of parameter rice_k.
inline Frame AdaCompTernary(uint32_t tensor_id, uint64_t elements, uint32_t bin_size,
                            uint8_t rice_k, std::vector<uint32_t> indices,
                            std::vector<uint8_t> negative) {
  Frame f;
  f.codec = Codec::kAdaComp;
  f.tensor_id = tensor_id;
  f.elements = elements;
  f.params.bin_size = bin_size;
  f.params.scale = 0.5f;
  f.params.selected = indices.size();
  f.params.code = {IndexFamily::kRice, rice_k};
  f.indices = std::move(indices);
  f.negative = std::move(negative);
  return f;
}

inline Frame SmallAdaComp() { return AdaCompTernary(3, 20, 10, 2, {1, 7, 19}, {0, 1, 1}); }

}  // namespace adacomp::wire::testing
