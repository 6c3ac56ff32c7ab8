// AdaComp (SPEC section 2): adaptive residual gradient compression.
//
// Two streaming passes per step, both vectorized:
//   pass A (read only): gmax_i = max |R + dW| per bin; it also notices any
//           G = R + dW that is not finite (a NaN/Inf in dW, or an overflow),
//           so a bad gradient is rejected before anything changes;
//   scale s = mean of gmax_i over all bins;
//   pass B, bin by bin: G = R + dW, H = G + dW, select iff |H| >= gmax_i and
//           G != 0, R = G - Gq (branch-free, one selection bit and one sign
//           bit per element, compress/kernels.h); then the bin's bit words,
//           while the bin is still in L1, give the selected indices and signs
//           (and values, fp modes).
// The frame is written from those arrays. No allocation once the buffers have
// grown, no random access into R. The results are bit-identical to the plain
// definition (the scalar reference in adacomp_test.cc checks it).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "compress/common.h"
#include "compress/kernels.h"
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
        sel_words_((std::min<uint64_t>(n, c.bin_size) + 63) / 64, 0),
        neg_words_(sel_words_.size(), 0) {}

  Status Compress(std::span<const float> grad, std::vector<uint8_t>* frame,
                  CompressStats* stats) override {
    if (grad.size() != elements()) return CheckGradient(grad, elements());
    const size_t n = residue_.size();
    const size_t bins = gmax_.size();
    float* r = residue_.data();
    const float* g = grad.data();

    // Pass A.
    double gmax_sum = 0.0;
    bool bad = false;
    for (size_t b = 0; b < bins; ++b) {
      const size_t begin = b * bin_size_;
      const size_t len = std::min(n, begin + bin_size_) - begin;
      const float m = MaxAbsSumChecked(r + begin, g + begin, len, &bad);
      gmax_[b] = m;
      gmax_sum += m;
    }
    if (bad) return ExplainBadGradient(grad);
    const float scale = bins ? static_cast<float>(gmax_sum / static_cast<double>(bins)) : 0.0f;

    // Pass B.
    const ValueMode mode = config().values;
    selected_.clear();
    negative_.clear();
    values_.clear();
    CompressStats st;
    st.elements = n;
    st.bins = bins;
    for (size_t b = 0; b < bins; ++b) {
      const size_t begin = b * bin_size_;
      const size_t len = std::min(n, begin + bin_size_) - begin;
      const size_t before = selected_.size();
      if (mode == ValueMode::kTernary) {
        SelectTernary(r + begin, g + begin, len, gmax_[b], scale, sel_words_.data(),
                      neg_words_.data());
      } else {
        SelectKeep(r + begin, g + begin, len, gmax_[b], sel_words_.data());
      }
      Collect(begin, len, r);
      AddToHistogram(&st.bin_histogram, selected_.size() - before);
    }

    // Frame.
    const size_t count = selected_.size();
    wire::Params p;
    p.values = mode;
    p.bin_size = static_cast<uint32_t>(bin_size_);
    p.selected = count;
    p.code = wire::ChooseIndexCode(selected_);
    p.scale = mode == ValueMode::kTernary ? scale : 0.0f;
    const bool signs = mode == ValueMode::kTernary;
    const int vb = mode == ValueMode::kFp16 ? 2 : mode == ValueMode::kFp32 ? 4 : 0;
    const uint64_t code_bits = wire::IndexCodeBits(selected_, p.code);
    const size_t payload = wire::SparsePayloadBytes(count, code_bits, signs, vb);
    const size_t start = frame->size();
    const size_t at = wire::BeginFrame(frame, Codec::kAdaComp, tensor_id(), n, p, payload);
    uint8_t* dst = frame->data() + at;
    if (vb == 4) {
      for (size_t e = 0; e < count; ++e) StoreF32(dst + 4 * e, values_[e]);
    } else if (vb == 2) {
      for (size_t e = 0; e < count; ++e) StoreU16(dst + 2 * e, FloatToHalf(values_[e]));
    }
    wire::WriteSparseBits(dst + count * vb, dst + payload, selected_, p.code, signs,
                          [&](size_t e) { return negative_[e] != 0; });
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
    return LoadStateBytes(state, Codec::kAdaComp, config().values, elements(), &step_, residue_);
  }

 private:
  // Appends the bin's selected indices (and signs, or values) from the
  // selection words; fp modes also subtract the sent value from r (the bin
  // is still in L1).
  void Collect(size_t begin, size_t len, float* r) {
    const ValueMode mode = config().values;
    const size_t words = (len + 63) / 64;
    for (size_t w = 0; w < words; ++w) {
      uint64_t word = sel_words_[w];
      const uint64_t negw = neg_words_[w];
      while (word) {
        const int t = std::countr_zero(word);
        const size_t j = begin + 64 * w + static_cast<size_t>(t);
        selected_.push_back(static_cast<uint32_t>(j));
        if (mode == ValueMode::kTernary) {
          negative_.push_back(static_cast<uint8_t>((negw >> t) & 1));
        } else {
          const float gj = r[j];
          float q = gj;
          if (mode == ValueMode::kFp16) {
            q = HalfToFloat(FloatToHalf(std::clamp(gj, -kHalfMax, kHalfMax)));
          }
          values_.push_back(q);
          r[j] = gj - q;
        }
        word &= word - 1;
      }
    }
  }

  // Finds why pass A saw a non-finite G: a NaN/Inf in dW, or an overflow.
  Status ExplainBadGradient(std::span<const float> grad) const {
    ADACOMP_RETURN_IF_ERROR(CheckGradient(grad, elements()));
    for (size_t j = 0; j < grad.size(); ++j) {
      if (!std::isfinite(residue_[j] + grad[j])) {
        return Status::InvalidArgument("gradient element " + std::to_string(j) + " (" +
                                       std::to_string(grad[j]) +
                                       ") makes residue + gradient overflow float32");
      }
    }
    return Status::Internal("pass A saw a non-finite value that is not there");
  }

  size_t bin_size_;
  std::vector<float> residue_;
  std::vector<float> gmax_;
  std::vector<uint64_t> sel_words_;  // one bin's selection bits
  std::vector<uint64_t> neg_words_;  // one bin's sign bits (ternary)
  std::vector<uint32_t> selected_;  // this step's selected indices
  std::vector<uint8_t> negative_;   // ternary: their signs
  std::vector<float> values_;       // fp modes: their sent values (as float)
  uint64_t step_ = 0;
};

}  // namespace

std::unique_ptr<Compressor> NewAdaCompCompressor(const CodecConfig& c, uint32_t id, uint64_t n) {
  return std::make_unique<AdaCompCompressor>(c, id, n);
}

}  // namespace adacomp::internal
