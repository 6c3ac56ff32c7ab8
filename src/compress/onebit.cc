// The `onebit` baseline (Seide et al. 2014): one sign bit per element (bit 1
// for G < 0; zero and -0 go to the non-negative side), dequantized to the
// mean of G over that side's elements; residue G - dequantized.
#include <algorithm>

#include "compress/common.h"
#include "compress/fused.h"
#include "wire/frame.h"

namespace adacomp::internal {
namespace {

class OneBitCompressor final : public BaselineCompressor<Codec::kOneBit, true> {
 public:
  using BaselineCompressor::BaselineCompressor;

  Status Compress(std::span<const float> grad, std::vector<uint8_t>* frame,
                  CompressStats* stats) override {
    if (grad.size() != elements()) return CheckGradient(grad, elements());
    const size_t n = residue_.size();
    float* r = residue_.data();
    const float* g = grad.data();
    // Pass 1 (read only): the sums of G = R + dW by side, in double over four
    // interleaved partial sums (lane j % 4, the float mean equals the one of
    // a sequential sum up to double rounding), and a check that every G is
    // finite, so a bad gradient is rejected before anything changes.
    double pos_sum[4] = {0, 0, 0, 0}, neg_sum[4] = {0, 0, 0, 0};
    uint64_t neg_n = 0;
    if (!OneBitSums(r, g, n, pos_sum, neg_sum, &neg_n)) {
      ADACOMP_RETURN_IF_ERROR(CheckGradient(grad, elements()));
      return Status::InvalidArgument(
          "residue + gradient overflows float32 (gradient values near 3.4e38)");
    }
    const double pos_total = (pos_sum[0] + pos_sum[1]) + (pos_sum[2] + pos_sum[3]);
    const double neg_total = (neg_sum[0] + neg_sum[1]) + (neg_sum[2] + neg_sum[3]);
    const uint64_t pos_n = n - neg_n;
    wire::Params p;
    p.scale = pos_n ? static_cast<float>(pos_total / static_cast<double>(pos_n)) : 0.0f;
    p.scale2 = neg_n ? static_cast<float>(neg_total / static_cast<double>(neg_n)) : 0.0f;
    const size_t payload = (n + 7) / 8;
    uint8_t* dst = BeginFrame(frame, p, payload);  // zero-filled by BeginFrame
    // Pass 2: the sign bits and R = G - (dequantized G), fused.
    OneBitApply(r, g, n, p.scale, p.scale2, dst);
    return EndFrame(frame, n, stats);
  }
};

}  // namespace

std::unique_ptr<Compressor> NewOneBitCompressor(const CodecConfig& c, uint32_t id, uint64_t n) {
  return std::make_unique<OneBitCompressor>(c, id, n);
}

}  // namespace adacomp::internal
