#include "bench_ops.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace adacomp::tool {

void ReferencePass(std::span<float> residue, std::span<const float> grad) {
  float* __restrict r = residue.data();
  const float* __restrict g = grad.data();
  const size_t n = residue.size();
  for (size_t i = 0; i < n; ++i) r[i] += g[i];
}

uint64_t TopKNthElement(std::span<float> residue, std::span<const float> grad, uint64_t k,
                        TopKScratch* scratch) {
  const size_t n = residue.size();
  k = std::min<uint64_t>(k, n);
  scratch->indices.clear();
  scratch->values.clear();
  if (k == 0) {
    ReferencePass(residue, grad);
    return 0;
  }
  scratch->magnitude.resize(n);
  float* __restrict r = residue.data();
  const float* __restrict g = grad.data();
  float* __restrict m = scratch->magnitude.data();
  for (size_t i = 0; i < n; ++i) {  // G = R + dW, fused with |G|
    float v = r[i] + g[i];
    r[i] = v;
    m[i] = std::fabs(v);
  }
  // The k-th largest |G| is the threshold; nth_element puts the k largest after it.
  auto nth = scratch->magnitude.begin() + static_cast<ptrdiff_t>(n - k);
  std::nth_element(scratch->magnitude.begin(), nth, scratch->magnitude.end());
  const float threshold = *nth;
  uint64_t above = 0;
  for (auto it = nth; it != scratch->magnitude.end(); ++it) above += *it > threshold;
  uint64_t ties = k - above;  // elements equal to the threshold still to send
  scratch->indices.reserve(k);
  scratch->values.reserve(k);
  for (size_t i = 0; i < n; ++i) {
    float a = std::fabs(r[i]);
    if (a > threshold || (a == threshold && ties > 0)) {
      if (!(a > threshold)) --ties;
      scratch->indices.push_back(static_cast<uint32_t>(i));
      scratch->values.push_back(r[i]);
      r[i] = 0.0f;
    }
  }
  return scratch->indices.size();
}

uint64_t AdaCompScalarReference(std::span<const float> old_residue, std::span<const float> grad,
                                uint32_t bin_size, std::span<float> dequantized,
                                std::span<float> new_residue, float* scale) {
  const size_t n = grad.size();
  std::vector<float> g(n), h(n);
  for (size_t j = 0; j < n; ++j) {
    g[j] = old_residue[j] + grad[j];  // G = R + dW
    h[j] = g[j] + grad[j];            // H = G + dW
  }
  const size_t bins = (n + bin_size - 1) / bin_size;
  std::vector<float> gmax(bins, 0.0f);
  for (size_t j = 0; j < n; ++j) gmax[j / bin_size] = std::max(gmax[j / bin_size], std::fabs(g[j]));
  double sum = 0;
  for (float m : gmax) sum += m;
  const float s = bins ? static_cast<float>(sum / static_cast<double>(bins)) : 0.0f;
  uint64_t selected = 0;
  for (size_t j = 0; j < n; ++j) {
    bool pick = std::fabs(h[j]) >= gmax[j / bin_size] && g[j] != 0.0f;
    float q = pick ? (g[j] > 0 ? s : -s) : 0.0f;
    selected += pick;
    dequantized[j] = q;
    new_residue[j] = g[j] - q;
  }
  *scale = s;
  return selected;
}

Status CheckConservation(std::span<const float> old_residue, std::span<const float> grad,
                         std::span<const float> dequantized, std::span<const float> new_residue) {
  const size_t n = grad.size();
  if (old_residue.size() != n || dequantized.size() != n || new_residue.size() != n) {
    return Status::Internal("conservation check: sizes differ");
  }
  for (size_t j = 0; j < n; ++j) {
    double before = static_cast<double>(old_residue[j]) + grad[j];
    double after = static_cast<double>(dequantized[j]) + new_residue[j];
    double mag = std::fabs(old_residue[j]) + std::fabs(grad[j]) + std::fabs(dequantized[j]) +
                 std::fabs(new_residue[j]);
    if (std::fabs(before - after) > 2e-7 * mag + 1e-37) {
      return Status::Internal("conservation fails at element " + std::to_string(j) +
                              ": old residue + gradient = " + std::to_string(before) +
                              ", sent + new residue = " + std::to_string(after));
    }
  }
  return Status::OK();
}

Status CheckClose(std::span<const float> a, std::span<const float> b, double rel, double abs,
                  const char* what) {
  if (a.size() != b.size()) return Status::Internal(std::string(what) + ": sizes differ");
  for (size_t j = 0; j < a.size(); ++j) {
    double d = std::fabs(static_cast<double>(a[j]) - b[j]);
    if (!(d <= rel * (std::fabs(a[j]) + std::fabs(b[j])) + abs)) {
      return Status::Internal(std::string(what) + ": element " + std::to_string(j) + " is " +
                              std::to_string(a[j]) + ", expected " + std::to_string(b[j]));
    }
  }
  return Status::OK();
}

}  // namespace adacomp::tool
