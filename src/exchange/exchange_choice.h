// src/exchange/exchange_choice.h: how ExchangeKind::kAuto picks, per tensor
// and step, between the all-gather and the reduce-scatter.
//
// The choice is by the bytes one learner would receive for the tensor at
// this P (decode work follows the bytes: both paths decode what they
// receive), estimated by EstimateReceive (adacomp/slices.h) from the
// previous step, whose figures every learner holds alike, so that all of
// them choose the same without a message. The first step, and any tensor
// not yet seen, goes by the all-gather.
// Internal to adacomp_exchange; one object per learner, used by its thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "adacomp/exchange.h"
#include "adacomp/slices.h"

namespace adacomp::exchange_internal {

class ExchangeChooser {
 public:
  // exact: as EstimateReceive's (tests size the slices always).
  ExchangeChooser(const std::vector<ExchangeTensor>& tensors, int p,
                  ValueMode summed = ValueMode::kFp32, bool exact = false);

  // Whether tensor k goes by the reduce-scatter in the next step.
  bool ReduceScatter(size_t k) const;
  // Records a step of tensor k: how it travelled, its bytes summed over the
  // learners (ExchangeResult::wire_bytes: frames or pieces) and its
  // averaged values (the same on every learner).
  void Observe(size_t k, bool reduce_scatter, uint64_t wire_bytes, std::span<const float> averaged);
  // The last step's estimate for tensor k (zeros before the first).
  ReceiveEstimate Estimate(size_t k) const { return estimates_[k]; }

 private:
  int p_;
  ValueMode summed_;
  bool exact_;
  std::vector<ReceiveEstimate> estimates_;
  std::vector<bool> seen_;
};

}  // namespace adacomp::exchange_internal
