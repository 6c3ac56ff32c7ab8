// The compression schedule (include/adacomp/schedule.h): the ramp's stages,
// the adaptive windows, and their state in checkpoints.
#include "adacomp/schedule.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>

#include "core/endian.h"

namespace adacomp {

Status BinSchedule::Validate() const {
  if (ramp_steps < 0) return Status::InvalidArgument("ramp_steps must be >= 0");
  if (ramp_start < 1) return Status::InvalidArgument("ramp_start must be >= 1");
  if (ramp_stages < 1) return Status::InvalidArgument("ramp_stages must be >= 1");
  if (ramp_steps > 0 && ramp_stages > ramp_steps) {
    return Status::InvalidArgument("ramp_stages (" + std::to_string(ramp_stages) +
                                   ") must not exceed ramp_steps (" + std::to_string(ramp_steps) +
                                   ")");
  }
  if (!(adapt_threshold >= 0) || !std::isfinite(adapt_threshold)) {
    return Status::InvalidArgument("adapt_threshold must be finite and >= 0");
  }
  if (adapt_window < 1) return Status::InvalidArgument("adapt_window must be >= 1");
  if (adapt_hold < 1) return Status::InvalidArgument("adapt_hold must be >= 1");
  return Status::OK();
}

std::string BinSchedule::ToString() const {
  if (!enabled()) return "fixed";
  std::string s;
  char buf[160];
  if (ramp()) {
    std::snprintf(buf, sizeof(buf), "ramp %u -> L_T over %lld steps in %d stages", ramp_start,
                  static_cast<long long>(ramp_steps), ramp_stages);
    s += buf;
  }
  if (adaptive()) {
    std::snprintf(buf, sizeof(buf), "%sadaptive %g every %lld steps, %lld steps at %u",
                  s.empty() ? "" : "; ", adapt_threshold, static_cast<long long>(adapt_window),
                  static_cast<long long>(adapt_hold), light_bin_size());
    s += buf;
  }
  return s;
}

uint32_t RampBinSize(const BinSchedule& schedule, uint32_t target, int64_t step) {
  if (!schedule.ramp() || step >= schedule.ramp_steps || schedule.ramp_start >= target) {
    return target;
  }
  const int64_t stage = std::max<int64_t>(0, step) * schedule.ramp_stages / schedule.ramp_steps;
  const double ratio = static_cast<double>(target) / static_cast<double>(schedule.ramp_start);
  const double size = static_cast<double>(schedule.ramp_start) *
                      std::pow(ratio, static_cast<double>(stage) / schedule.ramp_stages);
  const long rounded = std::lround(size);
  return static_cast<uint32_t>(std::clamp<long>(rounded, 1, static_cast<long>(target)));
}

BinScheduler::BinScheduler(const BinSchedule& schedule, std::vector<uint32_t> targets)
    : schedule_(schedule), targets_(std::move(targets)), windows_(targets_.size()) {}

bool BinScheduler::Lightened(size_t k, int64_t step) const {
  return schedule_.adaptive() && targets_[k] != 0 && step < windows_[k].light_until;
}

uint32_t BinScheduler::BinSize(size_t k, int64_t step) const {
  const uint32_t target = targets_[k];
  if (target == 0) return 0;
  uint32_t size = RampBinSize(schedule_, target, step);
  if (Lightened(k, step)) size = std::min(size, schedule_.light_bin_size());
  return size;
}

void BinScheduler::Observe(int64_t step, std::span<const double> norms) {
  if (!schedule_.adaptive()) return;
  const bool window_end = (step + 1) % schedule_.adapt_window == 0;
  for (size_t k = 0; k < windows_.size() && k < norms.size(); ++k) {
    Window& w = windows_[k];
    if (targets_[k] == 0) continue;
    if (std::isfinite(norms[k])) {
      w.sum += norms[k];
      ++w.count;
    }
    if (!window_end || w.count == 0) continue;
    const double mean = w.sum / static_cast<double>(w.count);
    if (w.previous > 0 && std::fabs(mean - w.previous) / w.previous >= schedule_.adapt_threshold) {
      w.light_until = std::max(w.light_until, step + 1 + schedule_.adapt_hold);
    }
    w.previous = mean;
    w.sum = 0;
    w.count = 0;
  }
}

void BinScheduler::LrDropped(int64_t step) {
  if (!schedule_.adaptive()) return;
  for (size_t k = 0; k < windows_.size(); ++k) {
    if (targets_[k] == 0) continue;
    windows_[k].light_until = std::max(windows_[k].light_until, step + schedule_.adapt_hold);
  }
}

// Layout: u64 tensor count, then per tensor f64 sum, i64 count, f64
// previous, i64 light_until (little-endian).
namespace {
constexpr size_t kPerTensor = 32;
}

std::vector<uint8_t> BinScheduler::Save() const {
  std::vector<uint8_t> out(8 + kPerTensor * windows_.size());
  internal::StoreU64(out.data(), windows_.size());
  uint8_t* p = out.data() + 8;
  for (const Window& w : windows_) {
    internal::StoreU64(p, std::bit_cast<uint64_t>(w.sum));
    internal::StoreU64(p + 8, static_cast<uint64_t>(w.count));
    internal::StoreU64(p + 16, std::bit_cast<uint64_t>(w.previous));
    internal::StoreU64(p + 24, static_cast<uint64_t>(w.light_until));
    p += kPerTensor;
  }
  return out;
}

Status BinScheduler::Load(std::span<const uint8_t> bytes) {
  if (bytes.size() < 8) return Status::Corruption("schedule state: truncated");
  const uint64_t n = internal::LoadU64(bytes.data());
  if (n != windows_.size()) {
    return Status::Corruption("schedule state: " + std::to_string(n) + " tensors, expected " +
                              std::to_string(windows_.size()));
  }
  if (bytes.size() != 8 + kPerTensor * n) {
    return Status::Corruption("schedule state: " + std::to_string(bytes.size()) +
                              " bytes, expected " + std::to_string(8 + kPerTensor * n));
  }
  std::vector<Window> loaded(windows_.size());
  const uint8_t* p = bytes.data() + 8;
  for (Window& w : loaded) {
    w.sum = std::bit_cast<double>(internal::LoadU64(p));
    w.count = static_cast<int64_t>(internal::LoadU64(p + 8));
    w.previous = std::bit_cast<double>(internal::LoadU64(p + 16));
    w.light_until = static_cast<int64_t>(internal::LoadU64(p + 24));
    if (w.count < 0 || !std::isfinite(w.sum) || !std::isfinite(w.previous)) {
      return Status::Corruption("schedule state: a tensor's window is out of range");
    }
    p += kPerTensor;
  }
  windows_ = std::move(loaded);
  return Status::OK();
}

}  // namespace adacomp
