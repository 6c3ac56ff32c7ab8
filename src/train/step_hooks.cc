// The test hooks' actions in a step (see step_hooks.h).
#include "step_hooks.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <limits>
#include <thread>

#include "exchange/exchange_hooks.h"

namespace adacomp::train {

void StepHooks::Note(const char* what, int64_t step) const {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::fprintf(stderr, "adacomp: test hook: learner %d %s at step %lld (t=%.3f)\n", rank_, what,
               static_cast<long long>(step), now);
  std::fflush(stderr);
}

void StepHooks::AtStepStart(int64_t step) const {
  if (rank_ != hooks_.kill_rank || step != hooks_.kill_at_step) return;
  if (hooks_.kill_stops) {
    Note("stops itself (SIGSTOP)", step);
    std::raise(SIGSTOP);
  } else {
    Note("kills itself (SIGKILL)", step);
    std::raise(SIGKILL);
  }
}

double StepHooks::Straggle() const {
  if (rank_ != hooks_.slow_rank) return 0;
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(hooks_.slow_ms));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void StepHooks::Poison(int64_t step, size_t tensor, std::span<float> grad) const {
  for (const auto& inj : hooks_.inject_nan) {
    if (inj.step == step && inj.learner == rank_ && inj.tensor == static_cast<int>(tensor) &&
        !grad.empty()) {
      grad[0] = std::numeric_limits<float>::quiet_NaN();
    }
  }
}

void StepHooks::ArmCorruption(int64_t step, GradientExchange& exchange) const {
  if (rank_ != hooks_.corrupt_rank || step != hooks_.corrupt_at_step) return;
  exchange_internal::SetSendHook(exchange, [this, step](std::vector<uint8_t>& message) {
    if (message.empty()) return;
    Note("flips one byte of its message", step);
    message[message.size() / 2] ^= 0x10;  // a frame damaged in transit
  });
}

}  // namespace adacomp::train
