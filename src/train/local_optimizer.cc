// The optimizer's moments on each learner, before compression (see
// local_optimizer.h).
#include "local_optimizer.h"

#include <cassert>
#include <cmath>
#include <cstring>

#include "byte_io.h"

namespace adacomp::train {

LocalOptimizer::LocalOptimizer(const Settings& settings, std::vector<size_t> sizes) : s_(settings) {
  assert(s_.adam || (s_.momentum >= 0 && s_.momentum < 1));
  for (size_t n : sizes) {
    first_.emplace_back(n, 0.0f);
    next_first_.emplace_back(n, 0.0f);
    step_.emplace_back(s_.adam ? n : 0, 0.0f);
    second_.emplace_back(s_.adam ? n : 0, 0.0f);
    next_second_.emplace_back(s_.adam ? n : 0, 0.0f);
  }
}

std::span<const float> LocalOptimizer::Prepare(size_t k, std::span<const float> grad) {
  assert(k < first_.size() && grad.size() == first_[k].size());
  const size_t n = grad.size();
  const float* m = first_[k].data();
  float* m_next = next_first_[k].data();
  if (!s_.adam) {
    const float mu = static_cast<float>(s_.momentum);
    for (size_t j = 0; j < n; ++j) {
      const float decayed = mu * m[j];  // rounded on its own, as torch's mul_ then add_
      m_next[j] = decayed + grad[j];
    }
    return next_first_[k];
  }
  const float b1 = static_cast<float>(s_.beta1), b2 = static_cast<float>(s_.beta2);
  const float c1 = 1.0f - b1, c2 = 1.0f - b2;
  const double t = static_cast<double>(steps_ + 1);
  const double bc1 = 1.0 - std::pow(s_.beta1, t), bc2 = 1.0 - std::pow(s_.beta2, t);
  const float* v = second_[k].data();
  float* v_next = next_second_[k].data();
  float* d = step_[k].data();
  for (size_t j = 0; j < n; ++j) {
    const float g = grad[j];
    m_next[j] = b1 * m[j] + c1 * g;
    v_next[j] = b2 * v[j] + c2 * g * g;
    const double m_hat = m_next[j] / bc1, v_hat = v_next[j] / bc2;
    d[j] = static_cast<float>(m_hat / (std::sqrt(v_hat) + s_.eps));
  }
  return step_[k];
}

void LocalOptimizer::Commit(size_t k, std::span<const float> residue_before,
                            std::span<const float> residue_after) {
  assert(k < first_.size());
  std::vector<float>& u = first_[k];
  std::memcpy(u.data(), next_first_[k].data(), u.size() * sizeof(float));
  if (s_.adam) {
    std::memcpy(second_[k].data(), next_second_[k].data(), second_[k].size() * sizeof(float));
    return;
  }
  if (residue_before.empty() || residue_after.empty()) return;
  assert(residue_before.size() == u.size() && residue_after.size() == u.size());
  const std::vector<float>& step = next_first_[k];
  for (size_t j = 0; j < u.size(); ++j) {
    const float g = residue_before[j] + step[j];
    if (residue_after[j] != g) {
      u[j] = 0.0f;
      ++masked_;
    }
  }
}

std::vector<uint8_t> LocalOptimizer::Save() const {
  std::vector<std::span<const float>> buffers;
  for (const auto* moments : {&first_, &second_}) {
    for (const auto& u : *moments) buffers.emplace_back(u);
  }
  return SaveFloatBuffers(steps_, buffers);
}

Status LocalOptimizer::Load(std::span<const uint8_t> bytes, const std::string& origin) {
  std::vector<std::span<float>> buffers;
  for (auto* moments : {&first_, &second_}) {
    for (auto& u : *moments) buffers.emplace_back(u);
  }
  return LoadFloatBuffers(bytes, origin + ": local optimizer state", buffers, &steps_);
}

}  // namespace adacomp::train
