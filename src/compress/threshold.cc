// The `threshold` baseline (Strom 2015): +-tau for every |G| >= tau, residue.
#include <cmath>

#include "compress/common.h"
#include "compress/fused.h"
#include "wire/frame.h"

namespace adacomp::internal {
namespace {

class ThresholdCompressor final : public BaselineCompressor<Codec::kThreshold, true> {
 public:
  ThresholdCompressor(const CodecConfig& c, uint32_t id, uint64_t n)
      : BaselineCompressor(c, id, n), tau_(c.tau), g_(n) {}

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
    uint8_t* dst = BeginFrame(frame, p, payload);
    wire::WriteSparseBits(dst, dst + payload, selected, p.code, true,
                          [&](size_t e) { return g_[selected[e]] < 0.0f; });
    residue_.swap(g_);
    // R = G - sign(G) * tau (G != 0 here), branch-free.
    for (uint32_t j : selected) residue_[j] -= std::copysign(tau_, residue_[j]);
    return EndFrame(frame, selected.size(), stats);
  }

 private:
  float tau_;
  std::vector<float> g_;
  std::vector<uint32_t> scratch_;  // selected indices (+ slack)
};

}  // namespace

std::unique_ptr<Compressor> NewThresholdCompressor(const CodecConfig& c, uint32_t id, uint64_t n) {
  return std::make_unique<ThresholdCompressor>(c, id, n);
}

}  // namespace adacomp::internal
