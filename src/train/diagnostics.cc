#include "diagnostics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace adacomp::train {

ResidueProbe::ResidueProbe(std::vector<Tensor> tensors)
    : tensors_(std::move(tensors)), state_(tensors_.size()) {
  for (size_t k = 0; k < tensors_.size(); ++k) {
    state_[k].before.assign(tensors_[k].elements, 0.0f);
    state_[k].wait.assign(tensors_[k].elements, 0);
  }
}

void ResidueProbe::Before(size_t k, std::span<const float> residue) {
  State& s = state_[k];
  std::copy(residue.begin(), residue.end(), s.before.begin());
}

void ResidueProbe::After(size_t k, std::span<const float> grad, std::span<const float> residue) {
  State& s = state_[k];
  const size_t n = tensors_[k].elements;
  uint64_t sent = 0;
  double scale_sum = 0, abs_g_sum = 0, r2 = 0, g2 = 0, mass = 0, mass_wait = 0;
  for (size_t j = 0; j < n; ++j) {
    const float g = s.before[j] + grad[j];  // the same float sum the codec forms
    const float r = residue[j];
    if (r != g) {
      ++sent;
      scale_sum += std::fabs(static_cast<double>(g) - r);
      abs_g_sum += std::fabs(g);
      s.wait[j] = 0;
    } else {
      s.wait[j] += 1;
    }
    r2 += static_cast<double>(r) * r;
    mass += std::fabs(r);
    mass_wait += std::fabs(r) * static_cast<double>(s.wait[j]);
    g2 += static_cast<double>(grad[j]) * grad[j];
  }
  s.sent += n ? static_cast<double>(sent) / static_cast<double>(n) : 0;
  s.sent_elements += sent;
  s.scale_sum += scale_sum;
  s.abs_g_sum += abs_g_sum;
  s.steps += 1;
  s.probed = true;
  s.residue_norm = std::sqrt(r2);
  s.grad_norm = std::sqrt(g2);
  s.mass_wait = mass > 0 ? mass_wait / mass : 0;
}

namespace {

std::string Num(double v) {
  if (!std::isfinite(v)) return "null";
  char b[32];
  std::snprintf(b, sizeof(b), "%.6g", v);
  return b;
}

}  // namespace

std::string ResidueProbe::Line(int64_t step) {
  std::string out = "{\"step\":" + std::to_string(step) + ",\"tensors\":[";
  bool first = true;
  for (size_t k = 0; k < tensors_.size(); ++k) {
    State& s = state_[k];
    if (!s.probed) continue;
    const size_t n = tensors_[k].elements;
    uint64_t wait_sum = 0, old = 0;
    uint32_t wait_max = 0;
    for (size_t j = 0; j < n; ++j) {
      const uint32_t w = s.wait[j];
      wait_sum += w;
      wait_max = std::max(wait_max, w);
      if (w > 100) ++old;
    }
    const double sel = static_cast<double>(s.sent_elements);
    if (!first) out += ",";
    first = false;
    out += "{\"name\":\"" + tensors_[k].name + "\",\"type\":\"" + tensors_[k].type +
           "\",\"elements\":" + std::to_string(n) +
           ",\"sent_share\":" + Num(s.steps ? s.sent / static_cast<double>(s.steps) : 0) +
           ",\"scale\":" + Num(sel > 0 ? s.scale_sum / sel : NAN) +
           ",\"abs_g_sent\":" + Num(sel > 0 ? s.abs_g_sum / sel : NAN) +
           ",\"residue_norm\":" + Num(s.residue_norm) + ",\"grad_norm\":" + Num(s.grad_norm) +
           ",\"wait_mean\":" + Num(n ? static_cast<double>(wait_sum) / n : 0) +
           ",\"wait_max\":" + std::to_string(wait_max) +
           ",\"wait_over_100\":" + Num(n ? static_cast<double>(old) / n : 0) +
           ",\"wait_of_residue_mass\":" + Num(s.mass_wait) + "}";
    s.sent = s.scale_sum = s.abs_g_sum = 0;
    s.sent_elements = s.steps = 0;
  }
  return out + "]}";
}

}  // namespace adacomp::train
