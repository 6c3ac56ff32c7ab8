// src/exchange/exchange_hooks.h: test hooks of GradientExchange
// (include/adacomp/exchange.h) that are not part of the public API: the
// exchange tests and the trainer's failure hooks (src/train/step_hooks.cc)
// use them to damage a message in transit, and to give `auto` step
// times of a test's choosing. Internal to adacomp; not
// installed. Thread safety: as the exchange's own methods (its learner's
// thread only).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "adacomp/exchange.h"

namespace adacomp::exchange_internal {

// Called with this learner's message just before it is sent, so that a test
// can damage it in transit (also the reduce-scatter's pieces); null clears
// it. Stays set until it is cleared.
void SetSendHook(GradientExchange& exchange, std::function<void(std::vector<uint8_t>&)> hook);

// auto_dense: the seconds this learner reports for a step it ran, computed
// from the step's result instead of measured (a test's link of a chosen
// speed, the same figures on every run); null measures again.
void SetStepClock(GradientExchange& exchange, std::function<double(const ExchangeResult&)> clock);

}  // namespace adacomp::exchange_internal
