// Codec names, config validation, Compressor::Create, and the shared helpers
// of compress/common.h.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "adacomp/codec.h"
#include "compress/common.h"
#include "core/crc32c.h"
#include "core/endian.h"
#include "core/names.h"
#include "core/simd.h"
#include "wire/frame.h"

namespace adacomp {

namespace {

constexpr std::array<std::string_view, 6> kCodecNames = {"dense",     "adacomp", "topk",
                                                         "threshold", "onebit",  "terngrad"};
constexpr std::array<std::string_view, kLayerTypeCount> kLayerTypeNames = {"conv", "fc", "lstm",
                                                                           "other"};
constexpr std::array<std::string_view, 3> kValueModeNames = {"ternary", "fp16", "fp32"};
static_assert(kCodecNames.size() == wire::kMaxCodecId + 1);

}  // namespace

std::string_view CodecName(Codec codec) { return names::Of(codec, kCodecNames, "unknown"); }

Result<Codec> ParseCodec(std::string_view name) {
  return names::Parse<Codec>(name, kCodecNames, "unknown codec ",
                             " (expected dense, adacomp, topk, threshold, onebit or terngrad)");
}

const char* LayerTypeName(LayerType type) {
  // The table's entries are literals, so each view is NUL-terminated.
  return names::Of(type, kLayerTypeNames, "?").data();
}

uint32_t DefaultBinSize(LayerType type) { return type == LayerType::kConv ? 50 : 500; }

Result<LayerType> ParseLayerType(std::string_view name) {
  return names::Parse<LayerType>(name, kLayerTypeNames, "unknown layer type ",
                                 " (expected conv, fc, lstm or other)");
}

std::string_view ValueModeName(ValueMode mode) {
  return names::Of(mode, kValueModeNames, "unknown");
}

Result<ValueMode> ParseValueMode(std::string_view name) {
  return names::Parse<ValueMode>(name, kValueModeNames, "unknown value mode ",
                                 " (expected ternary, fp16 or fp32)");
}

Status CodecConfig::Validate() const {
  if (static_cast<uint8_t>(codec) > wire::kMaxCodecId) {
    return Status::InvalidArgument("codec: unknown id " + std::to_string(int(codec)));
  }
  if (threads < 1 || threads > kMaxThreads) {
    return Status::InvalidArgument("threads must be in 1.." + std::to_string(kMaxThreads) +
                                   ", got " + std::to_string(threads));
  }
  switch (codec) {
    case Codec::kAdaComp:
      if (bin_size == 0) return Status::InvalidArgument("bin_size must be >= 1");
      if (static_cast<uint8_t>(values) > 2) {
        return Status::InvalidArgument("values: unknown value mode " + std::to_string(int(values)));
      }
      break;
    case Codec::kTopK:
      if (!(density > 0.0 && density <= 1.0)) {
        return Status::InvalidArgument("density must be in (0, 1], got " + std::to_string(density));
      }
      break;
    case Codec::kThreshold:
      if (!std::isfinite(tau) || !(tau > 0.0f)) {
        return Status::InvalidArgument("tau must be finite and > 0, got " + std::to_string(tau));
      }
      break;
    default:
      break;
  }
  return Status::OK();
}

void CompressStats::Merge(const CompressStats& o) {
  elements += o.elements;
  selected += o.selected;
  bins += o.bins;
  frame_bytes += o.frame_bytes;
  for (size_t i = 0; i < bin_histogram.size(); ++i) bin_histogram[i] += o.bin_histogram[i];
}

void Compressor::Mark() {
  if (!mark_) mark_ = std::make_unique<CompressorSnapshot>();
  Snapshot(mark_.get());
  marked_ = true;
}

Status Compressor::UndoToMark() {
  if (!marked_) return Status::InvalidArgument("UndoToMark: no mark (call Mark() first)");
  ADACOMP_RETURN_IF_ERROR(Restore(*mark_));
  marked_ = false;
  return Status::OK();
}

void Compressor::KeepSinceMark() { marked_ = false; }

Status Compressor::ClearResidue() {
  CompressorSnapshot s;
  Snapshot(&s);
  if (s.residue.empty()) return Status::OK();
  std::fill(s.residue.begin(), s.residue.end(), 0.0f);
  return Restore(s);
}

Status Compressor::SetBinSize(uint32_t) {
  return Status::InvalidArgument("codec " + std::string(CodecName(config_.codec)) +
                                 " has no bin size");
}

Result<std::unique_ptr<Compressor>> Compressor::Create(const CodecConfig& config,
                                                       uint32_t tensor_id, uint64_t elements) {
  ADACOMP_RETURN_IF_ERROR(config.Validate());
  if (elements > wire::kMaxElements) {
    return Status::InvalidArgument("a tensor may have at most 2^32-1 elements, got " +
                                   std::to_string(elements));
  }
  // Indexed by codec id (Validate checked it).
  using Factory = std::unique_ptr<Compressor> (*)(const CodecConfig&, uint32_t, uint64_t);
  static constexpr std::array<Factory, kCodecNames.size()> kFactories = {
      internal::NewDenseCompressor,  internal::NewAdaCompCompressor,
      internal::NewTopKCompressor,   internal::NewThresholdCompressor,
      internal::NewOneBitCompressor, internal::NewTernGradCompressor};
  return kFactories[static_cast<size_t>(config.codec)](config, tensor_id, elements);
}

double SumOfSquares(std::span<const float> values) {
  constexpr size_t kLanes = 8;
  double acc[kLanes] = {};
  const float* v = values.data();
  const size_t n = values.size();
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) acc[j] += static_cast<double>(v[i + j]) * v[i + j];
  }
  for (size_t j = 0; i < n; ++i, ++j) acc[j] += static_cast<double>(v[i]) * v[i];
  double sum = 0;
  for (double a : acc) sum += a;
  return sum;
}

std::optional<size_t> FindNonFinite(std::span<const float> values) {
  const size_t n = values.size();
  // One vector pass (the largest |v| as bits, AVX2 where the CPU has it)
  // answers the common case; only a bad tensor is searched for the index.
  if (internal::MaxAbsBits(values.data(), n) < 0x7F800000u) return std::nullopt;
  // Blocks of branch-free checks, then a scan of the bad block.
  constexpr size_t kBlock = 256;
  for (size_t start = 0; start < n; start += kBlock) {
    const size_t end = std::min(n, start + kBlock);
    uint32_t bad = 0;
    for (size_t i = start; i < end; ++i) {
      const uint32_t bits = std::bit_cast<uint32_t>(values[i]);
      bad |= static_cast<uint32_t>((bits & 0x7F800000u) == 0x7F800000u);
    }
    if (bad) {
      for (size_t i = start; i < end; ++i) {
        if (!std::isfinite(values[i])) return i;
      }
    }
  }
  return std::nullopt;
}

namespace internal {

Status CheckGradient(std::span<const float> grad, uint64_t elements, float* max_abs) {
  if (grad.size() != elements) {
    return Status::InvalidArgument("gradient has " + std::to_string(grad.size()) +
                                   " elements, the compressor was made for " +
                                   std::to_string(elements));
  }
  const uint32_t bits = MaxAbsBits(grad.data(), grad.size());
  if (bits >= 0x7F800000u) {
    const size_t bad = FindNonFinite(grad).value_or(0);
    return Status::InvalidArgument("gradient element " + std::to_string(bad) + " is " +
                                   (std::isnan(grad[bad]) ? "NaN" : "infinite"));
  }
  if (max_abs) *max_abs = std::bit_cast<float>(bits);
  return Status::OK();
}

float MaxAbs(std::span<const float> v) {
  return std::bit_cast<float>(MaxAbsBits(v.data(), v.size()));
}

Status ResidualGradient(std::span<const float> residue, std::span<const float> grad,
                        std::span<float> g) {
  const size_t n = grad.size();
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const float v = residue[i] + grad[i];
    g[i] = v;
    bad |= static_cast<uint32_t>((std::bit_cast<uint32_t>(v) & 0x7F800000u) == 0x7F800000u);
  }
  if (bad) {
    return Status::InvalidArgument(
        "residue + gradient overflows float32 (gradient values near 3.4e38)");
  }
  return Status::OK();
}

namespace {
constexpr uint8_t kStateMagic[4] = {'A', 'C', 'S', 1};
constexpr size_t kStateHeader = 32;
}  // namespace

std::vector<uint8_t> SaveStateBytes(Codec codec, ValueMode values, uint64_t elements, uint64_t step,
                                    std::span<const float> residue) {
  std::vector<uint8_t> out(kStateHeader + 4 * residue.size() + 4, 0);
  std::memcpy(out.data(), kStateMagic, 4);
  out[4] = static_cast<uint8_t>(codec);
  out[5] = static_cast<uint8_t>(values);
  StoreU64(&out[8], elements);
  StoreU64(&out[16], step);
  StoreU64(&out[24], residue.size());
  for (size_t i = 0; i < residue.size(); ++i) StoreF32(&out[kStateHeader + 4 * i], residue[i]);
  const size_t end = out.size() - 4;
  StoreU32(&out[end], Crc32cExtend(0, out.data(), end));
  return out;
}

Status LoadStateBytes(std::span<const uint8_t> state, Codec codec, ValueMode values,
                      uint64_t elements, uint64_t* step, std::span<float> residue) {
  auto bad = [](const std::string& m) { return Status::InvalidArgument("compressor state: " + m); };
  if (state.size() < kStateHeader + 4)
    return bad("too short (" + std::to_string(state.size()) + " bytes)");
  if (std::memcmp(state.data(), kStateMagic, 4) != 0) return bad("bad magic or version");
  const size_t end = state.size() - 4;
  if (LoadU32(&state[end]) != Crc32cExtend(0, state.data(), end)) return bad("checksum mismatch");
  if (state[4] != static_cast<uint8_t>(codec)) {
    return bad("saved by codec " + std::string(CodecName(static_cast<Codec>(state[4]))) +
               ", loading into " + std::string(CodecName(codec)));
  }
  if (state[5] != static_cast<uint8_t>(values)) return bad("value mode differs");
  if (state[6] != 0 || state[7] != 0) return bad("reserved bytes are not zero");
  const uint64_t n = LoadU64(&state[8]);
  if (n != elements) {
    return bad("saved for " + std::to_string(n) + " elements, this compressor has " +
               std::to_string(elements));
  }
  const uint64_t count = LoadU64(&state[24]);
  if (count != residue.size()) return bad("residue count " + std::to_string(count) + " is wrong");
  if ((state.size() - kStateHeader - 4) / 4 != count || (state.size() - kStateHeader - 4) % 4) {
    return bad("length does not match the residue count");
  }
  for (uint64_t i = 0; i < count; ++i) {
    if (!std::isfinite(LoadF32(&state[kStateHeader + 4 * i]))) {
      return bad("residue element " + std::to_string(i) + " is not finite");
    }
  }
  *step = LoadU64(&state[16]);
  for (uint64_t i = 0; i < count; ++i) residue[i] = LoadF32(&state[kStateHeader + 4 * i]);
  return Status::OK();
}

}  // namespace internal
}  // namespace adacomp
