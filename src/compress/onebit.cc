// The `onebit` baseline (Seide et al. 2014): one sign bit per element (bit 1
// for G < 0; zero and -0 go to the non-negative side), dequantized to the
// mean of G over that side's elements; residue G - dequantized.
#include <algorithm>

#include "compress/common.h"
#include "compress/kernels.h"
#include "wire/frame.h"

namespace adacomp::internal {
namespace {

class OneBitCompressor final : public Compressor {
 public:
  OneBitCompressor(const CodecConfig& c, uint32_t id, uint64_t n)
      : Compressor(c, id, n), residue_(n, 0.0f), g_(n) {}

  Status Compress(std::span<const float> grad, std::vector<uint8_t>* frame,
                  CompressStats* stats) override {
    ADACOMP_RETURN_IF_ERROR(CheckGradient(grad, elements()));
    ADACOMP_RETURN_IF_ERROR(ResidualGradient(residue_, grad, g_));
    const size_t n = g_.size();
    // Sums in double over four interleaved partial sums (vectorizes; the
    // float mean equals the one of a sequential sum up to double rounding).
    double pos_sum[4] = {0, 0, 0, 0}, neg_sum[4] = {0, 0, 0, 0};
    uint64_t neg_n = 0;
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
      for (int l = 0; l < 4; ++l) {
        const double v = g_[j + l];
        const bool neg = g_[j + l] < 0.0f;
        neg_sum[l] += neg ? v : 0.0;
        pos_sum[l] += neg ? 0.0 : v;
        neg_n += neg;
      }
    }
    for (; j < n; ++j) {
      const double v = g_[j];
      const bool neg = g_[j] < 0.0f;
      neg_sum[0] += neg ? v : 0.0;
      pos_sum[0] += neg ? 0.0 : v;
      neg_n += neg;
    }
    const double pos_total = (pos_sum[0] + pos_sum[1]) + (pos_sum[2] + pos_sum[3]);
    const double neg_total = (neg_sum[0] + neg_sum[1]) + (neg_sum[2] + neg_sum[3]);
    const uint64_t pos_n = n - neg_n;
    wire::Params p;
    p.scale = pos_n ? static_cast<float>(pos_total / static_cast<double>(pos_n)) : 0.0f;
    p.scale2 = neg_n ? static_cast<float>(neg_total / static_cast<double>(neg_n)) : 0.0f;
    const size_t payload = (n + 7) / 8;
    const size_t start = frame->size();
    const size_t at = wire::BeginFrame(frame, Codec::kOneBit, tensor_id(), n, p, payload);
    uint8_t* dst = frame->data() + at;  // zero-filled by BeginFrame
    NegativeBits(g_.data(), n, dst);
    const float pos = p.scale, negm = p.scale2;
    for (size_t e = 0; e < n; ++e) g_[e] -= g_[e] < 0.0f ? negm : pos;
    wire::FinishFrame(frame, start);
    residue_.swap(g_);
    if (stats) {
      *stats = CompressStats{};
      stats->elements = n;
      stats->selected = n;
      stats->frame_bytes = frame->size() - start;
    }
    ++step_;
    return Status::OK();
  }
  std::span<const float> residue() const override { return residue_; }
  std::vector<uint8_t> SaveState() const override {
    return SaveStateBytes(Codec::kOneBit, ValueMode::kTernary, elements(), step_, residue_);
  }
  Status LoadState(std::span<const uint8_t> state) override {
    return LoadStateBytes(state, Codec::kOneBit, ValueMode::kTernary, elements(), &step_,
                          residue_);
  }

 private:
  std::vector<float> residue_;
  std::vector<float> g_;
  uint64_t step_ = 0;
};

}  // namespace

std::unique_ptr<Compressor> NewOneBitCompressor(const CodecConfig& c, uint32_t id, uint64_t n) {
  return std::make_unique<OneBitCompressor>(c, id, n);
}

}  // namespace adacomp::internal
