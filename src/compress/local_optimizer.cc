// The optimizer's moments on each learner, before compression (see
// include/adacomp/local_optimizer.h). Compiled with -ffp-contract=off
// (CMakeLists.txt): every operation is rounded on its own, as written.
#include "adacomp/local_optimizer.h"

#include <cmath>
#include <cstring>
#include <optional>

#include "adacomp/codec.h"
#include "core/byte_io.h"
#include "wire/format.h"

namespace adacomp {
namespace {

constexpr uint32_t kMagic = 0x31504f4c;  // "LOP1"

bool Finite(double x) { return std::isfinite(x); }

// u = momentum u0 + (wd w + g), each case its own loop so that each
// vectorizes (the arrays never overlap: the outputs are the optimizer's).
void MomentumLoop(size_t n, const float* __restrict u0, const float* __restrict g,
                  const float* __restrict w, float m, float wd, float* __restrict u) {
  if (u0 && w) {
    for (size_t i = 0; i < n; ++i) u[i] = m * u0[i] + (wd * w[i] + g[i]);
  } else if (u0) {
    for (size_t i = 0; i < n; ++i) u[i] = m * u0[i] + g[i];
  } else if (w) {
    for (size_t i = 0; i < n; ++i) u[i] = wd * w[i] + g[i];
  } else {
    std::memcpy(u, g, n * sizeof(float));
  }
}

// Nesterov's step d = (wd w + g) + m u, u the new velocity (the sum in
// parentheses rounded as MomentumLoop rounds it).
void NesterovLoop(size_t n, const float* __restrict u, const float* __restrict g,
                  const float* __restrict w, float m, float wd, float* __restrict d) {
  if (w) {
    for (size_t i = 0; i < n; ++i) d[i] = (wd * w[i] + g[i]) + m * u[i];
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = g[i] + m * u[i];
  }
}

struct AdamConstants {
  float b1, c1, b2, c2, bc1, bc2, eps, scale;
};

// Adam's moments and step; m0 and v0 null: no moments yet (zero). frozen:
// v0 is the second moment as it stays, v is not written. w (with wd):
// Adam's L2 term, the gradient is wd w + g (rounded as MomentumLoop rounds
// it). kL2 makes the loops without it their own (each vectorizes).
template <bool kL2>
void AdamLoopT(const AdamConstants& k, size_t n, const float* __restrict m0,
               const float* __restrict v0, const float* __restrict g, const float* __restrict w,
               float wd, bool frozen, float* __restrict m, float* __restrict v,
               float* __restrict d) {
  const float b1 = k.b1, c1 = k.c1, b2 = k.b2, c2 = k.c2, bc1 = k.bc1, bc2 = k.bc2, e = k.eps,
              s = k.scale;
  if (frozen) {
    for (size_t i = 0; i < n; ++i) {
      const float gi = kL2 ? wd * w[i] + g[i] : g[i];
      const float mi = (m0 ? b1 * m0[i] : 0.0f) + c1 * gi;
      m[i] = mi;
      d[i] = (mi / bc1) / (std::sqrt(v0[i] / bc2) + e);
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const float gi = kL2 ? wd * w[i] + g[i] : g[i];
    const float mi = (m0 ? b1 * m0[i] : 0.0f) + c1 * gi;
    const float vi = (v0 ? b2 * v0[i] : 0.0f) + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    // x * 1.0f is x's own bits, so the unscaled step stays as documented.
    d[i] = s * ((mi / bc1) / (std::sqrt(vi / bc2) + e));
  }
}

void AdamLoop(const AdamConstants& k, size_t n, const float* m0, const float* v0, const float* g,
              const float* w, float wd, bool frozen, float* m, float* v, float* d) {
  if (w) {
    AdamLoopT<true>(k, n, m0, v0, g, w, wd, frozen, m, v, d);
  } else {
    AdamLoopT<false>(k, n, m0, v0, g, nullptr, 0.0f, frozen, m, v, d);
  }
}

}  // namespace

Status LocalOptimizerSettings::Validate() const {
  if (kind != Kind::kSgd && kind != Kind::kAdam) {
    return Status::InvalidArgument("local optimizer: kind must be sgd or adam");
  }
  if (kind == Kind::kSgd && !(momentum >= 0 && momentum < 1)) {
    return Status::InvalidArgument("local optimizer: momentum must be in [0, 1), not " +
                                   std::to_string(momentum));
  }
  if (kind == Kind::kAdam) {
    if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1)) {
      return Status::InvalidArgument("local optimizer: betas must be in [0, 1), not " +
                                     std::to_string(beta1) + ", " + std::to_string(beta2));
    }
    if (!(eps > 0 && Finite(eps))) {
      return Status::InvalidArgument("local optimizer: eps must be finite and > 0, not " +
                                     std::to_string(eps));
    }
  }
  if (nesterov && kind != Kind::kSgd) {
    return Status::InvalidArgument("local optimizer: nesterov goes with sgd");
  }
  if (freeze_second_moment_after < 0) {
    return Status::InvalidArgument("local optimizer: freeze_second_moment_after must be >= 0");
  }
  if (!(adam_step_scale > 0 && Finite(adam_step_scale))) {
    return Status::InvalidArgument("local optimizer: adam_step_scale must be finite and > 0, not " +
                                   std::to_string(adam_step_scale));
  }
  if (adam_step_scale != 1.0 && kind != Kind::kAdam) {
    return Status::InvalidArgument("local optimizer: adam_step_scale goes with adam");
  }
  if (adam_step_scale != 1.0 && freeze_second_moment_after > 0) {
    return Status::InvalidArgument(
        "local optimizer: adam_step_scale makes up for each learner's own second moment; a "
        "frozen one (freeze_second_moment_after) is the average's already");
  }
  if (freeze_second_moment_after > 0 && kind != Kind::kAdam) {
    return Status::InvalidArgument(
        "local optimizer: only adam has a second moment to freeze (freeze_second_moment_after)");
  }
  return Status::OK();
}

const char* LocalOptimizerKindName(LocalOptimizerSettings::Kind kind) {
  return kind == LocalOptimizerSettings::Kind::kAdam ? "adam" : "sgd";
}

Result<std::unique_ptr<LocalOptimizer>> LocalOptimizer::Create(
    const LocalOptimizerSettings& settings, std::span<const size_t> sizes) {
  ADACOMP_RETURN_IF_ERROR(settings.Validate());
  std::unique_ptr<LocalOptimizer> out(new LocalOptimizer(settings));
  for (size_t n : sizes) out->AddTensor(n);
  return out;
}

size_t LocalOptimizer::AddTensor(size_t elements) {
  t_.emplace_back();
  t_.back().elements = elements;
  return t_.size() - 1;
}

void LocalOptimizer::Allocate(Tensor& t) const {
  const size_t n = t.elements;
  const bool adam = s_.kind == LocalOptimizerSettings::Kind::kAdam;
  if (t.next_first.size() != n) t.next_first.assign(n, 0.0f);
  if (adam && t.next_second.size() != n) t.next_second.assign(n, 0.0f);
  if ((adam || s_.nesterov) && t.step.size() != n) t.step.assign(n, 0.0f);
}

Result<std::span<float>> LocalOptimizer::Prepare(size_t k, std::span<const float> grad,
                                                 std::span<const float> param,
                                                 double weight_decay) {
  if (k >= t_.size()) {
    return Status::InvalidArgument("local optimizer: no tensor " + std::to_string(k));
  }
  Tensor& t = t_[k];
  const size_t n = t.elements;
  if (grad.size() != n) {
    return Status::InvalidArgument("local optimizer: tensor " + std::to_string(k) + " has " +
                                   std::to_string(n) + " elements, its gradient " +
                                   std::to_string(grad.size()));
  }
  const bool adam = s_.kind == LocalOptimizerSettings::Kind::kAdam;
  if (weight_decay != 0) {
    if (!(weight_decay > 0 && Finite(weight_decay))) {
      return Status::InvalidArgument("local optimizer: weight decay must be finite and >= 0");
    }
    if (param.size() != n) {
      return Status::InvalidArgument("local optimizer: weight decay needs tensor " +
                                     std::to_string(k) + "'s " + std::to_string(n) +
                                     " weights, given " + std::to_string(param.size()));
    }
  }
  Allocate(t);
  t.prepared = true;
  t.masking = 0;
  const float* g = grad.data();
  if (!adam) {
    const float* w = weight_decay != 0 ? param.data() : nullptr;
    const float m = static_cast<float>(s_.momentum), wd = static_cast<float>(weight_decay);
    MomentumLoop(n, t.steps > 0 ? t.first.data() : nullptr, g, w, m, wd, t.next_first.data());
    t.froze = false;
    if (s_.nesterov) {
      NesterovLoop(n, t.next_first.data(), g, w, m, wd, t.step.data());
      return std::span<float>(t.step);
    }
    return std::span<float>(t.next_first);
  }
  const int64_t frozen_after = s_.freeze_second_moment_after;
  // A tensor the warm-up never saw (no second moment yet) runs plain Adam.
  const bool frozen = frozen_after > 0 && steps_ >= frozen_after && t.steps > 0;
  const double step = static_cast<double>(t.steps + 1);
  const double t_v = static_cast<double>(frozen ? t.second_steps : t.second_steps + 1);
  const AdamConstants c{static_cast<float>(s_.beta1),
                        static_cast<float>(1.0 - s_.beta1),
                        static_cast<float>(s_.beta2),
                        static_cast<float>(1.0 - s_.beta2),
                        static_cast<float>(1.0 - std::pow(s_.beta1, step)),
                        static_cast<float>(1.0 - std::pow(s_.beta2, t_v)),
                        static_cast<float>(s_.eps),
                        static_cast<float>(s_.adam_step_scale)};
  const bool started = t.steps > 0;
  AdamLoop(c, n, started ? t.first.data() : nullptr, started ? t.second.data() : nullptr, g,
           weight_decay != 0 ? param.data() : nullptr, static_cast<float>(weight_decay), frozen,
           t.next_first.data(), t.next_second.data(), t.step.data());
  t.froze = frozen;
  return std::span<float>(t.step);
}

Status LocalOptimizer::MaskSent(size_t k, std::span<const uint8_t> frame) {
  if (k >= t_.size() || !t_[k].prepared) {
    return Status::InvalidArgument("local optimizer: tensor " + std::to_string(k) +
                                   " has no step in progress to mask");
  }
  if (s_.kind == LocalOptimizerSettings::Kind::kAdam) return Status::OK();
  // A codec that keeps no residue sent the whole step: nothing to mask.
  const std::optional<Codec> codec = wire::PeekCodec(frame);
  if (codec == Codec::kDense || codec == Codec::kTernGrad) return Status::OK();
  Tensor& t = t_[k];
  uint64_t zeroed = 0;
  ADACOMP_RETURN_IF_ERROR(ZeroWhereCarried(frame, t.next_first, &zeroed));
  t.masking += zeroed;
  return Status::OK();
}

Status LocalOptimizer::BetweenSteps(const char* what) const {
  for (const Tensor& t : t_) {
    if (t.prepared) {
      return Status::InvalidArgument(std::string("local optimizer: ") + what +
                                     " between steps, not while a step is in progress");
    }
  }
  return Status::OK();
}

Status LocalOptimizer::SetRates(double momentum, double beta1, double beta2) {
  ADACOMP_RETURN_IF_ERROR(BetweenSteps("the rates change"));
  LocalOptimizerSettings s = s_;
  if (s.kind == LocalOptimizerSettings::Kind::kSgd) {
    s.momentum = momentum;
  } else {
    s.beta1 = beta1;
    s.beta2 = beta2;
    if (s.freeze_second_moment_after > 0 && beta2 != s_.beta2) {
      return Status::InvalidArgument(
          "local optimizer: beta2 is fixed with a frozen second moment "
          "(freeze_second_moment_after), whose bias correction is beta2's");
    }
  }
  ADACOMP_RETURN_IF_ERROR(s.Validate());
  s_ = s;
  return Status::OK();
}

Status LocalOptimizer::SetStepScale(double scale) {
  ADACOMP_RETURN_IF_ERROR(BetweenSteps("the step scale changes"));
  LocalOptimizerSettings s = s_;
  s.adam_step_scale = scale;
  ADACOMP_RETURN_IF_ERROR(s.Validate());
  s_ = s;
  return Status::OK();
}

void LocalOptimizer::Commit() {
  for (Tensor& t : t_) {
    if (!t.prepared) continue;
    // The replaced moments' buffers serve the next step's.
    t.first.swap(t.next_first);
    const bool adam = s_.kind == LocalOptimizerSettings::Kind::kAdam;
    if (adam && !t.froze) t.second.swap(t.next_second);
    ++t.steps;
    if (!t.froze) ++t.second_steps;
    t.prepared = false;
    masked_ += t.masking;
    t.masking = 0;
  }
  ++steps_;
}

void LocalOptimizer::Drop() {
  for (Tensor& t : t_) {
    t.prepared = false;
    t.masking = 0;
  }
}

std::span<const float> LocalOptimizer::first(size_t k) const {
  return t_[k].steps > 0 ? std::span<const float>(t_[k].first) : std::span<const float>();
}

std::span<const float> LocalOptimizer::second(size_t k) const {
  return t_[k].steps > 0 ? std::span<const float>(t_[k].second) : std::span<const float>();
}

Status LocalOptimizer::SetMoments(size_t k, std::span<const float> first,
                                  std::span<const float> second, int64_t steps,
                                  int64_t second_steps) {
  if (k >= t_.size()) {
    return Status::InvalidArgument("local optimizer: no tensor " + std::to_string(k));
  }
  Tensor& t = t_[k];
  const bool adam = s_.kind == LocalOptimizerSettings::Kind::kAdam;
  const size_t want_second = adam ? t.elements : 0;
  if (first.size() != t.elements || second.size() != want_second) {
    return Status::InvalidArgument("local optimizer: tensor " + std::to_string(k) +
                                   "'s moments must be " + std::to_string(t.elements) +
                                   (adam ? " and " + std::to_string(want_second) : "") +
                                   " floats, not " + std::to_string(first.size()) +
                                   (adam ? " and " + std::to_string(second.size()) : ""));
  }
  if (!(steps >= 1 && second_steps >= 1 && second_steps <= steps &&
        (adam || second_steps == steps))) {
    return Status::InvalidArgument("local optimizer: tensor " + std::to_string(k) +
                                   "'s counts must be 1 <= second_steps <= steps" +
                                   (adam ? "" : " (sgd: equal)") + ", not " +
                                   std::to_string(second_steps) + " and " + std::to_string(steps));
  }
  t.first.assign(first.begin(), first.end());
  t.second.assign(second.begin(), second.end());
  t.steps = steps;
  t.second_steps = second_steps;
  t.prepared = false;
  t.masking = 0;
  return Status::OK();
}

void LocalOptimizer::Reset(int64_t steps, uint64_t masked) {
  for (Tensor& t : t_) {
    t.steps = t.second_steps = 0;
    t.prepared = false;
    t.masking = 0;
  }
  steps_ = steps;
  masked_ = masked;
}

std::vector<uint8_t> LocalOptimizer::Save() const {
  ByteWriter w;
  w.Put<uint32_t>(kMagic);
  w.Put<uint8_t>(static_cast<uint8_t>(s_.kind));
  w.Put<int64_t>(steps_);
  w.Put<uint64_t>(masked_);
  w.Put<uint64_t>(t_.size());
  auto bytes = [](const std::vector<float>& v) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()),
                                    v.size() * sizeof(float));
  };
  for (const Tensor& t : t_) {
    w.Put<int64_t>(t.steps);
    w.Put<int64_t>(t.second_steps);
    if (t.steps == 0) continue;
    w.PutBytes(bytes(t.first));
    w.PutBytes(bytes(t.second));
  }
  return std::move(w.bytes);
}

Status LocalOptimizer::Load(std::span<const uint8_t> bytes, const std::string& origin) {
  const std::string what = origin + ": local optimizer state";
  ByteReader r(bytes, what);
  uint32_t magic = 0;
  uint8_t kind = 0;
  int64_t steps = 0;
  uint64_t masked = 0, count = 0;
  ADACOMP_RETURN_IF_ERROR(r.Get(&magic));
  if (magic != kMagic) return Status::Corruption(what + " is not one (no LOP1 mark)");
  ADACOMP_RETURN_IF_ERROR(r.Get(&kind));
  if (kind != static_cast<uint8_t>(s_.kind)) {
    return Status::Corruption(
        what + " is of another optimizer (" +
        (kind <= 1 ? LocalOptimizerKindName(static_cast<LocalOptimizerSettings::Kind>(kind))
                   : "unknown") +
        ", this one is " + LocalOptimizerKindName(s_.kind) + ")");
  }
  ADACOMP_RETURN_IF_ERROR(r.Get(&steps));
  ADACOMP_RETURN_IF_ERROR(r.Get(&masked));
  ADACOMP_RETURN_IF_ERROR(r.Get(&count));
  if (steps < 0) return Status::Corruption(what + ": the step count is negative");
  if (count != t_.size()) {
    return Status::Corruption(what + " has " + std::to_string(count) + " tensors, expected " +
                              std::to_string(t_.size()));
  }
  const bool adam = s_.kind == LocalOptimizerSettings::Kind::kAdam;
  std::vector<int64_t> counts(count), second_counts(count);
  std::vector<std::span<const uint8_t>> firsts(count), seconds(count);
  for (size_t k = 0; k < count; ++k) {
    ADACOMP_RETURN_IF_ERROR(r.Get(&counts[k]));
    ADACOMP_RETURN_IF_ERROR(r.Get(&second_counts[k]));
    const int64_t c = counts[k], c2 = second_counts[k];
    if (c < 0 || c2 < 0 || c2 > c || (c > 0 && c2 == 0) || (!adam && c2 != c)) {
      return Status::Corruption(what + ": tensor " + std::to_string(k) + " has bad step counts (" +
                                std::to_string(c) + ", " + std::to_string(c2) + ")");
    }
    if (c == 0) continue;
    ADACOMP_RETURN_IF_ERROR(r.GetBytes(&firsts[k]));
    ADACOMP_RETURN_IF_ERROR(r.GetBytes(&seconds[k]));
    const size_t want = t_[k].elements * sizeof(float);
    if (firsts[k].size() != want || seconds[k].size() != (adam ? want : 0)) {
      return Status::Corruption(what + ": tensor " + std::to_string(k) + " has moments of " +
                                std::to_string(firsts[k].size()) + " and " +
                                std::to_string(seconds[k].size()) + " bytes, expected " +
                                std::to_string(want) + " and " + std::to_string(adam ? want : 0));
    }
  }
  if (!r.AtEnd()) return Status::Corruption(what + " has trailing bytes");
  auto floats = [](std::span<const uint8_t> b, std::vector<float>* out) {
    out->resize(b.size() / sizeof(float));
    if (!b.empty()) std::memcpy(out->data(), b.data(), b.size());
  };
  for (size_t k = 0; k < count; ++k) {
    Tensor& t = t_[k];
    t.prepared = false;
    t.masking = 0;
    t.steps = counts[k];
    t.second_steps = second_counts[k];
    if (t.steps == 0) continue;
    floats(firsts[k], &t.first);
    floats(seconds[k], &t.second);
  }
  steps_ = steps;
  masked_ = masked;
  return Status::OK();
}

}  // namespace adacomp
