// Momentum correction with factor masking (see local_momentum.h).
#include "local_momentum.h"

#include <cassert>
#include <cstring>

#include "byte_io.h"

namespace adacomp::train {

LocalMomentum::LocalMomentum(double momentum, std::vector<size_t> sizes)
    : momentum_(static_cast<float>(momentum)) {
  assert(momentum >= 0 && momentum < 1);
  for (size_t n : sizes) {
    velocity_.emplace_back(n, 0.0f);
    next_.emplace_back(n, 0.0f);
  }
}

std::span<const float> LocalMomentum::Prepare(size_t k, std::span<const float> grad) {
  assert(k < velocity_.size() && grad.size() == velocity_[k].size());
  const float* u = velocity_[k].data();
  float* out = next_[k].data();
  const float m = momentum_;
  for (size_t j = 0; j < grad.size(); ++j) {
    const float decayed = m * u[j];  // rounded on its own, as torch's mul_ then add_
    out[j] = decayed + grad[j];
  }
  return next_[k];
}

void LocalMomentum::Commit(size_t k, std::span<const float> residue_before,
                           std::span<const float> residue_after) {
  assert(k < velocity_.size());
  std::vector<float>& u = velocity_[k];
  const std::vector<float>& next = next_[k];
  std::memcpy(u.data(), next.data(), u.size() * sizeof(float));
  if (residue_before.empty() || residue_after.empty()) return;
  assert(residue_before.size() == u.size() && residue_after.size() == u.size());
  for (size_t j = 0; j < u.size(); ++j) {
    const float g = residue_before[j] + next[j];
    if (residue_after[j] != g) {
      u[j] = 0.0f;
      ++masked_;
    }
  }
}

std::vector<uint8_t> LocalMomentum::Save() const {
  ByteWriter w;
  w.Put<uint64_t>(velocity_.size());
  for (const auto& u : velocity_) {
    w.PutBytes(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(u.data()),
                                        u.size() * sizeof(float)));
  }
  return std::move(w.bytes);
}

Status LocalMomentum::Load(std::span<const uint8_t> bytes, const std::string& origin) {
  ByteReader r(bytes, origin + ": local momentum");
  uint64_t count = 0;
  ADACOMP_RETURN_IF_ERROR(r.Get(&count));
  if (count != velocity_.size()) {
    return Status::Corruption(origin + ": local momentum has " + std::to_string(count) +
                              " tensors, the model has " + std::to_string(velocity_.size()));
  }
  std::vector<std::span<const uint8_t>> parts(count);
  for (size_t k = 0; k < count; ++k) {
    ADACOMP_RETURN_IF_ERROR(r.GetBytes(&parts[k]));
    if (parts[k].size() != velocity_[k].size() * sizeof(float)) {
      return Status::Corruption(origin + ": local momentum of tensor " + std::to_string(k) +
                                " has " + std::to_string(parts[k].size()) + " bytes, expected " +
                                std::to_string(velocity_[k].size() * sizeof(float)));
    }
  }
  if (!r.AtEnd()) return Status::Corruption(origin + ": local momentum has trailing bytes");
  for (size_t k = 0; k < count; ++k) {
    std::memcpy(velocity_[k].data(), parts[k].data(), parts[k].size());
  }
  return Status::OK();
}

}  // namespace adacomp::train
