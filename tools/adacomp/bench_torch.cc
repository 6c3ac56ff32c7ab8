// torch::topk as a residual top-k baseline for `adacomp bench` (LibTorch
// builds only; kept in its own translation unit because torch headers are
// slow to compile).
#include <torch/torch.h>

#include <cmath>

#include "bench_ops.h"

namespace adacomp::tool {

uint64_t TopKTorch(std::span<float> residue, std::span<const float> grad, uint64_t k,
                   TopKScratch* scratch) {
  static const bool one_thread = [] {
    at::set_num_threads(1);
    return true;
  }();
  (void)one_thread;
  const size_t n = residue.size();
  k = std::min<uint64_t>(k, n);
  scratch->indices.clear();
  scratch->values.clear();
  float* __restrict r = residue.data();
  const float* __restrict g = grad.data();
  for (size_t i = 0; i < n; ++i) r[i] += g[i];  // G = R + dW
  if (k == 0) return 0;
  torch::NoGradGuard no_grad;
  torch::Tensor t = torch::from_blob(r, {static_cast<int64_t>(n)}, torch::kFloat32);
  auto [top_values, top_indices] =
      torch::topk(t.abs(), static_cast<int64_t>(k), /*dim=*/0, /*largest=*/true, /*sorted=*/false);
  (void)top_values;
  const int64_t* idx = top_indices.data_ptr<int64_t>();
  scratch->indices.resize(k);
  scratch->values.resize(k);
  for (uint64_t m = 0; m < k; ++m) {
    const int64_t i = idx[m];
    scratch->indices[m] = static_cast<uint32_t>(i);
    scratch->values[m] = r[i];
    r[i] = 0.0f;
  }
  return k;
}

}  // namespace adacomp::tool
