// The per-tensor choice of ExchangeKind::kAuto (see exchange_choice.h).
#include "exchange/exchange_choice.h"

#include <algorithm>
#include <cstring>

#include "adacomp/slices.h"
#include "comm/ring.h"
#include "wire/frame.h"

namespace adacomp::exchange_internal {

uint64_t PieceHeaderBytes(uint32_t tensor_id, uint64_t elements, int p) {
  wire::Frame f;
  f.codec = Codec::kTopK;
  f.tensor_id = tensor_id;
  f.elements = (elements + static_cast<uint64_t>(p) - 1) / static_cast<uint64_t>(p);
  std::vector<uint8_t> out;
  if (!wire::EncodeFrame(f, &out).ok()) return 0;
  return out.size();
}

ExchangeChooser::ExchangeChooser(const std::vector<ExchangeTensor>& tensors, int p,
                                 ValueMode summed, bool exact)
    : p_(p),
      summed_(summed),
      exact_(exact),
      estimates_(tensors.size()),
      seen_(tensors.size(), false) {
  for (size_t k = 0; k < tensors.size(); ++k) {
    piece_headers_.push_back(PieceHeaderBytes(static_cast<uint32_t>(k), tensors[k].elements, p));
  }
}

bool ExchangeChooser::ReduceScatter(size_t k) const {
  return p_ > 1 && seen_[k] && estimates_[k].reduce_scatter < estimates_[k].allgather;
}

void ExchangeChooser::Observe(size_t k, bool reduce_scatter, uint64_t wire_bytes,
                              std::span<const float> averaged) {
  const double p = p_;
  const double extra = p * (p - 1) * static_cast<double>(piece_headers_[k]);
  const double w = static_cast<double>(wire_bytes);
  const double frames = reduce_scatter ? std::max(0.0, w - extra) : w;
  const double pieces = reduce_scatter ? w : w + extra;
  const double allgather = frames * (p - 1) / p;
  auto by_slices = [&](double slices) {
    return pieces * (p - 1) / (p * p) + slices * (p - 1) / p + 8 * (p - 1);
  };
  estimates_[k].allgather = allgather;
  seen_[k] = true;
  if (!exact_) {
    uint64_t nonzero = 0;
    for (float v : averaged) {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      nonzero += bits != 0;
    }
    const double floor = (summed_ == ValueMode::kFp16 ? 2.0 : 4.0) * static_cast<double>(nonzero);
    if (by_slices(floor) >= allgather) {
      estimates_[k].reduce_scatter = by_slices(floor);
      return;
    }
  }
  estimates_[k].reduce_scatter = by_slices(
      static_cast<double>(SummedSlicesBytes(static_cast<uint32_t>(k), averaged, p_, summed_)));
}

}  // namespace adacomp::exchange_internal
