// The per-tensor choice of ExchangeKind::kAuto (see exchange_choice.h).
#include "exchange/exchange_choice.h"

namespace adacomp::exchange_internal {

ExchangeChooser::ExchangeChooser(const std::vector<ExchangeTensor>& tensors, int p,
                                 ValueMode summed, bool exact)
    : p_(p),
      summed_(summed),
      exact_(exact),
      estimates_(tensors.size()),
      seen_(tensors.size(), false) {}

bool ExchangeChooser::ReduceScatter(size_t k) const {
  return p_ > 1 && seen_[k] && estimates_[k].reduce_scatter < estimates_[k].allgather;
}

void ExchangeChooser::Observe(size_t k, bool reduce_scatter, uint64_t wire_bytes,
                              std::span<const float> averaged) {
  estimates_[k] = EstimateReceive(static_cast<uint32_t>(k), p_, reduce_scatter, wire_bytes,
                                  averaged, summed_, exact_);
  seen_[k] = true;
}

}  // namespace adacomp::exchange_internal
