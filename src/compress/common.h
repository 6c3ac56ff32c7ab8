// Helpers shared by the compressors (internal to adacomp_core): gradient
// checks, the residual pass, checkpoint state bytes, and the factories of the
// individual codecs that Compressor::Create dispatches to.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/status.h"
#include "wire/format.h"

namespace adacomp::internal {

// AdaComp's scale s is the mean of the bin maxima, summed in double over
// groups of this many consecutive bins (each group in bin order), then over
// the group sums in order (docs/algorithm.md section 2): one fixed order, so
// s does not depend on how many threads compress the tensor.
inline constexpr size_t kScaleGroupBins = 4096;

// InvalidArgument unless grad.size() == elements and every value is finite.
// *max_abs (optional) receives the largest |grad| (one vectorized pass does both).
Status CheckGradient(std::span<const float> grad, uint64_t elements, float* max_abs = nullptr);

// Largest |v| (v finite).
float MaxAbs(std::span<const float> v);

// Largest (bits of v) & 0x7FFFFFFF: the bits of the largest |v|, which is
// >= 0x7F800000 exactly when some v is Inf or NaN. Vectorizes (integer max).
// (internal::MaxAbsBits, core/simd.h)

// g = residue + grad, element by element. InvalidArgument (g partly written,
// nothing else changed) if a sum overflows to infinity.
Status ResidualGradient(std::span<const float> residue, std::span<const float> grad,
                        std::span<float> g);

// Checkpoint bytes: "ACS\x01", codec, value mode, 2 reserved zero bytes,
// elements u64, step u64, residue count u64, residue floats, CRC32C of all
// before it; little-endian.
std::vector<uint8_t> SaveStateBytes(Codec codec, ValueMode values, uint64_t elements, uint64_t step,
                                    std::span<const float> residue);
// Validates state bytes made by SaveStateBytes for this codec and size; on
// success sets *step and copies the residue into `residue` (whose size must be
// the residue count the codec keeps: elements or 0). On error writes nothing.
Status LoadStateBytes(std::span<const uint8_t> state, Codec codec, ValueMode values,
                      uint64_t elements, uint64_t* step, std::span<float> residue);

// Compressor::Snapshot / Restore of a (step, residue) state; Restore
// checks the residue size and changes nothing on error.
inline void SnapshotState(uint64_t step, std::span<const float> residue, CompressorSnapshot* out) {
  out->step = step;
  out->residue.assign(residue.begin(), residue.end());
}
inline Status RestoreState(const CompressorSnapshot& s, uint64_t* step, std::span<float> residue) {
  if (s.residue.size() != residue.size()) {
    return Status::InvalidArgument("Restore: the snapshot holds " +
                                   std::to_string(s.residue.size()) + " residue values, this " +
                                   "compressor keeps " + std::to_string(residue.size()));
  }
  std::copy(s.residue.begin(), s.residue.end(), residue.begin());
  *step = s.step;
  return Status::OK();
}

// The state and checkpoint plumbing of the baseline codecs (dense, topk,
// threshold, onebit, terngrad): a step count and, for the codecs that keep
// one, a residue of `elements` floats (zero at start; empty for the others).
// A subclass frames its step between BeginFrame and EndFrame.
template <Codec kCodec, bool kKeepsResidue>
class BaselineCompressor : public Compressor {
 public:
  BaselineCompressor(const CodecConfig& c, uint32_t id, uint64_t n)
      : Compressor(c, id, n), residue_(kKeepsResidue ? n : 0, 0.0f) {}

  std::span<const float> residue() const override { return residue_; }
  std::vector<uint8_t> SaveState() const override {
    return SaveStateBytes(kCodec, ValueMode::kTernary, elements(), step_, residue_);
  }
  Status LoadState(std::span<const uint8_t> state) override {
    return LoadStateBytes(state, kCodec, ValueMode::kTernary, elements(), &step_, residue_);
  }
  void Snapshot(CompressorSnapshot* s) const override { SnapshotState(step_, residue_, s); }
  Status Restore(const CompressorSnapshot& s) override { return RestoreState(s, &step_, residue_); }

 protected:
  // Appends this step's frame header (codec parameters `p`) and `payload`
  // zero bytes to *frame; returns where the payload starts.
  uint8_t* BeginFrame(std::vector<uint8_t>* frame, const wire::Params& p, size_t payload) {
    start_ = frame->size();
    const size_t at = wire::BeginFrame(frame, kCodec, tensor_id(), elements(), p, payload);
    return frame->data() + at;
  }
  // Seals the frame that BeginFrame began, counts the step, and fills
  // *stats (when given) for `selected` elements sent.
  Status EndFrame(std::vector<uint8_t>* frame, uint64_t selected, CompressStats* stats) {
    wire::FinishFrame(frame, start_);
    if (stats) {
      *stats = CompressStats{};
      stats->elements = elements();
      stats->selected = selected;
      stats->frame_bytes = frame->size() - start_;
    }
    ++step_;
    return Status::OK();
  }

  uint64_t step() const { return step_; }

  std::vector<float> residue_;

 private:
  uint64_t step_ = 0;
  size_t start_ = 0;  // where this step's frame begins in the caller's buffer
};

// Fills the 17-entry histogram with one bin that selected `count` elements.
inline void AddToHistogram(std::array<uint64_t, 17>* hist, uint64_t count) {
  (*hist)[count < 16 ? count : 16] += 1;
}

std::unique_ptr<Compressor> NewDenseCompressor(const CodecConfig& c, uint32_t id, uint64_t n);
std::unique_ptr<Compressor> NewAdaCompCompressor(const CodecConfig& c, uint32_t id, uint64_t n);
std::unique_ptr<Compressor> NewTopKCompressor(const CodecConfig& c, uint32_t id, uint64_t n);
std::unique_ptr<Compressor> NewThresholdCompressor(const CodecConfig& c, uint32_t id, uint64_t n);
std::unique_ptr<Compressor> NewOneBitCompressor(const CodecConfig& c, uint32_t id, uint64_t n);
std::unique_ptr<Compressor> NewTernGradCompressor(const CodecConfig& c, uint32_t id, uint64_t n);

}  // namespace adacomp::internal
