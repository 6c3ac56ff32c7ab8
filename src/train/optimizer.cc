// SGD with momentum and Adam on the averaged gradient (see optimizer.h).
#include "optimizer.h"

#include <cmath>
#include <cstring>

#include "byte_io.h"

namespace adacomp::train {

OptimizerState::OptimizerState(const TrainOptions& o, const std::vector<Param>& params,
                               std::vector<bool> plain, bool plain_decay)
    : adam_(o.optim.kind == Optimizer::kAdam),
      momentum_(o.optim.momentum),
      weight_decay_(o.optim.weight_decay),
      beta1_(o.optim.adam_beta1),
      beta2_(o.optim.adam_beta2),
      eps_(o.optim.adam_eps),
      plain_(std::move(plain)),
      plain_decay_(plain_decay) {
  plain_.resize(params.size(), false);
  for (size_t t = 0; t < params.size(); ++t) {
    const torch::Tensor& p = params[t].tensor;
    auto state = [&] {
      return plain_[t] ? torch::zeros({0}, p.options()).detach() : torch::zeros_like(p).detach();
    };
    buf1_.push_back(state());
    if (adam_) buf2_.push_back(state());
  }
}

void OptimizerState::Apply(std::vector<Param>& params, const std::vector<torch::Tensor>& grads,
                           double lr) {
  torch::NoGradGuard no_grad;
  if (adam_) ++adam_step_;
  for (size_t t = 0; t < params.size(); ++t) {
    torch::Tensor p = params[t].tensor;
    torch::Tensor g = grads[t];
    if (weight_decay_ > 0 && (plain_decay_ || !plain_[t])) g = g.add(p, weight_decay_);
    if (plain_[t]) {
      p.add_(g, -lr);
    } else if (adam_) {
      double b1 = beta1_, b2 = beta2_;
      buf1_[t].mul_(b1).add_(g, 1.0 - b1);
      buf2_[t].mul_(b2).addcmul_(g, g, 1.0 - b2);
      double bc1 = 1.0 - std::pow(b1, static_cast<double>(adam_step_));
      double bc2 = 1.0 - std::pow(b2, static_cast<double>(adam_step_));
      auto denom = (buf2_[t].sqrt() / std::sqrt(bc2)).add_(eps_);
      p.addcdiv_(buf1_[t], denom, -lr / bc1);
    } else if (momentum_ > 0) {
      buf1_[t].mul_(momentum_).add_(g);
      p.add_(buf1_[t], -lr);
    } else {
      p.add_(g, -lr);
    }
  }
}

std::vector<uint8_t> OptimizerState::State() const {
  std::vector<std::span<const float>> buffers;
  for (const auto* bufs : {&buf1_, &buf2_}) {
    for (const auto& b : *bufs) {
      buffers.emplace_back(b.data_ptr<float>(), static_cast<size_t>(b.numel()));
    }
  }
  return SaveFloatBuffers(adam_step_, buffers);
}

Status OptimizerState::LoadState(std::span<const uint8_t> bytes, const std::string& origin) {
  std::vector<std::span<float>> buffers;
  for (auto* bufs : {&buf1_, &buf2_}) {
    for (auto& b : *bufs) buffers.emplace_back(b.data_ptr<float>(), static_cast<size_t>(b.numel()));
  }
  return LoadFloatBuffers(bytes, origin + ": optimizer state", buffers, &adam_step_);
}

}  // namespace adacomp::train
