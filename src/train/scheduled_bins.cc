// The bin-size schedule applied to a learner's exchange (see scheduled_bins.h).
#include "scheduled_bins.h"

#include <cmath>

namespace adacomp::train {

ScheduledBins::ScheduledBins(const BinSchedule& schedule, std::vector<uint32_t> targets)
    : schedule_(schedule), scheduler_(schedule, targets), sizes_(std::move(targets)) {}

Status ScheduledBins::BeforeStep(int64_t step, bool lr_dropped, GradientExchange& exchange) {
  if (!schedule_.enabled()) return Status::OK();
  if (lr_dropped) scheduler_.LrDropped(step);
  for (size_t k = 0; k < exchange.compressors(); ++k) {
    const uint32_t size = scheduler_.BinSize(k, step);
    if (size == 0) continue;
    if (scheduler_.Lightened(k, step)) ++lightened_;
    if (size == sizes_[k]) continue;
    ADACOMP_RETURN_IF_ERROR(exchange.compressor(k).SetBinSize(size));
    sizes_[k] = size;
  }
  return Status::OK();
}

void ScheduledBins::AfterStep(int64_t step, const GradientExchange& exchange,
                              std::span<const float> averaged) {
  if (!schedule_.adaptive()) return;
  norms_.assign(exchange.tensors(), 0.0);
  for (size_t k = 0; k < norms_.size(); ++k) {
    double sum = 0;  // a plain loop in double: the same on every learner
    const float* a = averaged.data() + exchange.offset(k);
    for (size_t j = 0; j < exchange.tensor(k).elements; ++j) {
      sum += static_cast<double>(a[j]) * a[j];
    }
    norms_[k] = std::sqrt(sum);
  }
  scheduler_.Observe(step, norms_);
}

}  // namespace adacomp::train
