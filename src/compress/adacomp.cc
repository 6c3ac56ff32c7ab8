// AdaComp (SPEC section 2): adaptive residual gradient compression.
//
// Per step, bin by bin (a bin of L_T floats stays in L1 between the two loops):
//   loop 1: gmax = max |R + dW| over the bin;
//   loop 2: G = R + dW, H = G + dW, select iff |H| >= gmax and G != 0,
//           R = G, selected indices appended branch-free to a bin buffer.
// Then scale = mean of gmax over all bins, and for each selected element the
// frame entry is written and R = G - Gq. No allocation once the buffers grew.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "compress/common.h"
#include "core/endian.h"
#include "core/half.h"
#include "wire/frame.h"

namespace adacomp::internal {
namespace {

class AdaCompCompressor final : public Compressor {
 public:
  AdaCompCompressor(const CodecConfig& c, uint32_t id, uint64_t n)
      : Compressor(c, id, n),
        bin_size_(c.bin_size),
        residue_(n, 0.0f),
        gmax_(n == 0 ? 0 : (n - 1) / c.bin_size + 1),
        bin_selected_(std::min<uint64_t>(n, c.bin_size)) {}

  Status Compress(std::span<const float> grad, std::vector<uint8_t>* frame,
                  CompressStats* stats) override {
    ADACOMP_RETURN_IF_ERROR(CheckGradient(grad, elements()));
    // |G| <= |R| + |dW| <= residue_bound_ + max|dW|; reject before any change
    // if G could overflow to infinity.
    const float grad_max = MaxAbs(grad);
    if (static_cast<double>(grad_max) + static_cast<double>(residue_bound_) >
        static_cast<double>(FLT_MAX)) {
      return Status::InvalidArgument(
          "gradient too large: residue + gradient could overflow float32 (max |gradient| " +
          std::to_string(grad_max) + ")");
    }
    const size_t n = residue_.size();
    const size_t bins = gmax_.size();
    float* r = residue_.data();
    const float* g = grad.data();
    selected_.clear();
    CompressStats st;
    st.elements = n;
    st.bins = bins;
    double gmax_sum = 0.0;
    float gmax_all = 0.0f;
    for (size_t b = 0; b < bins; ++b) {
      const size_t begin = b * bin_size_;
      const size_t end = std::min(n, begin + bin_size_);
      float m = 0.0f;
      for (size_t j = begin; j < end; ++j) m = std::max(m, std::fabs(r[j] + g[j]));
      gmax_[b] = m;
      gmax_sum += m;
      gmax_all = std::max(gmax_all, m);
      uint32_t* out = bin_selected_.data();
      size_t c = 0;
      for (size_t j = begin; j < end; ++j) {
        const float gj = r[j] + g[j];
        const float hj = gj + g[j];
        r[j] = gj;
        out[c] = static_cast<uint32_t>(j);
        c += static_cast<size_t>((std::fabs(hj) >= m) & (gj != 0.0f));
      }
      selected_.insert(selected_.end(), out, out + c);
      AddToHistogram(&st.bin_histogram, c);
    }
    const float scale = bins ? static_cast<float>(gmax_sum / static_cast<double>(bins)) : 0.0f;
    residue_bound_ = gmax_all;

    // Frame.
    const ValueMode mode = config().values;
    wire::Params p;
    p.values = mode;
    p.bin_size = bin_size_;
    p.selected = selected_.size();
    p.code = wire::ChooseIndexCode(selected_);
    p.scale = mode == ValueMode::kTernary ? scale : 0.0f;
    const bool signs = mode == ValueMode::kTernary;
    const int vb = mode == ValueMode::kFp16 ? 2 : mode == ValueMode::kFp32 ? 4 : 0;
    const uint64_t rice_bits = wire::IndexCodeBits(selected_, p.code);
    const size_t payload = wire::SparsePayloadBytes(selected_.size(), rice_bits, signs, vb);
    const size_t start = frame->size();
    const size_t at = wire::BeginFrame(frame, Codec::kAdaComp, tensor_id(), n, p, payload);
    uint8_t* dst = frame->data() + at;
    const size_t count = selected_.size();
    // Residue currently holds G: signs come from it.
    wire::WriteSparseBits(dst + count * vb, dst + payload, selected_, p.code, signs,
                          [&](size_t j) { return r[selected_[j]] < 0.0f; });
    switch (mode) {
      case ValueMode::kTernary:
        for (uint32_t j : selected_) r[j] = r[j] < 0.0f ? r[j] + scale : r[j] - scale;
        break;
      case ValueMode::kFp16:
        for (size_t e = 0; e < count; ++e) {
          const float gj = r[selected_[e]];
          const uint16_t h = FloatToHalf(std::clamp(gj, -kHalfMax, kHalfMax));
          StoreU16(dst + 2 * e, h);
          r[selected_[e]] = gj - HalfToFloat(h);
        }
        break;
      case ValueMode::kFp32:
        for (size_t e = 0; e < count; ++e) {
          StoreF32(dst + 4 * e, r[selected_[e]]);
          r[selected_[e]] = 0.0f;
        }
        break;
    }
    wire::FinishFrame(frame, start);
    ++step_;
    st.selected = count;
    st.frame_bytes = frame->size() - start;
    if (stats) *stats = st;
    return Status::OK();
  }

  std::span<const float> residue() const override { return residue_; }

  std::vector<uint8_t> SaveState() const override {
    return SaveStateBytes(Codec::kAdaComp, config().values, elements(), step_, residue_);
  }
  Status LoadState(std::span<const uint8_t> state) override {
    ADACOMP_RETURN_IF_ERROR(
        LoadStateBytes(state, Codec::kAdaComp, config().values, elements(), &step_, residue_));
    residue_bound_ = MaxAbs(residue_);
    return Status::OK();
  }

 private:
  size_t bin_size_;
  std::vector<float> residue_;
  std::vector<float> gmax_;
  std::vector<uint32_t> bin_selected_;  // one bin's selected indices
  std::vector<uint32_t> selected_;      // this step's selected indices
  float residue_bound_ = 0.0f;          // >= max |residue|
  uint64_t step_ = 0;
};

}  // namespace

std::unique_ptr<Compressor> NewAdaCompCompressor(const CodecConfig& c, uint32_t id, uint64_t n) {
  return std::make_unique<AdaCompCompressor>(c, id, n);
}

}  // namespace adacomp::internal
