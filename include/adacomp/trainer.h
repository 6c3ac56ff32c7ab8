// adacomp/trainer.h: data-parallel training with compressed gradient exchange.
//
// Train() runs P learners in this process (one thread each, each with its own
// model replica, its own shard of every global minibatch, its own compressor
// per parameter tensor and its own Communicator from CreateInProcessGroup).
// TrainLearner() runs ONE learner over a caller-supplied Communicator (for
// example MPI, one learner per process); both call the same per-learner loop,
// so a run gives the same weights whichever way its learners are hosted.
//
// `adacomp train` uses Train(), or TrainLearner() over the MPI communicator
// when mpirun started it; both end with the same weights for the same
// options (the collectives sum in rank order either way).
//
// This header does not include LibTorch; the implementation (libadacomp_train)
// does. Thread safety: Train() may be called from any thread; the callbacks
// in TrainOptions::run are called from rank 0's learner thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/communicator.h"
#include "adacomp/exchange.h"
#include "adacomp/schedule.h"
#include "adacomp/status.h"

namespace adacomp {

// The models the trainer builds. Stable values; the names are what the CLI,
// the summary and checkpoint fingerprints use.
enum class Model : uint8_t {
  kMnistCnn = 0,  // "mnist-cnn": CNN for 28x28x1 images
  kCifarCnn = 1,  // "cifar-cnn": CNN for 32x32x3 images
  kFcDnn = 2,     // "fc-dnn": fully-connected DNN on flattened images
  kCharLstm = 3,  // "char-lstm": character-level 2-layer LSTM
};
std::string_view ModelName(Model model);
Result<Model> ParseModel(std::string_view name);  // inverse of ModelName
std::vector<std::string> ModelNames();            // mnist-cnn, cifar-cnn, fc-dnn, char-lstm

enum class Optimizer : uint8_t {
  kSgd = 0,   // "sgd": SGD with momentum and weight decay
  kAdam = 1,  // "adam"
};
std::string_view OptimizerName(Optimizer optimizer);
Result<Optimizer> ParseOptimizer(std::string_view name);  // inverse of OptimizerName

// One logged step, as written to --metrics-out (all learners together).
struct StepMetrics {
  int64_t step = 0;   // 1-based count of steps done
  int64_t epoch = 0;  // 0-based epoch of this step
  double loss = 0;    // mean training loss over the global minibatch
  double lr = 0;
  // Rank 0's local gradient L2 norm over all tensors, before any
  // --clip-grad-norm (NaN or Inf for a non-finite gradient).
  double grad_norm = 0;
  bool skipped = false;      // non-finite gradient: step skipped everywhere
  uint64_t bytes_sent = 0;   // wire bytes of all learners this step
  uint64_t dense_bytes = 0;  // 4 x elements x learners
  // What rank 0's communicator sent and received in this step's exchange
  // (Communicator::traffic(): the bytes on the wire, TCP/IP framing aside).
  uint64_t transport_sent_bytes = 0, transport_received_bytes = 0;
  // Compression rate (32-bit bytes / bytes sent) per layer type and end to
  // end, this step; nullopt where the model has no such layer.
  std::optional<double> rate[kLayerTypeCount];
  double end_to_end_rate = 0;
  // Mean selected elements per bin per layer type (adacomp only).
  std::optional<double> selected_per_bin[kLayerTypeCount];
  // Rank 0's time split of this step, seconds.
  double compute_s = 0, compress_s = 0, communicate_s = 0, decompress_s = 0, update_s = 0;
  double step_seconds = 0;
  double elapsed_seconds = 0;  // since the start of the run
  int64_t total_steps = 0;
  // TrainOptions::run.link_counters: the interface's cumulative byte counters
  // when this step's line was written; -1 without it.
  int64_t link_rx_bytes = -1, link_tx_bytes = -1;
  std::string ToJson() const;  // one line, no newline
};

struct EpochMetrics {
  int64_t epoch = 0;  // 0-based
  int64_t step = 0;   // steps done at the end of the epoch
  double test_accuracy = 0;
  double test_loss = 0;   // mean cross entropy per example (per character for char-lstm)
  double train_loss = 0;  // mean training loss over the epoch's steps
  std::optional<double> rate[kLayerTypeCount];  // over the epoch
  double end_to_end_rate = 0;
  bool end_of_epoch = true;  // false for the extra evaluations of eval_every
  // Wall-clock seconds this learner spent in training steps up to here
  // (evaluations and checkpoints excluded; since the start, or since the
  // resume): the clock for time-to-accuracy.
  double train_seconds = 0;
};

// TrainOptions::model: what is trained, on which data.
struct TrainModelOptions {
  Model kind = Model::kMnistCnn;
  std::string data_dir;  // "" = the model's default data
  // char-lstm
  int64_t seq_len = 48;
  int64_t hidden = 128;
  int64_t embed = 32;
};

// TrainOptions::codec: how each learner compresses its gradients and how
// the frames travel.
struct TrainCodecOptions {
  CodecConfig config;     // codec, values, density, tau, seed; bin_size see below
  uint32_t bin_size = 0;  // 0 = per layer type (DefaultBinSize); else all tensors
  // Per layer type (indexed by LayerType): > 0 overrides bin_size and the
  // default for that type's tensors.
  uint32_t bin_size_by_type[kLayerTypeCount] = {0, 0, 0, 0};
  // adacomp: the bin size as a function of the step (adacomp/schedule.h):
  // a ramp up to the bin sizes above, and the adaptive lightening; off by
  // default (the paper's fixed L_T).
  BinSchedule bin_schedule;
  // How compressed frames travel (adacomp/exchange.h): every learner
  // receives all of them, or each slice's pieces go to its owner and the
  // averaged slices are all-gathered. The same averaged bits either way, so
  // not in the fingerprint.
  ExchangeKind exchange = ExchangeKind::kAllGather;
  // The reduce-scatter's averaged slices (ExchangeOptions::summed_values):
  // kFp32 exact, kFp16 binary16 (other bits than the all-gather's, so in
  // the fingerprint when a reduce-scatter can run).
  ValueMode summed_values = ValueMode::kFp32;
  // Options beside the paper's default (0 = off; docs/results.md measures
  // them): tensors of at most dense_below elements are sent dense (float32
  // frames, no residue), whatever the codec; the first dense_warmup_steps
  // steps are exchanged dense (the ring all-reduce) with every residue
  // untouched, and the codec starts after them with empty residues.
  int64_t dense_below = 0;
  int64_t dense_warmup_steps = 0;
  // Each learner runs the optimizer's moments on its own gradient and
  // compresses the resulting step instead of the gradient; the averaged step
  // is applied without further moments (adacomp/local_optimizer.h). SGD:
  // its velocity, with the velocity of sent elements zeroed (momentum
  // correction, as in Deep Gradient Compression); Adam: its Adam step.
  // false = the paper's optimizer after aggregation.
  bool local_optimizer = false;
  // With local_optimizer and SGD: false leaves the velocity of sent elements
  // as it is (no momentum correction), so every gradient's whole momentum
  // reaches the weights, however late its element is sent; the residue then
  // holds the part of each step not yet sent. true zeroes it (above).
  bool local_mask = true;
  // The `auto` codec (--codec auto; ExchangeOptions::auto_dense): each step
  // goes by the codec above or as the dense float32 all-reduce of gradient
  // plus residue, whichever this run's measured step times say is faster
  // (dense first; adacomp/speed_choice.h). With local_optimizer a dense
  // step sends each learner's step plus its residue and masks nothing (the
  // DDP hook's rule). Not with dense_warmup_steps or a bin schedule.
  bool auto_dense = false;
  SpeedChoiceOptions speed;
  // With local_optimizer: bit (1 << LayerType) set = that type's tensors run
  // the optimizer on the learner, the others the paper's optimizer after
  // aggregation; 0 (or every bit) = every tensor.
  uint32_t local_optimizer_types = 0;
};

// TrainOptions::optim: the optimizer and its learning-rate schedule.
struct TrainOptimizerOptions {
  Optimizer kind = Optimizer::kSgd;
  double lr = 0;  // 0 = the model's default
  double momentum = 0.9;
  double weight_decay = 0.0;
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_eps = 1e-8;
  std::vector<int64_t> lr_decay_epochs;  // multiply lr by lr_decay_factor at each
  double lr_decay_factor = 0.1;
  // > 0: a linear learning-rate warm-up, step t (0-based) at
  // lr x min(1, (t + 1) / lr_warmup_steps), as large-batch training uses;
  // 0 = off.
  int64_t lr_warmup_steps = 0;
  // > 0: each learner scales its own gradient, before the exchange, so that
  // its L2 norm over all tensors is at most this (the usual guard of
  // recurrent models against exploding gradients); 0 = off. A non-finite
  // gradient is left as it is for the NaN policy.
  double clip_grad_norm = 0;
};

// TrainOptions::run: how many learners run how long, and what the run
// reads and writes besides the data (metrics, checkpoints, callbacks).
struct TrainRunOptions {
  int learners = 4;
  int64_t batch_size = 128;  // global; must be a multiple of learners
  int64_t epochs = 1;
  int64_t steps = 0;  // > 0: run exactly this many steps (overrides epochs)
  uint64_t seed = 1;
  int threads = 0;          // learners computing at once in-process; 0 = hardware cores
  int64_t train_limit = 0;  // > 0: use only the first N training examples
  int64_t test_limit = 0;   // > 0: evaluate on the first N test examples
  int64_t eval_every = 0;   // > 0: also evaluate every N steps
  // > 0: end the run at the first evaluation (epoch end, eval_every, last
  // step) whose test accuracy reaches it (time-to-accuracy runs); every
  // learner sees the same accuracy, so all stop at the same step.
  double stop_at_accuracy = 0;
  int max_bad_steps = 10;   // consecutive non-finite steps before the run fails
  int64_t log_every = 20;   // metrics/progress every N steps (and the last step)
  std::string metrics_out;  // JSONL path, "" = none
  // A network interface ("eth0"), "" = none: each metrics line also gets
  // rank 0's host's byte counters of that interface (Linux
  // /sys/class/net/IFACE/statistics), so that the bytes that crossed the
  // link between two lines can be set beside the exchange's own figure.
  std::string link_counters;
  // JSONL path, "" = none: rank 0's residue diagnostics per tensor every
  // log_every steps (src/train/diagnostics.h); codecs with a residue only.
  std::string diagnostics_out;
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;  // > 0: also every N steps (always every epoch end)
  int keep_checkpoints = 2;
  bool resume = false;
  // Callbacks (rank 0 only).
  std::function<void(const StepMetrics&)> on_step;
  std::function<void(const EpochMetrics&)> on_epoch;
  std::function<void(const std::string&)> on_message;  // warnings, notes; default stderr
};

// Everything a training run is given, in four groups (options.model.kind,
// options.codec.bin_size, options.optim.lr, options.run.learners, ...). The
// defaults: mnist-cnn, AdaComp with per-layer bin sizes, SGD with momentum
// 0.9, 4 learners, a global batch of 128, one epoch.
struct TrainOptions {
  TrainModelOptions model;
  TrainCodecOptions codec;
  TrainOptimizerOptions optim;
  TrainRunOptions run;
};

struct TrainSummary {
  std::string model, data, codec, optimizer, values;
  int learners = 0;
  int64_t batch_size = 0;
  int64_t steps = 0;  // steps done (skipped included)
  int64_t skipped_steps = 0;
  int64_t resumed_from_step = -1;
  double epochs = 0;
  int64_t steps_per_epoch = 0;
  double lr = 0;
  uint64_t seed = 0;
  std::string bin_size;      // "per-layer (conv 50, fc/lstm/other 500)" or the value
  std::string bin_schedule;  // BinSchedule::ToString(): "fixed" or the schedule; "n/a" without bins
  std::string exchange;      // ExchangeKindName of TrainOptions::codec.exchange
  std::string summed_values;  // "fp32" or "fp16" (TrainOptions::codec.summed_values)
  // Compressed tensors x steps that went by each exchange, over the steps
  // run in this process (auto chooses per tensor and step).
  int64_t allgather_tensor_steps = 0, reduce_scatter_tensor_steps = 0;
  // Adaptive schedule: steps x tensors that were sent lightened.
  int64_t lightened_tensor_steps = 0;
  // auto: the steps (run in this process) that went dense and by the
  // codec, and what it settled on, when ("step 9: auto: codec, ...").
  bool auto_codec = false;
  int64_t auto_dense_steps = 0, auto_codec_steps = 0;
  std::vector<std::string> auto_choices;
  int64_t dense_below = 0, dense_warmup_steps = 0;  // as in TrainOptions
  double clip_grad_norm = 0;                        // as in TrainOptions
  int64_t lr_warmup_steps = 0;                      // as in TrainOptions
  bool local_optimizer = false;                     // as in TrainOptions
  bool local_mask = false;  // the local SGD zeroed the velocity of sent elements
  // The layer types whose tensors ran the local optimizer ("conv", "fc",
  // ...; all four when every tensor did); empty without it.
  std::vector<std::string> local_optimizer_types;
  int64_t dense_tensors = 0;  // tensors sent dense by dense_below
  int64_t parameters = 0;
  int64_t tensors = 0;
  int64_t train_examples = 0, test_examples = 0;
  double test_accuracy = 0;
  double test_loss = 0;                         // per example (per char for char-lstm)
  double final_train_loss = 0;                  // mean loss of the last logged window
  std::optional<double> rate[kLayerTypeCount];  // over all learners and steps
  double end_to_end_rate = 0;
  uint64_t bytes_sent = 0, dense_bytes = 0;
  // The exchange's bytes on the wire per step per learner, as each
  // learner's communicator counted them (Communicator::traffic(): every
  // collective of the step, TCP/IP framing aside), over the steps run in
  // this process: the mean over learners of bytes sent and received, and the
  // busiest learner's larger of the two. A ring all-reduce moves
  // 2 (P-1)/P of the gradient each way; an all-gather of frames brings
  // every learner the other P - 1 learners' frames.
  double transport_sent_per_step = 0, transport_received_per_step = 0,
         transport_busiest_per_step = 0;
  std::optional<double> selected_per_bin[kLayerTypeCount];
  double wall_seconds = 0;
  // Per-learner means of the time split, seconds over the whole run.
  double compute_seconds = 0, compress_seconds = 0, communicate_seconds = 0, decompress_seconds = 0,
         update_seconds = 0;
  double seconds_per_step = 0;
  // Every learner's own time split (seconds, rank order): {compute,
  // compress, communicate, decompress, update}. The slowest learner is the
  // one with the most busy time (all but communicate): the others wait for
  // it in communicate.
  std::vector<std::vector<double>> learner_seconds;
  int slowest_learner = 0;
  std::string weights_sha256;                       // rank 0's final weights
  std::vector<std::string> learner_weights_sha256;  // every learner's
  bool replicas_identical = false;
  // SHA-256 of every learner's compressor states and optimizer state.
  std::vector<std::string> learner_state_sha256;
  std::vector<EpochMetrics> epoch_metrics;
  bool stopped_early = false;  // test hook stop_after_steps hit
  // With stop_at_accuracy: the step and the training seconds (steps only,
  // EpochMetrics::train_seconds) of the evaluation that reached it; -1 when
  // none did.
  int64_t reached_accuracy_step = -1;
  double reached_accuracy_seconds = -1;
  std::string ToJson() const;  // pretty-printed object
};

// Checks the options alone (no data read): InvalidArgument naming the
// option, or OK. Train() and TrainLearner() check the same things.
Status ValidateTrainOptions(const TrainOptions& options);

// Runs options.run.learners learners in this process.
Result<TrainSummary> Train(const TrainOptions& options);

// Runs the learner of comm.rank() in a group of comm.size() learners
// (options.run.learners must equal comm.size()). Every rank returns the summary.
Result<TrainSummary> TrainLearner(const TrainOptions& options, Communicator& comm);

}  // namespace adacomp
