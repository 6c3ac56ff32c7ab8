// The `terngrad` baseline (Wen et al. 2017): each element becomes
// sign(g) * s with probability |g| / s (s = max |g|), else 0; unbiased, no
// residue. The random draw for element j at step t is a pure function of
// (seed, tensor id, t, j) (a counter-based generator), so the same seed gives
// the same frames and the state is only the step counter.
#include <cmath>

#include "compress/common.h"
#include "compress/terngrad_rng.h"
#include "wire/frame.h"

namespace adacomp::internal {
namespace {

class TernGradCompressor final : public Compressor {
 public:
  TernGradCompressor(const CodecConfig& c, uint32_t id, uint64_t n) : Compressor(c, id, n) {}

  Status Compress(std::span<const float> grad, std::vector<uint8_t>* frame,
                  CompressStats* stats) override {
    ADACOMP_RETURN_IF_ERROR(CheckGradient(grad, elements()));
    const size_t n = grad.size();
    const float s = MaxAbs(grad);
    wire::Params p;
    p.scale = s;
    const size_t payload = (n + 4) / 5;
    const size_t start = frame->size();
    const size_t at = wire::BeginFrame(frame, Codec::kTernGrad, tensor_id(), n, p, payload);
    uint8_t* dst = frame->data() + at;
    const uint64_t key = TernGradStepKey(config().seed, tensor_id(), step_);
    uint64_t sent = 0;
    for (size_t b = 0; b < payload; ++b) {
      const size_t lo = 5 * b;
      const size_t hi = std::min(n, lo + 5);
      unsigned v = 0;
      for (size_t j = hi; j-- > lo;) {
        unsigned t = 0;
        if (grad[j] != 0.0f) {
          const double prob = std::fabs(static_cast<double>(grad[j])) / static_cast<double>(s);
          if (TernGradUniform(key, j) < prob) t = grad[j] < 0.0f ? 2 : 1;
        }
        sent += t != 0;
        v = v * 3 + t;
      }
      dst[b] = static_cast<uint8_t>(v);
    }
    wire::FinishFrame(frame, start);
    ++step_;
    if (stats) {
      *stats = CompressStats{};
      stats->elements = n;
      stats->selected = sent;
      stats->frame_bytes = frame->size() - start;
    }
    return Status::OK();
  }
  std::span<const float> residue() const override { return {}; }
  std::vector<uint8_t> SaveState() const override {
    return SaveStateBytes(Codec::kTernGrad, ValueMode::kTernary, elements(), step_, {});
  }
  Status LoadState(std::span<const uint8_t> state) override {
    return LoadStateBytes(state, Codec::kTernGrad, ValueMode::kTernary, elements(), &step_, {});
  }
  void Snapshot(CompressorSnapshot* s) const override { SnapshotState(step_, {}, s); }
  Status Restore(const CompressorSnapshot& s) override { return RestoreState(s, &step_, {}); }

 private:
  uint64_t step_ = 0;
};

}  // namespace

std::unique_ptr<Compressor> NewTernGradCompressor(const CodecConfig& c, uint32_t id, uint64_t n) {
  return std::make_unique<TernGradCompressor>(c, id, n);
}

}  // namespace adacomp::internal
