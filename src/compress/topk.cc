// The `topk` baseline: the k = max(1, ceil(density * N)) largest |G| per
// tensor (ties: the lower index wins), sent as float32, with residue.
#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>

#include "compress/common.h"
#include "core/endian.h"
#include "wire/frame.h"

namespace adacomp::internal {
namespace {

class TopKCompressor final : public BaselineCompressor<Codec::kTopK, true> {
 public:
  TopKCompressor(const CodecConfig& c, uint32_t id, uint64_t n)
      : BaselineCompressor(c, id, n), g_(n), abs_(n) {
    k_ = n == 0
             ? 0
             : std::min<uint64_t>(
                   n, std::max<uint64_t>(
                          1, static_cast<uint64_t>(std::ceil(c.density * static_cast<double>(n)))));
  }

  Status Compress(std::span<const float> grad, std::vector<uint8_t>* frame,
                  CompressStats* stats) override {
    ADACOMP_RETURN_IF_ERROR(CheckGradient(grad, elements()));
    ADACOMP_RETURN_IF_ERROR(ResidualGradient(residue_, grad, g_));
    const size_t n = g_.size();
    const size_t k = static_cast<size_t>(k_);
    const float* g = g_.data();
    // The k-th largest |G| is t: every |G| > t is selected, then the
    // elements with |G| == t in index order until there are k (the order
    // "larger |G| first, then lower index").
    selected_.clear();
    if (k > 0) {
      // |G| as integer bits (exact order for finite floats, faster to select).
      for (size_t j = 0; j < n; ++j) abs_[j] = std::bit_cast<uint32_t>(g[j]) & 0x7FFFFFFFu;
      std::nth_element(abs_.begin(), abs_.begin() + static_cast<std::ptrdiff_t>(k - 1), abs_.end(),
                       std::greater<uint32_t>());
      const uint32_t t = abs_[k - 1];
      size_t above = 0;
      for (size_t j = 0; j < n; ++j) above += (std::bit_cast<uint32_t>(g[j]) & 0x7FFFFFFFu) > t;
      size_t ties = k - above;
      for (size_t j = 0; j < n; ++j) {
        const uint32_t a = std::bit_cast<uint32_t>(g[j]) & 0x7FFFFFFFu;
        if (a > t || (a == t && ties > 0 && ties--)) selected_.push_back(static_cast<uint32_t>(j));
      }
    }
    std::span<const uint32_t> sel(selected_);

    wire::Params p;
    p.selected = k;
    uint64_t code_bits = 0;
    p.code = wire::ChooseIndexCode(sel, &code_bits);
    const size_t payload = wire::SparsePayloadBytes(k, code_bits, false, 4);
    uint8_t* dst = BeginFrame(frame, p, payload);
    for (size_t e = 0; e < k; ++e) StoreF32(dst + 4 * e, g[sel[e]]);
    wire::WriteSparseBits(dst + 4 * k, dst + payload, sel, p.code, false,
                          [](size_t) { return false; });
    residue_.swap(g_);  // R = G, then G - G = 0 where sent
    for (uint32_t j : sel) residue_[j] = 0.0f;
    return EndFrame(frame, k, stats);
  }

 private:
  uint64_t k_ = 0;
  std::vector<float> g_;
  std::vector<uint32_t> abs_;  // scratch: |G| bits
  std::vector<uint32_t> selected_;
};

}  // namespace

std::unique_ptr<Compressor> NewTopKCompressor(const CodecConfig& c, uint32_t id, uint64_t n) {
  return std::make_unique<TopKCompressor>(c, id, n);
}

}  // namespace adacomp::internal
