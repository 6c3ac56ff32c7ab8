#include "models.h"

#include <cmath>

#include "rng.h"

namespace adacomp::train {
namespace nn = torch::nn;
namespace {

class MnistCnn : public Net {
 public:
  explicit MnistCnn(const ModelShape& s)
      : conv1_(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(s.channels, 20, 5)))),
        conv2_(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(20, 50, 5)))),
        fc1_(register_module("fc1", nn::Linear(50 * ((((s.height - 4) / 2) - 4) / 2) *
                                                   ((((s.width - 4) / 2) - 4) / 2),
                                               500))),
        fc2_(register_module("fc2", nn::Linear(500, s.classes))) {}
  torch::Tensor Forward(const torch::Tensor& x) override {
    auto h = torch::max_pool2d(torch::relu(conv1_->forward(x)), 2);
    h = torch::max_pool2d(torch::relu(conv2_->forward(h)), 2);
    h = torch::relu(fc1_->forward(h.flatten(1)));
    return fc2_->forward(h);
  }

 private:
  nn::Conv2d conv1_, conv2_;
  nn::Linear fc1_, fc2_;
};

class CifarCnn : public Net {
 public:
  explicit CifarCnn(const ModelShape& s)
      : conv1_(
            register_module("conv1", nn::Conv2d(nn::Conv2dOptions(s.channels, 32, 5).padding(2)))),
        conv2_(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(32, 32, 5).padding(2)))),
        conv3_(register_module("conv3", nn::Conv2d(nn::Conv2dOptions(32, 64, 5).padding(2)))),
        fc1_(register_module("fc1", nn::Linear(64 * (s.height / 8) * (s.width / 8), 64))),
        fc2_(register_module("fc2", nn::Linear(64, s.classes))) {}
  torch::Tensor Forward(const torch::Tensor& x) override {
    auto h = torch::max_pool2d(torch::relu(conv1_->forward(x)), 2);
    h = torch::max_pool2d(torch::relu(conv2_->forward(h)), 2);
    h = torch::max_pool2d(torch::relu(conv3_->forward(h)), 2);
    h = torch::relu(fc1_->forward(h.flatten(1)));
    return fc2_->forward(h);
  }

 private:
  nn::Conv2d conv1_, conv2_, conv3_;
  nn::Linear fc1_, fc2_;
};

class FcDnn : public Net {
 public:
  explicit FcDnn(const ModelShape& s) {
    std::vector<int64_t> sizes = {s.channels * s.height * s.width, 512, 512, 256, s.classes};
    for (size_t i = 0; i + 1 < sizes.size(); ++i) {
      layers_.push_back(
          register_module("fc" + std::to_string(i + 1), nn::Linear(sizes[i], sizes[i + 1])));
    }
  }
  torch::Tensor Forward(const torch::Tensor& x) override {
    auto h = x.flatten(1);
    for (size_t i = 0; i < layers_.size(); ++i) {
      h = layers_[i]->forward(h);
      if (i + 1 < layers_.size()) h = torch::relu(h);
    }
    return h;
  }

 private:
  std::vector<nn::Linear> layers_;
};

class CharLstm : public Net {
 public:
  explicit CharLstm(const ModelShape& s)
      : embed_(register_module("embed", nn::Embedding(s.vocab, s.embed))),
        lstm_(register_module(
            "lstm", nn::LSTM(nn::LSTMOptions(s.embed, s.hidden).num_layers(2).batch_first(true)))),
        fc_(register_module("fc", nn::Linear(s.hidden, s.vocab))) {}
  torch::Tensor Forward(const torch::Tensor& x) override {
    auto e = embed_->forward(x);
    auto out = std::get<0>(lstm_->forward(e));
    return fc_->forward(out);
  }

 private:
  nn::Embedding embed_;
  nn::LSTM lstm_;
  nn::Linear fc_;
};

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Result<Replica> CreateModel(const std::string& name, const ModelShape& shape) {
  Replica m;
  if (name == "mnist-cnn") {
    if (shape.height < 16 || shape.width < 16) {
      return Status::InvalidArgument("mnist-cnn needs images of at least 16x16");
    }
    m.net = std::make_shared<MnistCnn>(shape);
  } else if (name == "cifar-cnn") {
    if (shape.height % 8 != 0 || shape.width % 8 != 0) {
      return Status::InvalidArgument("cifar-cnn needs image sides that are multiples of 8");
    }
    m.net = std::make_shared<CifarCnn>(shape);
  } else if (name == "fc-dnn") {
    m.net = std::make_shared<FcDnn>(shape);
  } else if (name == "char-lstm") {
    m.net = std::make_shared<CharLstm>(shape);
    m.text = true;
  } else {
    return Status::InvalidArgument("unknown model '" + name +
                                   "' (expected mnist-cnn, cifar-cnn, fc-dnn or char-lstm)");
  }
  for (auto& item : m.net->named_parameters()) {
    Param p;
    p.name = item.key();
    p.tensor = item.value();
    p.elements = p.tensor.numel();
    bool bias = p.name.find("bias") != std::string::npos;
    if (p.name.rfind("embed", 0) == 0) {
      p.type = LayerType::kOther;
      p.init_bound = -1.0f;
    } else if (p.name.rfind("lstm", 0) == 0) {
      p.type = bias ? LayerType::kOther : LayerType::kLstm;
      p.init_bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.hidden)));
    } else {
      p.type = bias ? LayerType::kOther
                    : (p.name.rfind("conv", 0) == 0 ? LayerType::kConv : LayerType::kFc);
      p.init_bound = 0.0f;  // set below from the layer's fan-in
    }
    m.params.push_back(p);
  }
  // Conv / linear: uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and
  // bias (torch's default); a bias takes the fan-in of the weight before it.
  float last_bound = 0.1f;
  for (auto& p : m.params) {
    if (p.init_bound != 0.0f) continue;
    if (EndsWith(p.name, "weight")) {
      int64_t fan_in = p.tensor.numel() / p.tensor.size(0);
      last_bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)));
    }
    p.init_bound = last_bound;
  }
  return m;
}

void InitWeights(Replica& model, uint64_t seed) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < model.params.size(); ++i) {
    auto& p = model.params[i];
    SplitMix64 rng(MixSeed(seed, 0x1234567ull + i));
    std::vector<float> values(static_cast<size_t>(p.elements));
    if (p.init_bound < 0) {
      for (auto& v : values) v = static_cast<float>(rng.Normal());
    } else {
      for (auto& v : values) v = static_cast<float>((2.0 * rng.Uniform() - 1.0) * p.init_bound);
    }
    auto src = torch::from_blob(values.data(), p.tensor.sizes(), torch::kFloat32);
    p.tensor.copy_(src);
  }
}

}  // namespace adacomp::train
