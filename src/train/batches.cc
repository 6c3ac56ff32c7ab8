// Minibatches and the loss (see batches.h).
#include "batches.h"

namespace adacomp::train {

void FillBatch(const Data& d, bool train, const int64_t* idx, int64_t n, torch::Tensor* x,
               torch::Tensor* y) {
  if (d.text) {
    const auto& bytes = train ? d.train_text : d.test_text;
    int64_t t_len = d.seq_len;
    *x = torch::empty({n, t_len}, torch::kInt64);
    *y = torch::empty({n, t_len}, torch::kInt64);
    int64_t* px = x->data_ptr<int64_t>();
    int64_t* py = y->data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* s = bytes.data() + idx[i] * t_len;
      for (int64_t t = 0; t < t_len; ++t) {
        px[i * t_len + t] = s[t];
        py[i * t_len + t] = s[t + 1];
      }
    }
    return;
  }
  const ImageSet& set = train ? d.train : d.test;
  int64_t img = set.image_bytes();
  *x = torch::empty({n, set.channels, set.height, set.width}, torch::kFloat32);
  *y = torch::empty({n}, torch::kInt64);
  float* px = x->data_ptr<float>();
  int64_t* py = y->data_ptr<int64_t>();
  const float scale = 1.0f / 255.0f;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* s = set.pixels.data() + idx[i] * img;
    for (int64_t k = 0; k < img; ++k) px[i * img + k] = (s[k] * scale - d.mean) * d.inv_std;
    py[i] = set.labels[static_cast<size_t>(idx[i])];
  }
}

torch::Tensor Loss(const torch::Tensor& logits, const torch::Tensor& y, bool sum) {
  auto flat = logits.reshape({-1, logits.size(-1)});
  auto opts = torch::nn::functional::CrossEntropyFuncOptions();
  if (sum) {
    opts.reduction(torch::kSum);
  } else {
    opts.reduction(torch::kMean);
  }
  return torch::nn::functional::cross_entropy(flat, y.reshape({-1}), opts);
}

}  // namespace adacomp::train
