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

class TernGradCompressor final : public BaselineCompressor<Codec::kTernGrad, false> {
 public:
  using BaselineCompressor::BaselineCompressor;

  Status Compress(std::span<const float> grad, std::vector<uint8_t>* frame,
                  CompressStats* stats) override {
    float s = 0.0f;  // max |g|, from the same pass that checks g
    ADACOMP_RETURN_IF_ERROR(CheckGradient(grad, elements(), &s));
    const size_t n = grad.size();
    wire::Params p;
    p.scale = s;
    const size_t payload = (n + 4) / 5;
    uint8_t* dst = BeginFrame(frame, p, payload);
    const uint64_t key = TernGradStepKey(config().seed, tensor_id(), step());
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
    return EndFrame(frame, sent, stats);
  }
};

}  // namespace

std::unique_ptr<Compressor> NewTernGradCompressor(const CodecConfig& c, uint32_t id, uint64_t n) {
  return std::make_unique<TernGradCompressor>(c, id, n);
}

}  // namespace adacomp::internal
