// The per-learner training loop (docs/algorithm.md sections 2, 3 and 5) and the two ways
// of hosting learners: Train() (threads in this process) and TrainLearner()
// (one learner over a caller's Communicator, e.g. MPI).
//
// One step on every learner:
//   compute     forward/backward on this learner's shard of the global batch
//   agree       AllGatherV of {first non-finite tensor or -1, loss}: if any
//               learner has a NaN/Inf the step is skipped everywhere before
//               any residue, weight or optimizer state changes
//   compress    one frame per tensor, concatenated into one message
//   communicate AllGatherV of the messages (dense: AllReduceSum of float32)
//   decompress  DecodeAccumulate of every learner's frame per tensor, in
//               rank order, into a zeroed buffer; divided by P
//   update      SGD+momentum or Adam on the averaged gradient
// All learners apply the same bytes in the same order, so replicas stay
// bit-identical; each uses one torch intra-op thread, so nothing depends on
// how many learners compute at once.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <semaphore>
#include <sstream>
#include <thread>

#include "adacomp/trainer.h"
#include "core/simd.h"
#include "checkpoint.h"
#include "data.h"
#include "models.h"
#include "rng.h"
#include "sha256.h"

namespace adacomp {
namespace train {
namespace {

static_assert(std::endian::native == std::endian::little,
              "checkpoints and digests assume a little-endian host");

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr const char* kDefaultImageDir = "/usr/share/datasets/fashion-mnist";
constexpr const char* kDefaultTextDir = "/usr/share/games/fortunes";

// ---------------------------------------------------------------- data

struct Data {
  std::string description;
  bool text = false;
  ImageSet train, test;
  float mean = 0.0f, inv_std = 1.0f;
  std::vector<uint8_t> train_text, test_text;
  int64_t seq_len = 0;
  int64_t train_count = 0, test_count = 0;
  std::vector<std::string> notes;
};

Result<std::shared_ptr<const Data>> LoadData(const TrainOptions& o) {
  auto d = std::make_shared<Data>();
  if (o.model == "char-lstm") {
    std::string path = o.data_dir.empty() ? kDefaultTextDir : o.data_dir;
    ADACOMP_ASSIGN_OR_RETURN(TextCorpus corpus, LoadTextCorpus(path));
    d->text = true;
    d->seq_len = o.seq_len;
    d->train_text = std::move(corpus.train);
    d->test_text = std::move(corpus.test);
    d->train_count = (static_cast<int64_t>(d->train_text.size()) - 1) / o.seq_len;
    d->test_count = (static_cast<int64_t>(d->test_text.size()) - 1) / o.seq_len;
    if (d->train_count < 1 || d->test_count < 1) {
      return Status::InvalidArgument(path + ": too little text for sequences of " +
                                     std::to_string(o.seq_len) + " characters");
    }
    d->description = "text:" + path + " (" + std::to_string(corpus.files.size()) + " files)";
  } else {
    bool cifar = o.model == "cifar-cnn" && !o.data_dir.empty() && LooksLikeCifarDir(o.data_dir);
    if (cifar) {
      ADACOMP_ASSIGN_OR_RETURN(d->train, LoadCifarDir(o.data_dir, true));
      ADACOMP_ASSIGN_OR_RETURN(d->test, LoadCifarDir(o.data_dir, false));
      d->description = "cifar-10";
    } else {
      std::string dir = o.data_dir.empty() ? kDefaultImageDir : o.data_dir;
      ADACOMP_ASSIGN_OR_RETURN(d->train, LoadMnistDir(dir, true));
      ADACOMP_ASSIGN_OR_RETURN(d->test, LoadMnistDir(dir, false));
      d->description = o.data_dir.empty() ? "fashion-mnist" : "idx:" + dir;
      if (o.model == "cifar-cnn") {
        d->train = PadTo32x32x3(d->train);
        d->test = PadTo32x32x3(d->test);
        d->description += "-32x32x3";
        d->notes.push_back(
            "cifar-cnn: no CIFAR-10 batches given (--data-dir DIR with data_batch_1.bin): "
            "training on " +
            d->description + " (28x28 images padded to 32x32, repeated over 3 channels)");
      }
    }
    d->train_count = d->train.count;
    d->test_count = d->test.count;
  }
  if (o.train_limit > 0) d->train_count = std::min(d->train_count, o.train_limit);
  if (o.test_limit > 0) d->test_count = std::min(d->test_count, o.test_limit);
  if (!d->text) {
    // Normalise with the mean and standard deviation of the training pixels used.
    double sum = 0, sum2 = 0;
    size_t n = static_cast<size_t>(d->train_count * d->train.image_bytes());
    for (size_t i = 0; i < n; ++i) {
      double v = d->train.pixels[i] / 255.0;
      sum += v;
      sum2 += v * v;
    }
    double mean = sum / static_cast<double>(n);
    double var = std::max(sum2 / static_cast<double>(n) - mean * mean, 1e-6);
    d->mean = static_cast<float>(mean);
    d->inv_std = static_cast<float>(1.0 / std::sqrt(var));
  }
  return std::shared_ptr<const Data>(std::move(d));
}

// Builds the inputs and targets of examples idx[0..n).
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

// ---------------------------------------------------------------- options

std::string ShortDouble(double v) {
  char b[32];
  std::snprintf(b, sizeof(b), "%g", v);
  return b;
}

double DefaultLr(const std::string& model, const std::string& optimizer) {
  if (optimizer == "adam") return model == "char-lstm" ? 2e-3 : 1e-3;
  if (model == "char-lstm") return 1.0;
  if (model == "fc-dnn") return 0.05;
  return 0.02;
}

Result<TrainOptions> Resolve(const TrainOptions& in) {
  TrainOptions o = in;
  auto bad = [](const std::string& m) { return Status::InvalidArgument(m); };
  auto names = ModelNames();
  if (std::find(names.begin(), names.end(), o.model) == names.end()) {
    return bad("--model '" + o.model + "' is unknown (expected mnist-cnn, cifar-cnn, fc-dnn or " +
               "char-lstm)");
  }
  if (o.learners < 1 || o.learners > 4096) return bad("--learners must be between 1 and 4096");
  if (o.batch_size < o.learners) {
    return bad("--batch-size " + std::to_string(o.batch_size) + " is smaller than --learners " +
               std::to_string(o.learners));
  }
  if (o.batch_size % o.learners != 0) {
    return bad("--batch-size " + std::to_string(o.batch_size) +
               " is not a multiple of --learners " + std::to_string(o.learners) +
               " (every learner takes an equal shard)");
  }
  if (o.steps < 0) return bad("--steps must be >= 0");
  if (o.steps == 0 && o.epochs < 1) return bad("--epochs must be >= 1");
  if (o.optimizer != "sgd" && o.optimizer != "adam") {
    return bad("--optimizer '" + o.optimizer + "' is unknown (expected sgd or adam)");
  }
  if (o.lr == 0) o.lr = DefaultLr(o.model, o.optimizer);
  if (!(o.lr > 0) || !std::isfinite(o.lr)) return bad("--lr must be a positive number");
  if (o.momentum < 0 || o.momentum >= 1) return bad("--momentum must be in [0, 1)");
  if (o.weight_decay < 0) return bad("--weight-decay must be >= 0");
  if (!(o.lr_decay_factor > 0)) return bad("--lr-decay-factor must be > 0");
  if (o.threads < 0) return bad("--threads must be >= 0");
  if (o.log_every < 1) return bad("--log-every must be >= 1");
  if (o.max_bad_steps < 1) return bad("--max-bad-steps must be >= 1");
  if (o.checkpoint_every < 0) return bad("--checkpoint-every must be >= 0");
  if (o.resume && o.checkpoint_dir.empty()) return bad("--resume needs --checkpoint-dir");
  if (o.keep_checkpoints < 1) return bad("--keep-checkpoints must be >= 1");
  if (o.seq_len < 2 || o.seq_len > 4096) return bad("--seq-len must be between 2 and 4096");
  if (o.hidden < 1 || o.embed < 1) return bad("--hidden and --embed must be >= 1");
  Status codec_ok = o.codec.Validate();
  if (!codec_ok.ok()) return bad(codec_ok.message());
  for (const auto& inj : o.inject_nan) {
    if (inj.learner < 0 || inj.learner >= o.learners || inj.step < 0 || inj.tensor < 0) {
      return bad("a NaN injection names a learner, step or tensor that does not exist");
    }
  }
  return o;
}

// Settings a checkpoint must agree with to be resumed.
std::string Fingerprint(const TrainOptions& o, const std::string& data) {
  std::ostringstream s;
  s.precision(17);
  s << "model=" << o.model << ";data=" << data << ";codec=" << CodecName(o.codec.codec)
    << ";values=" << ValueModeName(o.codec.values) << ";density=" << o.codec.density
    << ";tau=" << o.codec.tau << ";codec_seed=" << o.codec.seed << ";bin=" << o.bin_size
    << ";learners=" << o.learners << ";batch=" << o.batch_size << ";seed=" << o.seed
    << ";optimizer=" << o.optimizer << ";lr=" << o.lr << ";momentum=" << o.momentum
    << ";wd=" << o.weight_decay << ";betas=" << o.adam_beta1 << "," << o.adam_beta2
    << ";eps=" << o.adam_eps << ";decay=" << o.lr_decay_factor << "@";
  for (auto e : o.lr_decay_epochs) s << e << ",";
  s << ";train_limit=" << o.train_limit << ";seq=" << o.seq_len << ";hidden=" << o.hidden
    << ";embed=" << o.embed;
  return s.str();
}

// ---------------------------------------------------------------- helpers

// Limits how many learner threads compute at once (never held across a collective).
class Gate {
 public:
  explicit Gate(int slots) : sem_(slots) {}
  void Acquire() { sem_.acquire(); }
  void Release() { sem_.release(); }

 private:
  std::counting_semaphore<4096> sem_;
};

class GateHold {
 public:
  explicit GateHold(Gate* g) : g_(g) {
    if (g_) g_->Acquire();
  }
  ~GateHold() {
    if (g_) g_->Release();
  }
  GateHold(const GateHold&) = delete;
  GateHold& operator=(const GateHold&) = delete;

 private:
  Gate* g_;
};

// Byte and selection counts per layer type.
struct Totals {
  uint64_t wire[kLayerTypeCount] = {};
  uint64_t dense[kLayerTypeCount] = {};
  uint64_t selected[kLayerTypeCount] = {};
  uint64_t bins[kLayerTypeCount] = {};
  void Add(const Totals& o) {
    for (int t = 0; t < kLayerTypeCount; ++t) {
      wire[t] += o.wire[t];
      dense[t] += o.dense[t];
      selected[t] += o.selected[t];
      bins[t] += o.bins[t];
    }
  }
  uint64_t WireAll() const { return wire[0] + wire[1] + wire[2] + wire[3]; }
  uint64_t DenseAll() const { return dense[0] + dense[1] + dense[2] + dense[3]; }
  void Rates(const bool present[], std::optional<double> (&rate)[kLayerTypeCount],
             double* end_to_end) const {
    for (int t = 0; t < kLayerTypeCount; ++t) {
      rate[t] = (present[t] && wire[t] > 0)
                    ? std::optional<double>(static_cast<double>(dense[t]) / wire[t])
                    : std::nullopt;
    }
    *end_to_end = WireAll() ? static_cast<double>(DenseAll()) / WireAll() : 0.0;
  }
  void SelectedPerBin(std::optional<double> (&out)[kLayerTypeCount]) const {
    for (int t = 0; t < kLayerTypeCount; ++t) {
      out[t] = bins[t] ? std::optional<double>(static_cast<double>(selected[t]) / bins[t])
                       : std::nullopt;
    }
  }
};

class ByteWriter {
 public:
  template <typename T>
  void Put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
  void PutBytes(std::span<const uint8_t> b) {
    Put<uint64_t>(b.size());
    bytes.insert(bytes.end(), b.begin(), b.end());
  }
  std::vector<uint8_t> bytes;
};

class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> b, std::string what) : b_(b), what_(std::move(what)) {}
  template <typename T>
  Status Get(T* v) {
    if (b_.size() - pos_ < sizeof(T)) return Status::Corruption(what_ + " is truncated");
    std::memcpy(v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::OK();
  }
  Status GetBytes(std::span<const uint8_t>* out) {
    uint64_t n = 0;
    ADACOMP_RETURN_IF_ERROR(Get(&n));
    if (b_.size() - pos_ < n) return Status::Corruption(what_ + " is truncated");
    *out = b_.subspan(pos_, n);
    pos_ += n;
    return Status::OK();
  }
  bool AtEnd() const { return pos_ == b_.size(); }

 private:
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
  std::string what_;
};

// ---------------------------------------------------------------- learner

struct Timing {
  double compute = 0, compress = 0, communicate = 0, decompress = 0, update = 0;
};

class Learner {
 public:
  Learner(const TrainOptions& o, Communicator& comm, std::shared_ptr<const Data> data, Gate* gate)
      : o_(o),
        comm_(comm),
        data_(std::move(data)),
        gate_(gate),
        rank_(comm.rank()),
        p_(comm.size()) {}

  Result<TrainSummary> Run();

 private:
  Status Setup();
  Status Resume();
  Status SaveCheckpoint();
  Status DoStep(int64_t step, StepMetrics* m);
  void TestHookNote(const char* what, int64_t step) const;
  Status Evaluate(double* accuracy, double* loss);
  void Message(const std::string& m) const {
    if (rank_ != 0) return;
    if (o_.on_message) {
      o_.on_message(m);
    } else {
      std::fprintf(stderr, "%s\n", m.c_str());
    }
  }
  double LrAt(int64_t epoch) const {
    double lr = o_.lr;
    for (auto e : o_.lr_decay_epochs) {
      if (epoch >= e) lr *= o_.lr_decay_factor;
    }
    return lr;
  }
  bool Dense() const { return o_.codec.codec == Codec::kDense; }
  std::vector<uint8_t> CompressorStates() const;
  std::vector<uint8_t> OptimizerState() const;
  Status LoadOptimizerState(std::span<const uint8_t> bytes, const std::string& origin);
  std::string WeightsDigest() const;
  std::string StateDigest() const;
  std::vector<uint8_t> WeightsBytes() const;
  Status SetWeights(std::span<const uint8_t> bytes, const std::string& origin);
  void ApplyUpdate(double lr);

  TrainOptions o_;
  Communicator& comm_;
  std::shared_ptr<const Data> data_;
  Gate* gate_;
  int rank_, p_;

  Model model_;
  std::vector<std::unique_ptr<Compressor>> compressors_;
  std::vector<uint32_t> bin_sizes_;
  std::vector<size_t> offsets_;  // of each tensor in the flat gradient buffer
  size_t total_elements_ = 0;
  std::vector<float> agg_;  // the averaged gradient, flat
  std::vector<std::span<const uint8_t>> frame_spans_;  // per learner, the current tensor's frame
  std::vector<FrameInfo> frame_infos_;
  std::vector<torch::Tensor> agg_views_;
  std::vector<torch::Tensor> buf1_, buf2_;  // momentum / Adam moments
  int64_t adam_step_ = 0;
  bool present_[kLayerTypeCount] = {};
  std::string fingerprint_;

  int64_t steps_per_epoch_ = 0, total_steps_ = 0;
  int64_t steps_done_ = 0, skipped_ = 0, consecutive_bad_ = 0, resumed_from_ = -1;
  std::vector<int64_t> perm_;
  int64_t perm_epoch_ = -1;

  Totals run_totals_, epoch_totals_;
  double epoch_loss_sum_ = 0;
  int64_t epoch_loss_count_ = 0;
  double window_loss_sum_ = 0;
  int64_t window_loss_count_ = 0;
  double last_window_loss_ = NAN;
  Timing timing_;
  std::vector<uint8_t> message_;
  GatheredBuffers gathered_;
  std::vector<EpochMetrics> epochs_;
  std::unique_ptr<std::ofstream> metrics_file_;
};

Status Learner::Setup() {
  ModelShape shape;
  if (data_->text) {
    shape.vocab = 256;
    shape.embed = o_.embed;
    shape.hidden = o_.hidden;
  } else {
    shape.channels = data_->train.channels;
    shape.height = data_->train.height;
    shape.width = data_->train.width;
    shape.classes = data_->train.classes;
  }
  ADACOMP_ASSIGN_OR_RETURN(model_, CreateModel(o_.model, shape));
  InitWeights(model_, o_.seed);
  fingerprint_ = Fingerprint(o_, data_->description);
  for (const auto& inj : o_.inject_nan) {
    if (inj.tensor >= static_cast<int>(model_.params.size())) {
      return Status::InvalidArgument("a NaN injection names tensor " + std::to_string(inj.tensor) +
                                     "; the model has " + std::to_string(model_.params.size()));
    }
  }
  // Weights start from rank 0's.
  std::vector<uint8_t> w = WeightsBytes();
  ADACOMP_RETURN_IF_ERROR(comm_.Broadcast(w, 0));
  ADACOMP_RETURN_IF_ERROR(SetWeights(w, "rank 0's initial weights"));

  for (size_t t = 0; t < model_.params.size(); ++t) {
    const Param& p = model_.params[t];
    present_[static_cast<int>(p.type)] = true;
    offsets_.push_back(total_elements_);
    total_elements_ += static_cast<size_t>(p.elements);
    uint32_t bin = o_.bin_size ? o_.bin_size : DefaultBinSize(p.type);
    bin_sizes_.push_back(bin);
    if (!Dense()) {
      CodecConfig c = o_.codec;
      c.bin_size = bin;
      c.seed = MixSeed(MixSeed(o_.codec.seed ^ o_.seed, static_cast<uint64_t>(rank_)), t);
      ADACOMP_ASSIGN_OR_RETURN(auto comp, Compressor::Create(c, static_cast<uint32_t>(t),
                                                             static_cast<uint64_t>(p.elements)));
      compressors_.push_back(std::move(comp));
    }
    buf1_.push_back(torch::zeros_like(p.tensor).detach());
    if (o_.optimizer == "adam") buf2_.push_back(torch::zeros_like(p.tensor).detach());
  }
  agg_.assign(total_elements_, 0.0f);
  for (size_t t = 0; t < model_.params.size(); ++t) {
    agg_views_.push_back(torch::from_blob(agg_.data() + offsets_[t],
                                          model_.params[t].tensor.sizes(), torch::kFloat32));
  }
  steps_per_epoch_ = data_->train_count / o_.batch_size;
  if (steps_per_epoch_ < 1) {
    return Status::InvalidArgument("--batch-size " + std::to_string(o_.batch_size) +
                                   " exceeds the " + std::to_string(data_->train_count) +
                                   " training examples");
  }
  total_steps_ = o_.steps > 0 ? o_.steps : o_.epochs * steps_per_epoch_;
  return Status::OK();
}

std::vector<uint8_t> Learner::WeightsBytes() const {
  std::vector<uint8_t> out;
  for (const auto& p : model_.params) {
    auto c = p.tensor.detach().contiguous();
    const auto* b = reinterpret_cast<const uint8_t*>(c.data_ptr<float>());
    out.insert(out.end(), b, b + c.numel() * sizeof(float));
  }
  return out;
}

Status Learner::SetWeights(std::span<const uint8_t> bytes, const std::string& origin) {
  size_t need = 0;
  for (const auto& p : model_.params) need += static_cast<size_t>(p.elements) * sizeof(float);
  if (bytes.size() != need) {
    return Status::Corruption(origin + ": " + std::to_string(bytes.size()) +
                              " bytes of weights, the model needs " + std::to_string(need));
  }
  torch::NoGradGuard no_grad;
  size_t pos = 0;
  for (auto& p : model_.params) {
    size_t n = static_cast<size_t>(p.elements) * sizeof(float);
    std::memcpy(p.tensor.data_ptr<float>(), bytes.data() + pos, n);
    pos += n;
  }
  return Status::OK();
}

std::string Learner::WeightsDigest() const {
  Sha256 h;
  for (const auto& p : model_.params) {
    auto c = p.tensor.detach().contiguous();
    h.Update(c.data_ptr<float>(), static_cast<size_t>(c.numel()) * sizeof(float));
  }
  return h.HexDigest();
}

std::vector<uint8_t> Learner::CompressorStates() const {
  ByteWriter w;
  w.Put<uint64_t>(compressors_.size());
  for (const auto& c : compressors_) w.PutBytes(c->SaveState());
  return std::move(w.bytes);
}

std::vector<uint8_t> Learner::OptimizerState() const {
  ByteWriter w;
  w.Put<int64_t>(adam_step_);
  w.Put<uint64_t>(buf1_.size() + buf2_.size());
  for (const auto* bufs : {&buf1_, &buf2_}) {
    for (const auto& b : *bufs) {
      w.PutBytes(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(b.data_ptr<float>()),
                                          static_cast<size_t>(b.numel()) * sizeof(float)));
    }
  }
  return std::move(w.bytes);
}

Status Learner::LoadOptimizerState(std::span<const uint8_t> bytes, const std::string& origin) {
  ByteReader r(bytes, origin + ": optimizer state");
  int64_t step = 0;
  uint64_t count = 0;
  ADACOMP_RETURN_IF_ERROR(r.Get(&step));
  ADACOMP_RETURN_IF_ERROR(r.Get(&count));
  if (count != buf1_.size() + buf2_.size()) {
    return Status::Corruption(origin + ": optimizer state has " + std::to_string(count) +
                              " buffers, expected " + std::to_string(buf1_.size() + buf2_.size()));
  }
  std::vector<std::span<const uint8_t>> parts(count);
  size_t k = 0;
  for (auto* bufs : {&buf1_, &buf2_}) {
    for (auto& b : *bufs) {
      ADACOMP_RETURN_IF_ERROR(r.GetBytes(&parts[k]));
      if (parts[k].size() != static_cast<size_t>(b.numel()) * sizeof(float)) {
        return Status::Corruption(origin + ": optimizer buffer " + std::to_string(k) +
                                  " has the wrong size");
      }
      ++k;
    }
  }
  k = 0;
  for (auto* bufs : {&buf1_, &buf2_}) {
    for (auto& b : *bufs) {
      std::memcpy(b.data_ptr<float>(), parts[k].data(), parts[k].size());
      ++k;
    }
  }
  adam_step_ = step;
  return Status::OK();
}

std::string Learner::StateDigest() const {
  Sha256 h;
  h.Update(CompressorStates());
  h.Update(OptimizerState());
  return h.HexDigest();
}

std::vector<uint8_t> TotalsBytes(const Totals& t) {
  ByteWriter w;
  for (int k = 0; k < kLayerTypeCount; ++k) {
    w.Put(t.wire[k]);
    w.Put(t.dense[k]);
    w.Put(t.selected[k]);
    w.Put(t.bins[k]);
  }
  return std::move(w.bytes);
}

Status ReadTotals(std::span<const uint8_t> b, const std::string& what, Totals* t) {
  ByteReader r(b, what);
  for (int k = 0; k < kLayerTypeCount; ++k) {
    ADACOMP_RETURN_IF_ERROR(r.Get(&t->wire[k]));
    ADACOMP_RETURN_IF_ERROR(r.Get(&t->dense[k]));
    ADACOMP_RETURN_IF_ERROR(r.Get(&t->selected[k]));
    ADACOMP_RETURN_IF_ERROR(r.Get(&t->bins[k]));
  }
  return Status::OK();
}

Status Learner::SaveCheckpoint() {
  std::vector<uint8_t> mine = CompressorStates();
  GatheredBuffers all;
  ADACOMP_RETURN_IF_ERROR(comm_.AllGatherV(mine, &all));
  uint8_t ok = 1;
  Status write_status;
  if (rank_ == 0) {
    CheckpointBuilder b;
    b.AddString("fingerprint", fingerprint_);
    b.AddU64("steps_done", static_cast<uint64_t>(steps_done_));
    b.AddU64("epoch", static_cast<uint64_t>(steps_done_ / steps_per_epoch_));
    b.AddU64("position_in_epoch", static_cast<uint64_t>(steps_done_ % steps_per_epoch_));
    b.AddU64("shuffle_seed", o_.seed);
    b.AddU64("skipped", static_cast<uint64_t>(skipped_));
    b.AddU64("consecutive_bad", static_cast<uint64_t>(consecutive_bad_));
    b.Add("weights", WeightsBytes());
    b.Add("optimizer", OptimizerState());
    for (int r = 0; r < p_; ++r) b.Add("compressors/" + std::to_string(r), all.rank(r));
    b.Add("totals/run", TotalsBytes(run_totals_));
    b.Add("totals/epoch", TotalsBytes(epoch_totals_));
    ByteWriter loss;
    loss.Put(epoch_loss_sum_);
    loss.Put(epoch_loss_count_);
    b.Add("epoch_loss", loss.bytes);
    write_status =
        SaveCheckpointFile(o_.checkpoint_dir, steps_done_, b.Serialize(), o_.keep_checkpoints);
    ok = write_status.ok() ? 1 : 0;
  }
  ADACOMP_RETURN_IF_ERROR(comm_.Broadcast(std::span<uint8_t>(&ok, 1), 0));
  if (!ok) {
    return rank_ == 0 ? write_status : Status::Aborted("rank 0 could not write the checkpoint");
  }
  return Status::OK();
}

Status Learner::Resume() {
  int64_t size = -2;  // -2: no checkpoint, -1: error on rank 0
  std::vector<uint8_t> image;
  Status rank0_error;
  if (rank_ == 0) {
    auto list = ListCheckpoints(o_.checkpoint_dir);
    std::string newest_error;
    for (const auto& [step, path] : list) {
      auto bytes = ReadWholeFile(path);
      Status st = bytes.ok() ? Status::OK() : bytes.status();
      if (st.ok()) {
        auto view = CheckpointView::Parse(*bytes, path);
        if (view.ok()) {
          auto fp = view->GetString("fingerprint");
          if (!fp.ok() || *fp != fingerprint_) {
            rank0_error = Status::InvalidArgument(
                path + ": written by a run with different settings; checkpoint has [" +
                (fp.ok() ? *fp : std::string("?")) + "], this run has [" + fingerprint_ + "]");
            size = -1;
            break;
          }
          image = std::move(*bytes);
          size = static_cast<int64_t>(image.size());
          break;
        }
        st = view.status();
      }
      if (newest_error.empty()) newest_error = st.ToString();
      Message("warning: " + st.ToString() + "; trying the previous checkpoint");
    }
    if (size == -2 && !list.empty()) {
      rank0_error = Status::Corruption("no usable checkpoint in " + o_.checkpoint_dir + " (" +
                                       std::to_string(list.size()) +
                                       " found, none valid; newest: " + newest_error + ")");
      size = -1;
    }
    if (size == -2) Message("note: no checkpoint in " + o_.checkpoint_dir + "; starting at step 0");
  }
  ADACOMP_RETURN_IF_ERROR(
      comm_.Broadcast(std::span<uint8_t>(reinterpret_cast<uint8_t*>(&size), sizeof(size)), 0));
  if (size == -1) {
    return rank_ == 0 ? rank0_error : Status::Aborted("rank 0 could not load a checkpoint");
  }
  if (size == -2) return Status::OK();
  image.resize(static_cast<size_t>(size));
  ADACOMP_RETURN_IF_ERROR(comm_.Broadcast(image, 0));
  ADACOMP_ASSIGN_OR_RETURN(CheckpointView view, CheckpointView::Parse(image, "checkpoint"));
  ADACOMP_ASSIGN_OR_RETURN(uint64_t done, view.GetU64("steps_done"));
  ADACOMP_ASSIGN_OR_RETURN(uint64_t skipped, view.GetU64("skipped"));
  ADACOMP_ASSIGN_OR_RETURN(uint64_t bad, view.GetU64("consecutive_bad"));
  ADACOMP_ASSIGN_OR_RETURN(uint64_t epoch, view.GetU64("epoch"));
  ADACOMP_ASSIGN_OR_RETURN(uint64_t pos, view.GetU64("position_in_epoch"));
  if (epoch != done / static_cast<uint64_t>(steps_per_epoch_) ||
      pos != done % static_cast<uint64_t>(steps_per_epoch_)) {
    return Status::Corruption("checkpoint: data position does not match its step count");
  }
  ADACOMP_ASSIGN_OR_RETURN(auto weights, view.Get("weights"));
  ADACOMP_RETURN_IF_ERROR(SetWeights(weights, "checkpoint"));
  ADACOMP_ASSIGN_OR_RETURN(auto opt, view.Get("optimizer"));
  ADACOMP_RETURN_IF_ERROR(LoadOptimizerState(opt, "checkpoint"));
  ADACOMP_ASSIGN_OR_RETURN(auto comp, view.Get("compressors/" + std::to_string(rank_)));
  ByteReader r(comp, "checkpoint: compressor state of learner " + std::to_string(rank_));
  uint64_t count = 0;
  ADACOMP_RETURN_IF_ERROR(r.Get(&count));
  if (count != compressors_.size()) {
    return Status::Corruption("checkpoint: compressor count does not match the model");
  }
  for (auto& c : compressors_) {
    std::span<const uint8_t> state;
    ADACOMP_RETURN_IF_ERROR(r.GetBytes(&state));
    ADACOMP_RETURN_IF_ERROR(c->LoadState(state).WithContext("checkpoint: learner " +
                                                            std::to_string(rank_) + " tensor " +
                                                            std::to_string(c->tensor_id())));
  }
  ADACOMP_ASSIGN_OR_RETURN(auto run_totals, view.Get("totals/run"));
  ADACOMP_RETURN_IF_ERROR(ReadTotals(run_totals, "checkpoint totals", &run_totals_));
  ADACOMP_ASSIGN_OR_RETURN(auto epoch_totals, view.Get("totals/epoch"));
  ADACOMP_RETURN_IF_ERROR(ReadTotals(epoch_totals, "checkpoint totals", &epoch_totals_));
  ADACOMP_ASSIGN_OR_RETURN(auto loss, view.Get("epoch_loss"));
  ByteReader lr(loss, "checkpoint epoch loss");
  ADACOMP_RETURN_IF_ERROR(lr.Get(&epoch_loss_sum_));
  ADACOMP_RETURN_IF_ERROR(lr.Get(&epoch_loss_count_));
  steps_done_ = static_cast<int64_t>(done);
  skipped_ = static_cast<int64_t>(skipped);
  consecutive_bad_ = static_cast<int64_t>(bad);
  resumed_from_ = steps_done_;
  Message("resumed from the checkpoint at step " + std::to_string(steps_done_));
  return Status::OK();
}

void Learner::ApplyUpdate(double lr) {
  torch::NoGradGuard no_grad;
  const bool adam = o_.optimizer == "adam";
  if (adam) ++adam_step_;
  for (size_t t = 0; t < model_.params.size(); ++t) {
    torch::Tensor p = model_.params[t].tensor;
    torch::Tensor g = agg_views_[t];
    if (o_.weight_decay > 0) g = g.add(p, o_.weight_decay);
    if (adam) {
      double b1 = o_.adam_beta1, b2 = o_.adam_beta2;
      buf1_[t].mul_(b1).add_(g, 1.0 - b1);
      buf2_[t].mul_(b2).addcmul_(g, g, 1.0 - b2);
      double bc1 = 1.0 - std::pow(b1, static_cast<double>(adam_step_));
      double bc2 = 1.0 - std::pow(b2, static_cast<double>(adam_step_));
      auto denom = (buf2_[t].sqrt() / std::sqrt(bc2)).add_(o_.adam_eps);
      p.addcdiv_(buf1_[t], denom, -lr / bc1);
    } else if (o_.momentum > 0) {
      buf1_[t].mul_(o_.momentum).add_(g);
      p.add_(buf1_[t], -lr);
    } else {
      p.add_(g, -lr);
    }
  }
}

// Failure-test hooks say what they do and when (wall clock, seconds since the
// epoch), so a test can measure how long the job takes to stop.
void Learner::TestHookNote(const char* what, int64_t step) const {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::fprintf(stderr, "adacomp: test hook: learner %d %s at step %lld (t=%.3f)\n", rank_, what,
               static_cast<long long>(step), now);
  std::fflush(stderr);
}

Status Learner::DoStep(int64_t step, StepMetrics* m) {
  const int64_t b = o_.batch_size / p_;
  const int64_t epoch = step / steps_per_epoch_;
  const int64_t pos = step % steps_per_epoch_;
  if (epoch != perm_epoch_) {
    perm_ = EpochPermutation(data_->train_count, o_.seed, epoch);
    perm_epoch_ = epoch;
  }
  const double lr = LrAt(epoch);
  m->step = step + 1;
  m->epoch = epoch;
  m->lr = lr;
  auto step_start = Clock::now();
  Timing t;
  if (rank_ == o_.kill_rank && step == o_.kill_at_step) {
    TestHookNote("kills itself (SIGKILL)", step);
    std::raise(SIGKILL);
  }

  // Compute this learner's gradient.
  int32_t bad_tensor = -1;
  double loss_value = 0;
  {
    GateHold hold(gate_);
    auto t0 = Clock::now();
    torch::Tensor x, y;
    FillBatch(*data_, true, perm_.data() + pos * o_.batch_size + rank_ * b, b, &x, &y);
    for (auto& p : model_.params) {
      if (p.tensor.grad().defined()) p.tensor.mutable_grad().zero_();
    }
    auto loss = Loss(model_.net->Forward(x), y, false);
    loss.backward();
    loss_value = loss.item<double>();
    for (size_t k = 0; k < model_.params.size(); ++k) {
      auto& p = model_.params[k];
      if (!p.tensor.grad().defined()) p.tensor.mutable_grad() = torch::zeros_like(p.tensor);
      for (const auto& inj : o_.inject_nan) {
        if (inj.step == step && inj.learner == rank_ && inj.tensor == static_cast<int>(k)) {
          p.tensor.mutable_grad().view({-1})[0] = std::numeric_limits<float>::quiet_NaN();
        }
      }
      auto g = p.tensor.grad();
      if (FindNonFinite(
              std::span<const float>(g.data_ptr<float>(), static_cast<size_t>(g.numel())))) {
        bad_tensor = static_cast<int32_t>(k);
        break;
      }
    }
    t.compute = Since(t0);
  }

  // Agree on whether every learner's gradient is finite; share the losses.
  auto t1 = Clock::now();
  ByteWriter status_msg;
  status_msg.Put<int32_t>(bad_tensor);
  status_msg.Put<int32_t>(0);
  status_msg.Put<double>(loss_value);
  GatheredBuffers statuses;
  ADACOMP_RETURN_IF_ERROR(comm_.AllGatherV(status_msg.bytes, &statuses));
  t.communicate += Since(t1);
  std::vector<std::pair<int, int32_t>> bad;
  double loss_sum = 0;
  for (int r = 0; r < p_; ++r) {
    auto s = statuses.rank(r);
    if (s.size() != 16)
      return Status::Internal("learner " + std::to_string(r) + " sent a bad status");
    int32_t bt;
    double lv;
    std::memcpy(&bt, s.data(), 4);
    std::memcpy(&lv, s.data() + 8, 8);
    if (bt >= 0) bad.emplace_back(r, bt);
    loss_sum += lv;
  }
  m->loss = loss_sum / p_;
  if (!bad.empty()) {
    ++skipped_;
    ++consecutive_bad_;
    m->skipped = true;
    m->loss = NAN;
    std::string where;
    for (auto [r, bt] : bad) {
      const auto& name = bt < static_cast<int32_t>(model_.params.size())
                             ? model_.params[static_cast<size_t>(bt)].name
                             : std::string("?");
      if (!where.empty()) where += "; ";
      where += "learner " + std::to_string(r) + ", layer " + name;
    }
    Message("warning: step " + std::to_string(step + 1) + ": non-finite gradient (" + where +
            "): step skipped on every learner (" + std::to_string(consecutive_bad_) +
            " in a row; the run stops at " + std::to_string(o_.max_bad_steps) + ")");
    if (consecutive_bad_ >= o_.max_bad_steps) {
      return Status::InvalidArgument("stopping: " + std::to_string(consecutive_bad_) +
                                     " consecutive steps with non-finite gradients (last at step " +
                                     std::to_string(step + 1) + ": " + where +
                                     "); lower --lr or check the data");
    }
    m->step_seconds = Since(step_start);
    return Status::OK();
  }
  consecutive_bad_ = 0;

  Totals step_totals;
  const size_t n_tensors = model_.params.size();
  if (Dense()) {
    {
      GateHold hold(gate_);
      auto t2 = Clock::now();
      for (size_t k = 0; k < n_tensors; ++k) {
        auto g = model_.params[k].tensor.grad();
        std::memcpy(agg_.data() + offsets_[k], g.data_ptr<float>(),
                    static_cast<size_t>(g.numel()) * sizeof(float));
      }
      t.compress = Since(t2);
    }
    auto t3 = Clock::now();
    ADACOMP_RETURN_IF_ERROR(comm_.AllReduceSum(agg_));
    t.communicate += Since(t3);
    GateHold hold(gate_);
    auto t4 = Clock::now();
    // x / P, vectorized (a range-for over agg_ compiled to one scalar divss
    // per element); the same bits as the sparse path's DecodeAverageAll.
    internal::DivideFloats(agg_.data(), agg_.size(), static_cast<float>(p_));
    for (size_t k = 0; k < n_tensors; ++k) {
      int type = static_cast<int>(model_.params[k].type);
      uint64_t bytes = static_cast<uint64_t>(model_.params[k].elements) * 4 * p_;
      step_totals.wire[type] += bytes;
      step_totals.dense[type] += bytes;
      step_totals.selected[type] += static_cast<uint64_t>(model_.params[k].elements) * p_;
    }
    t.decompress = Since(t4);
  } else {
    {
      GateHold hold(gate_);
      auto t2 = Clock::now();
      message_.clear();
      for (size_t k = 0; k < n_tensors; ++k) {
        auto g = model_.params[k].tensor.grad();
        Status st = compressors_[k]->Compress(
            std::span<const float>(g.data_ptr<float>(), static_cast<size_t>(g.numel())), &message_);
        if (!st.ok()) return st.WithContext("compressing " + model_.params[k].name);
      }
      t.compress = Since(t2);
    }
    if (rank_ == o_.corrupt_rank && step == o_.corrupt_at_step && !message_.empty()) {
      TestHookNote("flips one byte of its message", step);
      message_[message_.size() / 2] ^= 0x10;  // a frame damaged in transit
    }
    auto t3 = Clock::now();
    ADACOMP_RETURN_IF_ERROR(comm_.AllGatherV(message_, &gathered_));
    t.communicate += Since(t3);
    GateHold hold(gate_);
    auto t4 = Clock::now();
    if (gathered_.ranks() != static_cast<size_t>(p_)) {
      return Status::Internal("all-gather returned " + std::to_string(gathered_.ranks()) +
                              " messages for " + std::to_string(p_) + " learners");
    }
    // Per tensor, the average of every learner's frame in one call: all
    // frames validated before anything is written, then dst walked once in
    // cache-sized blocks (zeroed, the frames added in rank order, divided
    // by P), the same bits as zeroing, adding frame after frame and dividing.
    std::vector<size_t> cursor(static_cast<size_t>(p_), 0);
    frame_spans_.resize(static_cast<size_t>(p_));
    frame_infos_.resize(static_cast<size_t>(p_));
    const bool adacomp = o_.codec.codec == Codec::kAdaComp;
    for (size_t k = 0; k < n_tensors; ++k) {
      const Param& prm = model_.params[k];
      int type = static_cast<int>(prm.type);
      std::span<float> dst(agg_.data() + offsets_[k], static_cast<size_t>(prm.elements));
      DecodeOptions opts;
      opts.expected_tensor_id = static_cast<uint32_t>(k);
      opts.max_elements = static_cast<uint64_t>(prm.elements);
      for (int r = 0; r < p_; ++r) frame_spans_[r] = gathered_.rank(r).subspan(cursor[r]);
      size_t bad = 0;
      Status st = DecodeAverageAll(frame_spans_, dst, frame_infos_, opts, &bad);
      if (!st.ok()) {
        return st.WithContext("learner " + std::to_string(bad) + "'s frame for tensor " +
                              std::to_string(k) + " (" + prm.name + ")");
      }
      for (int r = 0; r < p_; ++r) {
        const FrameInfo& info = frame_infos_[r];
        cursor[r] += info.frame_bytes;
        step_totals.wire[type] += info.frame_bytes;
        step_totals.dense[type] += static_cast<uint64_t>(prm.elements) * 4;
        step_totals.selected[type] += info.selected;
        if (adacomp) {
          step_totals.bins[type] +=
              (static_cast<uint64_t>(prm.elements) + bin_sizes_[k] - 1) / bin_sizes_[k];
        }
      }
    }
    for (int r = 0; r < p_; ++r) {
      if (cursor[r] != gathered_.rank(r).size()) {
        return Status::Corruption("learner " + std::to_string(r) + "'s message has " +
                                  std::to_string(gathered_.rank(r).size() - cursor[r]) +
                                  " bytes after its last frame");
      }
    }
    t.decompress = Since(t4);
  }
  {
    auto t5 = Clock::now();
    GateHold hold(gate_);
    ApplyUpdate(lr);
    t.update = Since(t5);
  }

  run_totals_.Add(step_totals);
  epoch_totals_.Add(step_totals);
  epoch_loss_sum_ += m->loss;
  ++epoch_loss_count_;
  window_loss_sum_ += m->loss;
  ++window_loss_count_;
  m->bytes_sent = step_totals.WireAll();
  m->dense_bytes = step_totals.DenseAll();
  step_totals.Rates(present_, m->rate, &m->end_to_end_rate);
  step_totals.SelectedPerBin(m->selected_per_bin);
  m->compute_s = t.compute;
  m->compress_s = t.compress;
  m->communicate_s = t.communicate;
  m->decompress_s = t.decompress;
  m->update_s = t.update;
  m->step_seconds = Since(step_start);
  timing_.compute += t.compute;
  timing_.compress += t.compress;
  timing_.communicate += t.communicate;
  timing_.decompress += t.decompress;
  timing_.update += t.update;
  return Status::OK();
}

Status Learner::Evaluate(double* accuracy, double* loss) {
  const int64_t n = data_->test_count;
  const int64_t lo = n * rank_ / p_, hi = n * (rank_ + 1) / p_;
  double correct = 0, loss_sum = 0, count = 0;
  {
    GateHold hold(gate_);
    torch::NoGradGuard no_grad;
    const int64_t batch = data_->text ? 32 : 250;
    std::vector<int64_t> idx;
    for (int64_t start = lo; start < hi; start += batch) {
      int64_t len = std::min(batch, hi - start);
      idx.resize(static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i) idx[static_cast<size_t>(i)] = start + i;
      torch::Tensor x, y;
      FillBatch(*data_, false, idx.data(), len, &x, &y);
      auto logits = model_.net->Forward(x);
      loss_sum += Loss(logits, y, true).item<double>();
      correct += logits.argmax(-1).eq(y).sum().item<double>();
      count += static_cast<double>(y.numel());
    }
  }
  ByteWriter w;
  w.Put(correct);
  w.Put(loss_sum);
  w.Put(count);
  GatheredBuffers all;
  ADACOMP_RETURN_IF_ERROR(comm_.AllGatherV(w.bytes, &all));
  double c = 0, l = 0, k = 0;
  for (int r = 0; r < p_; ++r) {
    auto s = all.rank(r);
    if (s.size() != 24) return Status::Internal("bad evaluation message");
    double v[3];
    std::memcpy(v, s.data(), 24);
    c += v[0];
    l += v[1];
    k += v[2];
  }
  *accuracy = k > 0 ? c / k : 0;
  *loss = k > 0 ? l / k : 0;
  return Status::OK();
}

Result<TrainSummary> Learner::Run() {
  auto run_start = Clock::now();
  ADACOMP_RETURN_IF_ERROR(Setup());
  if (rank_ == 0) {
    for (const auto& note : data_->notes) Message("note: " + note);
    int64_t params = 0;
    for (const auto& p : model_.params) params += p.elements;
    Message("training " + o_.model + " (" + std::to_string(params) + " parameters in " +
            std::to_string(model_.params.size()) + " tensors) on " + data_->description + " (" +
            std::to_string(data_->train_count) + " train / " + std::to_string(data_->test_count) +
            " test examples): " + std::to_string(p_) + " learners, " +
            std::string(CodecName(o_.codec.codec)) + ", " + o_.optimizer + " lr " +
            ShortDouble(o_.lr) + ", global batch " + std::to_string(o_.batch_size) + ", " +
            std::to_string(total_steps_) + " steps (" + std::to_string(steps_per_epoch_) +
            " per epoch)");
  }
  if (o_.resume) ADACOMP_RETURN_IF_ERROR(Resume());
  if (rank_ == 0 && !o_.metrics_out.empty()) {
    auto mode = (resumed_from_ > 0) ? std::ios::app : std::ios::trunc;
    metrics_file_ = std::make_unique<std::ofstream>(o_.metrics_out, std::ios::out | mode);
    if (!*metrics_file_) {
      return Status::IOError(o_.metrics_out + ": cannot open for writing");
    }
  }
  bool evaluated_at_end = false;
  bool stopped_early = false;
  const bool checkpoints = !o_.checkpoint_dir.empty();
  while (steps_done_ < total_steps_) {
    StepMetrics m;
    m.total_steps = total_steps_;
    Status st = DoStep(steps_done_, &m);
    if (!st.ok()) return st;
    ++steps_done_;
    evaluated_at_end = false;
    m.elapsed_seconds = Since(run_start);
    const bool last = steps_done_ == total_steps_;
    if (rank_ == 0) {
      if (metrics_file_ && (steps_done_ % o_.log_every == 0 || last)) {
        *metrics_file_ << m.ToJson() << "\n";
        metrics_file_->flush();
      }
      if (o_.on_step) o_.on_step(m);
    }
    if (steps_done_ % o_.log_every == 0 || last) {
      if (window_loss_count_ > 0) last_window_loss_ = window_loss_sum_ / window_loss_count_;
      window_loss_sum_ = 0;
      window_loss_count_ = 0;
    }
    const bool epoch_end = steps_done_ % steps_per_epoch_ == 0;
    const bool extra_eval = o_.eval_every > 0 && steps_done_ % o_.eval_every == 0;
    if (epoch_end || extra_eval || last) {
      EpochMetrics e;
      e.epoch = (steps_done_ - 1) / steps_per_epoch_;
      e.step = steps_done_;
      e.end_of_epoch = epoch_end;
      ADACOMP_RETURN_IF_ERROR(Evaluate(&e.test_accuracy, &e.test_loss));
      e.train_loss = epoch_loss_count_ ? epoch_loss_sum_ / epoch_loss_count_ : NAN;
      epoch_totals_.Rates(present_, e.rate, &e.end_to_end_rate);
      epochs_.push_back(e);
      if (rank_ == 0 && o_.on_epoch) o_.on_epoch(e);
      if (epoch_end) {
        epoch_totals_ = Totals();
        epoch_loss_sum_ = 0;
        epoch_loss_count_ = 0;
      }
      evaluated_at_end = true;
    }
    if (checkpoints && (epoch_end || last ||
                        (o_.checkpoint_every > 0 && steps_done_ % o_.checkpoint_every == 0))) {
      ADACOMP_RETURN_IF_ERROR(SaveCheckpoint());
    }
    if (o_.stop_after_steps > 0 && steps_done_ >= o_.stop_after_steps && !last) {
      stopped_early = true;
      break;
    }
  }

  TrainSummary s;
  if (!evaluated_at_end && !stopped_early) {
    EpochMetrics e;
    ADACOMP_RETURN_IF_ERROR(Evaluate(&e.test_accuracy, &e.test_loss));
    s.test_accuracy = e.test_accuracy;
    s.test_loss = e.test_loss;
  } else if (!epochs_.empty()) {
    s.test_accuracy = epochs_.back().test_accuracy;
    s.test_loss = epochs_.back().test_loss;
  }
  // Every learner's weights and state digests, and time split.
  std::string digest = WeightsDigest();
  std::string state_digest = StateDigest();
  ByteWriter w;
  w.PutBytes(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(digest.data()), 64));
  w.PutBytes(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(state_digest.data()), 64));
  for (double v : {timing_.compute, timing_.compress, timing_.communicate, timing_.decompress,
                   timing_.update}) {
    w.Put(v);
  }
  GatheredBuffers all;
  ADACOMP_RETURN_IF_ERROR(comm_.AllGatherV(w.bytes, &all));
  s.replicas_identical = true;
  Timing mean;
  for (int r = 0; r < p_; ++r) {
    ByteReader rd(all.rank(r), "summary message");
    std::span<const uint8_t> d1, d2;
    ADACOMP_RETURN_IF_ERROR(rd.GetBytes(&d1));
    ADACOMP_RETURN_IF_ERROR(rd.GetBytes(&d2));
    s.learner_weights_sha256.emplace_back(d1.begin(), d1.end());
    s.learner_state_sha256.emplace_back(d2.begin(), d2.end());
    if (s.learner_weights_sha256.back() != digest) s.replicas_identical = false;
    double v[5];
    for (double& x : v) ADACOMP_RETURN_IF_ERROR(rd.Get(&x));
    mean.compute += v[0] / p_;
    mean.compress += v[1] / p_;
    mean.communicate += v[2] / p_;
    mean.decompress += v[3] / p_;
    mean.update += v[4] / p_;
  }
  s.model = o_.model;
  s.data = data_->description;
  s.compressor = std::string(CodecName(o_.codec.codec));
  s.values = o_.codec.codec == Codec::kAdaComp ? std::string(ValueModeName(o_.codec.values)) : "";
  s.optimizer = o_.optimizer;
  s.learners = p_;
  s.batch_size = o_.batch_size;
  s.steps = steps_done_;
  s.skipped_steps = skipped_;
  s.resumed_from_step = resumed_from_;
  s.steps_per_epoch = steps_per_epoch_;
  s.epochs = static_cast<double>(steps_done_) / static_cast<double>(steps_per_epoch_);
  s.lr = o_.lr;
  s.seed = o_.seed;
  if (o_.codec.codec != Codec::kAdaComp) {
    s.bin_size = "n/a";
  } else if (o_.bin_size) {
    s.bin_size = std::to_string(o_.bin_size);
  } else {
    s.bin_size = "per layer type: conv 50, fc 500, lstm 500, other (biases, embeddings) 500";
  }
  for (const auto& p : model_.params) s.parameters += p.elements;
  s.tensors = static_cast<int64_t>(model_.params.size());
  s.train_examples = data_->train_count;
  s.test_examples = data_->test_count;
  s.final_train_loss = last_window_loss_;
  run_totals_.Rates(present_, s.rate, &s.end_to_end_rate);
  run_totals_.SelectedPerBin(s.selected_per_bin);
  s.bytes_sent = run_totals_.WireAll();
  s.dense_bytes = run_totals_.DenseAll();
  s.wall_seconds = Since(run_start);
  s.compute_seconds = mean.compute;
  s.compress_seconds = mean.compress;
  s.communicate_seconds = mean.communicate;
  s.decompress_seconds = mean.decompress;
  s.update_seconds = mean.update;
  int64_t ran = steps_done_ - std::max<int64_t>(resumed_from_, 0);
  s.seconds_per_step = ran > 0 ? s.wall_seconds / static_cast<double>(ran) : 0;
  s.weights_sha256 = digest;
  s.epoch_metrics = epochs_;
  s.stopped_early = stopped_early;
  if (o_.keep_weights) {
    auto bytes = WeightsBytes();
    s.weights.resize(bytes.size() / sizeof(float));
    std::memcpy(s.weights.data(), bytes.data(), bytes.size());
  }
  return s;
}

Result<TrainSummary> RunLearner(const TrainOptions& o, Communicator& comm,
                                std::shared_ptr<const Data> data, Gate* gate) {
  // One intra-op thread per learner: results do not depend on thread counts.
  at::init_num_threads();
  at::set_num_threads(1);
  try {
    Learner learner(o, comm, std::move(data), gate);
    auto result = learner.Run();
    if (!result.ok() && result.status().code() != StatusCode::kAborted) {
      comm.Abort(result.status());
    }
    return result;
  } catch (const std::exception& e) {
    Status st =
        Status::Internal(std::string("learner ") + std::to_string(comm.rank()) + ": " + e.what());
    comm.Abort(st);
    return st;
  }
}

}  // namespace
}  // namespace train

Status ValidateTrainOptions(const TrainOptions& options) {
  return train::Resolve(options).status();
}

Result<TrainSummary> Train(const TrainOptions& options) {
  ADACOMP_ASSIGN_OR_RETURN(TrainOptions o, train::Resolve(options));
  ADACOMP_ASSIGN_OR_RETURN(auto data, train::LoadData(o));
  auto group = CreateInProcessGroup(o.learners);
  if (static_cast<int>(group.size()) != o.learners) {
    return Status::Internal("could not create an in-process group of " +
                            std::to_string(o.learners));
  }
  int slots = o.threads > 0 ? o.threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  train::Gate gate(std::min(slots, 4096));
  std::vector<std::optional<Result<TrainSummary>>> results(static_cast<size_t>(o.learners));
  std::vector<std::thread> threads;
  for (int r = 0; r < o.learners; ++r) {
    threads.emplace_back([&, r] {
      results[static_cast<size_t>(r)] =
          train::RunLearner(o, *group[static_cast<size_t>(r)], data, &gate);
    });
  }
  for (auto& t : threads) t.join();
  // The root cause: the first error that is not another learner's abort.
  const Status* first = nullptr;
  for (auto& r : results) {
    if (r->ok()) continue;
    StatusCode c = r->status().code();
    if (c != StatusCode::kAborted && c != StatusCode::kUnavailable) return r->status();
    if (!first) first = &r->status();
  }
  if (first) return *first;
  return std::move(*results[0]);
}

Result<TrainSummary> TrainLearner(const TrainOptions& options, Communicator& comm) {
  ADACOMP_ASSIGN_OR_RETURN(TrainOptions o, train::Resolve(options));
  if (comm.size() != o.learners) {
    return Status::InvalidArgument("--learners " + std::to_string(o.learners) +
                                   " does not match the " + std::to_string(comm.size()) +
                                   " processes of the communicator");
  }
  ADACOMP_ASSIGN_OR_RETURN(auto data, train::LoadData(o));
  return train::RunLearner(o, comm, std::move(data), nullptr);
}

}  // namespace adacomp
