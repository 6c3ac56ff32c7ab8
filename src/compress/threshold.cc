// The `threshold` baseline (Strom 2015): +-tau for every |G| >= tau, residue.
#include <cmath>

#include "compress/common.h"
#include "compress/fused.h"
#include "wire/frame.h"

namespace adacomp::internal {
namespace {

class ThresholdCompressor final : public Compressor {
 public:
  ThresholdCompressor(const CodecConfig& c, uint32_t id, uint64_t n)
      : Compressor(c, id, n), tau_(c.tau), residue_(n, 0.0f), g_(n) {}

  Status Compress(std::span<const float> grad, std::vector<uint8_t>* frame,
                  CompressStats* stats) override {
    ADACOMP_RETURN_IF_ERROR(CheckGradient(grad, elements()));
    ADACOMP_RETURN_IF_ERROR(ResidualGradient(residue_, grad, g_));
    const size_t n = g_.size();
    // Branch-free compaction (8 lanes at a time with AVX2) into a scratch
    // sized N + 8, grown once.
    if (scratch_.size() < n + 8) scratch_.resize(n + 8);
    const size_t c = CompactAtLeast(g_.data(), n, tau_, scratch_.data());
    const std::span<const uint32_t> selected(scratch_.data(), c);
    wire::Params p;
    p.selected = selected.size();
    p.scale = tau_;
    uint64_t code_bits = 0;
    p.code = wire::ChooseIndexCode(selected, &code_bits);
    const size_t payload = wire::SparsePayloadBytes(p.selected, code_bits, true, 0);
    const size_t start = frame->size();
    const size_t at = wire::BeginFrame(frame, Codec::kThreshold, tensor_id(), n, p, payload);
    uint8_t* dst = frame->data() + at;
    wire::WriteSparseBits(dst, dst + payload, selected, p.code, true,
                          [&](size_t e) { return g_[selected[e]] < 0.0f; });
    wire::FinishFrame(frame, start);
    residue_.swap(g_);
    // R = G - sign(G) * tau (G != 0 here), branch-free.
    for (uint32_t j : selected) residue_[j] -= std::copysign(tau_, residue_[j]);
    if (stats) {
      *stats = CompressStats{};
      stats->elements = n;
      stats->selected = selected.size();
      stats->frame_bytes = frame->size() - start;
    }
    ++step_;
    return Status::OK();
  }
  std::span<const float> residue() const override { return residue_; }
  std::vector<uint8_t> SaveState() const override {
    return SaveStateBytes(Codec::kThreshold, ValueMode::kTernary, elements(), step_, residue_);
  }
  Status LoadState(std::span<const uint8_t> state) override {
    return LoadStateBytes(state, Codec::kThreshold, ValueMode::kTernary, elements(), &step_,
                          residue_);
  }
  void Snapshot(CompressorSnapshot* s) const override { SnapshotState(step_, residue_, s); }
  Status Restore(const CompressorSnapshot& s) override { return RestoreState(s, &step_, residue_); }

 private:
  float tau_;
  std::vector<float> residue_;
  std::vector<float> g_;
  std::vector<uint32_t> scratch_;  // selected indices (+ slack)
  uint64_t step_ = 0;
};

}  // namespace

std::unique_ptr<Compressor> NewThresholdCompressor(const CodecConfig& c, uint32_t id, uint64_t n) {
  return std::make_unique<ThresholdCompressor>(c, id, n);
}

}  // namespace adacomp::internal
