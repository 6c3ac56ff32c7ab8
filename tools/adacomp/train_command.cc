// The `adacomp train` subcommand: data-parallel training with compressed
// gradient exchange (adacomp/trainer.h). Parses options, shows progress (a
// live line on a terminal, plain periodic lines otherwise), prints per-epoch
// test accuracy and compression rates and a final summary table, and writes
// --metrics-out / --summary-out. Exit status: 0 success, 1 bad data or a
// failed run, 2 bad options.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/mpi_communicator.h"
#include "adacomp/trainer.h"
#include "cli_util.h"
#include "commands.h"
#include "train/test_hooks.h"
#include "train_report.h"

namespace adacomp::tool {
namespace {

constexpr const char* kCmd = "train";

struct TrainArgs {
  TrainOptions o;
  TrainTestHooks hooks;
  std::string model = "mnist-cnn";
  std::string optimizer = "sgd";
  std::string compressor = "adacomp";
  std::string values = "ternary";
  std::string lr_decay_epochs;
  std::string bin_sizes;
  std::string exchange = "allgather";
  std::string summed_values = "fp32";
  std::string local_optimizer_types;
  std::string summary_out;
  std::vector<std::string> inject_nan;
  std::string test_kill_rank, test_stop_rank, test_corrupt_frame, test_slow_rank;
  bool quiet = false;
  CLI::Option* epochs_opt = nullptr;
  CLI::Option* learners_opt = nullptr;
  double mpi_timeout = 600;
  double mpi_heartbeat = 20;
};

bool ParseRankStep(const std::string& text, int* rank, int64_t* step) {
  int r = 0;
  long long st = 0;
  char extra = 0;
  if (std::sscanf(text.c_str(), "%d:%lld%c", &r, &st, &extra) != 2 || r < 0 || st < 0) {
    return false;
  }
  *rank = r;
  *step = st;
  return true;
}

// "2,4" -> {2, 4}
Result<std::vector<int64_t>> ParseEpochList(const std::string& text) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto v = ParseCount(item, "--lr-decay-epochs");
    if (!v.ok()) return v.status();
    out.push_back(static_cast<int64_t>(*v));
  }
  return out;
}

// "conv=50,lstm=100" -> o->codec.bin_size_by_type
Status ParseBinSizes(const std::string& text, TrainOptions* o) {
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      return Status::InvalidArgument("--bin-sizes: '" + item + "' is not TYPE=L_T");
    }
    auto type = ParseLayerType(item.substr(0, eq));
    if (!type.ok()) {
      return Status::InvalidArgument("--bin-sizes: unknown layer type '" + item.substr(0, eq) +
                                     "' (expected conv, fc, lstm or other)");
    }
    auto v = ParseCount(item.substr(eq + 1), "--bin-sizes");
    if (!v.ok()) return v.status();
    if (*v < 1 || *v > 0xffffffffull) {
      return Status::InvalidArgument("--bin-sizes: L_T of " + item.substr(0, eq) +
                                     " must be between 1 and 4294967295");
    }
    o->codec.bin_size_by_type[static_cast<int>(*type)] = static_cast<uint32_t>(*v);
  }
  return Status::OK();
}

// "fc,other" -> o->codec.local_optimizer_types (and the local optimizer on).
Status ParseLocalTypes(const std::string& text, TrainOptions* o) {
  if (text.empty()) return Status::OK();
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto type = ParseLayerType(item);
    if (!type.ok()) {
      return Status::InvalidArgument("--local-optimizer-types: unknown layer type '" + item +
                                     "' (expected conv, fc, lstm or other)");
    }
    o->codec.local_optimizer_types |= 1u << static_cast<int>(*type);
  }
  o->codec.local_optimizer = true;
  return Status::OK();
}

// The options that set TrainOptions (model, optimizer, codec, values, lr
// decay, bin sizes, exchange, local optimizer types) into a.o. Returns
// kExitOk, or Fail's exit status.
int ParseTrainOptions(TrainArgs& a) {
  TrainOptions& o = a.o;
  auto model = ParseModel(a.model);
  if (!model.ok()) return Fail(kCmd, kExitBadUsage, model.status().message());
  o.model.kind = *model;
  auto optimizer = ParseOptimizer(a.optimizer);
  if (!optimizer.ok()) return Fail(kCmd, kExitBadUsage, optimizer.status().message());
  o.optim.kind = *optimizer;
  // auto: AdaComp or the dense all-reduce, step by step, by measured times.
  o.codec.auto_dense = a.compressor == "auto";
  auto codec = ParseCodec(o.codec.auto_dense ? "adacomp" : a.compressor);
  if (!codec.ok()) {
    return Fail(kCmd, kExitBadUsage,
                "--codec: unknown '" + a.compressor +
                    "' (expected dense, adacomp, auto, topk, threshold, onebit or terngrad)");
  }
  o.codec.config.codec = *codec;
  auto values = ParseValueMode(a.values);
  if (!values.ok()) {
    return Fail(kCmd, kExitBadUsage,
                "--values: unknown '" + a.values + "' (expected ternary, fp16 or fp32)");
  }
  o.codec.config.values = *values;
  auto decay = ParseEpochList(a.lr_decay_epochs);
  if (!decay.ok()) return Fail(kCmd, kExitBadUsage, decay.status().message());
  o.optim.lr_decay_epochs = *decay;
  if (Status st = ParseBinSizes(a.bin_sizes, &o); !st.ok()) {
    return Fail(kCmd, kExitBadUsage, st.message());
  }
  auto exchange = ParseExchangeKind(a.exchange);
  if (!exchange.ok())
    return Fail(kCmd, kExitBadUsage, "--exchange: " + exchange.status().message());
  o.codec.exchange = *exchange;
  if (a.summed_values != "fp32" && a.summed_values != "fp16") {
    return Fail(kCmd, kExitBadUsage,
                "--summed-values: fp32 or fp16, not '" + a.summed_values + "'");
  }
  o.codec.summed_values = a.summed_values == "fp16" ? ValueMode::kFp16 : ValueMode::kFp32;
  if (Status st = ParseLocalTypes(a.local_optimizer_types, &o); !st.ok()) {
    return Fail(kCmd, kExitBadUsage, st.message());
  }
  return kExitOk;
}

// The hidden test hooks (--inject-nan, --test-*-rank, --test-corrupt-frame)
// into a.hooks. Returns kExitOk, or Fail's exit status.
int ParseTestHooks(TrainArgs& a) {
  TrainTestHooks& hooks = a.hooks;
  for (const auto& spec : a.inject_nan) {
    NanInjection inj;
    long long s = 0;
    int l = 0, t = 0;
    char extra = 0;
    if (std::sscanf(spec.c_str(), "%lld:%d:%d%c", &s, &l, &t, &extra) != 3) {
      return Fail(kCmd, kExitBadUsage, "--inject-nan: '" + spec + "' is not STEP:LEARNER:TENSOR");
    }
    inj.step = s;
    inj.learner = l;
    inj.tensor = t;
    hooks.inject_nan.push_back(inj);
  }
  if (!a.test_slow_rank.empty()) {
    int64_t ms = 0;
    if (!ParseRankStep(a.test_slow_rank, &hooks.slow_rank, &ms) || ms > 600000) {
      return Fail(kCmd, kExitBadUsage,
                  "--test-slow-rank: '" + a.test_slow_rank + "' is not RANK:MILLISECONDS");
    }
    hooks.slow_ms = static_cast<int>(ms);
  }
  if (!a.test_kill_rank.empty() &&
      !ParseRankStep(a.test_kill_rank, &hooks.kill_rank, &hooks.kill_at_step)) {
    return Fail(kCmd, kExitBadUsage,
                "--test-kill-rank: '" + a.test_kill_rank + "' is not RANK:STEP");
  }
  if (!a.test_stop_rank.empty()) {
    if (!a.test_kill_rank.empty()) {
      return Fail(kCmd, kExitBadUsage, "--test-stop-rank and --test-kill-rank exclude each other");
    }
    if (!ParseRankStep(a.test_stop_rank, &hooks.kill_rank, &hooks.kill_at_step)) {
      return Fail(kCmd, kExitBadUsage,
                  "--test-stop-rank: '" + a.test_stop_rank + "' is not RANK:STEP");
    }
    hooks.kill_stops = true;
  }
  if (!a.test_corrupt_frame.empty() &&
      !ParseRankStep(a.test_corrupt_frame, &hooks.corrupt_rank, &hooks.corrupt_at_step)) {
    return Fail(kCmd, kExitBadUsage,
                "--test-corrupt-frame: '" + a.test_corrupt_frame + "' is not RANK:STEP");
  }
  return kExitOk;
}

// Under mpirun: one learner per process over MPI (*mpi set, --learners
// defaulting to the number of processes); otherwise *mpi stays null and
// the P learners run as threads here. Returns kExitOk, or Fail's exit
// status.
int SetUpMpi([[maybe_unused]] TrainArgs& a, [[maybe_unused]] std::unique_ptr<Communicator>* mpi) {
  if (!LaunchedUnderMpi()) return kExitOk;
#ifdef ADACOMP_HAVE_MPI_COMM
  TrainOptions& o = a.o;
  MpiOptions mo;
  mo.timeout_seconds = a.mpi_timeout;
  mo.heartbeat_seconds = a.mpi_heartbeat;
  auto made = CreateMpiCommunicator(mo);
  if (!made.ok()) return Fail(kCmd, kExitBadData, made.status().message());
  *mpi = std::move(made).value();
  if (a.learners_opt->count() == 0) o.run.learners = (*mpi)->size();
  if (o.run.learners != (*mpi)->size()) {
    return Fail(kCmd, kExitBadUsage,
                "--learners " + std::to_string(o.run.learners) + " differs from the " +
                    std::to_string((*mpi)->size()) + " MPI processes (one learner per process)");
  }
  return kExitOk;
#else
  return Fail(kCmd, kExitBadUsage,
              "started by mpirun, but this adacomp was built without the MPI communicator");
#endif
}

// Progress of a run through TrainOptions' callbacks: on stderr a live line
// (redrawn at most every 200 ms) on a terminal, plain lines every
// --log-every steps otherwise, none with --quiet; messages on stderr; one
// line per evaluation on stdout.
class Progress {
 public:
  // Sets a.o's on_message, on_step and on_epoch to this one, which must
  // outlive the run.
  explicit Progress(TrainArgs& a) : a_(a), tty_(::isatty(STDERR_FILENO) == 1 && !a.quiet) {
    a.o.run.on_message = [this](const std::string& m) {
      Clear();
      std::fprintf(stderr, "%s\n", m.c_str());
    };
    a.o.run.on_step = [this](const StepMetrics& m) { Step(m); };
    a.o.run.on_epoch = [this](const EpochMetrics& e) { Epoch(e); };
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Erases the live line, if shown.
  void Clear() {
    if (shown_) {
      std::fprintf(stderr, "\r\033[K");
      shown_ = false;
    }
  }

 private:
  void Step(const StepMetrics& m) {
    if (a_.quiet) return;
    double eta = m.step > 0 ? m.elapsed_seconds / static_cast<double>(m.step) *
                                  static_cast<double>(m.total_steps - m.step)
                            : 0;
    std::string line = "step " + std::to_string(m.step) + "/" + std::to_string(m.total_steps) +
                       "  epoch " + std::to_string(m.epoch + 1) + "  loss " +
                       (m.skipped ? std::string("skipped") : Fmt(m.loss, "%.4f")) + "  rate " +
                       Fmt(m.end_to_end_rate, "%.1fx") + "  lr " + Fmt(m.lr) + "  " +
                       Fmt(m.step_seconds, "%.3f") + " s/step  ETA " + Duration(eta);
    if (tty_) {
      auto now = std::chrono::steady_clock::now();
      if (now - last_draw_ < std::chrono::milliseconds(200) && m.step != m.total_steps) return;
      last_draw_ = now;
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
      std::fflush(stderr);
      shown_ = true;
    } else if (m.step % a_.o.run.log_every == 0 || m.step == m.total_steps) {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  }
  void Epoch(const EpochMetrics& e) {
    Clear();
    std::printf(
        "%s %lld (step %lld): test accuracy %.4f, test loss %.4f, train loss %s; "
        "compression %s\n",
        e.end_of_epoch ? "epoch" : "eval in epoch", static_cast<long long>(e.epoch + 1),
        static_cast<long long>(e.step), e.test_accuracy, e.test_loss,
        std::isfinite(e.train_loss) ? Fmt(e.train_loss, "%.4f").c_str() : "n/a",
        RatesLine(e.rate, e.end_to_end_rate).c_str());
    std::fflush(stdout);
  }

  const TrainArgs& a_;
  const bool tty_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_draw_ =
      std::chrono::steady_clock::now() - std::chrono::seconds(10);
};

// Rank 0's end of a finished run: --summary-out, the summary table, and a
// failure if the replicas differ.
int ReportSummary(const TrainArgs& a, const TrainSummary& s) {
  if (!a.summary_out.empty()) {
    std::ofstream out(a.summary_out);
    out << s.ToJson() << "\n";
    if (!out) return Fail(kCmd, kExitBadData, a.summary_out + ": cannot write the summary");
  }
  PrintTrainSummary(s);
  if (!s.replicas_identical) {
    return Fail(kCmd, kExitBadData, "learner replicas ended with different weights");
  }
  return kExitOk;
}

int RunTrain(TrainArgs& a) {
  if (int rc = ParseTrainOptions(a); rc != kExitOk) return rc;
  if (int rc = ParseTestHooks(a); rc != kExitOk) return rc;
  std::unique_ptr<Communicator> mpi;
  if (int rc = SetUpMpi(a, &mpi); rc != kExitOk) return rc;
  const bool rank0 = !mpi || mpi->rank() == 0;
  if (!rank0) a.quiet = true;
  if (Status st = ValidateTrainOptions(a.o, a.hooks); !st.ok()) {
    return Fail(kCmd, kExitBadUsage, st.message());
  }

  Progress progress(a);
  auto result = mpi ? TrainLearner(a.o, *mpi, a.hooks) : Train(a.o, a.hooks);
  progress.Clear();
  if (!result.ok()) {
    const Status& st = result.status();
    // Under MPI every rank may print: say which one.
    const std::string who =
        mpi ? "rank " + std::to_string(mpi->rank()) + " of " + std::to_string(mpi->size()) + ": "
            : std::string();
    return Fail(kCmd, kExitBadData, who + st.message());
  }
  if (!rank0) return kExitOk;
  return ReportSummary(a, *result);
}

}  // namespace

std::vector<Command> AddTrainCommands(CLI::App& root) {
  auto args = std::make_shared<TrainArgs>();
  TrainOptions& o = args->o;
  CLI::App* app = root.add_subcommand(
      "train",
      "Train a model with P learners exchanging compressed gradients (docs/algorithm.md).\n"
      "With no options: mnist-cnn on Fashion-MNIST, 4 learners, AdaComp, 1 epoch.");
  app->footer(
      "Bin sizes: conv 50, fc 500, lstm 500, other (biases, embeddings) 500 -- biases are "
      "compressed with AdaComp at L_T=500 too; --bin-size sets one L_T for every tensor.\n"
      "cifar-cnn without a CIFAR-10 directory (data_batch_1.bin ...) trains on Fashion-MNIST "
      "padded to 32x32x3.\nExit status: 0 success; 1 bad data or a failed run (the message names "
      "the file); 2 bad options.\n");
  app->add_option("--model", args->model, "mnist-cnn | cifar-cnn | fc-dnn | char-lstm")
      ->capture_default_str();
  app->add_option("--data-dir", o.model.data_dir,
                  "MNIST-layout IDX directory (default /usr/share/datasets/fashion-mnist), a "
                  "CIFAR-10 binary directory (cifar-cnn), or a text file/directory (char-lstm, "
                  "default /usr/share/games/fortunes)");
  // --codec, as in `adacomp compress` and the API (CodecConfig::codec);
  // --compressor, the name it had first, still works.
  app->add_option("--codec,--compressor", args->compressor,
                  "dense (a ring all-reduce; --values fp16 for binary16) | adacomp | auto "
                  "(adacomp or dense, step by step, whichever this run measures faster) | topk | "
                  "threshold | onebit | terngrad")
      ->capture_default_str();
  app->add_option("--auto-probe-steps", o.codec.speed.probe_steps,
                  "--codec auto: timed steps of each way per probe")
      ->capture_default_str();
  app->add_option("--auto-reprobe-every", o.codec.speed.reprobe_every,
                  "--codec auto: settled steps before the other way is timed again (0 = never)")
      ->capture_default_str();
  args->learners_opt =
      app->add_option("--learners,-P", o.run.learners,
                      "number of learners P (under mpirun: one per process, default the "
                      "number of processes)")
          ->capture_default_str();
  app->add_option("--batch-size,-B", o.run.batch_size, "global minibatch (a multiple of P)")
      ->capture_default_str();
  args->epochs_opt =
      app->add_option("--epochs", o.run.epochs, "epochs to train")->capture_default_str();
  app->add_option("--steps", o.run.steps, "train exactly this many steps instead of --epochs")
      ->excludes(args->epochs_opt);
  app->add_option("--optimizer", args->optimizer, "sgd (with momentum) | adam")
      ->capture_default_str();
  app->add_option("--lr", o.optim.lr,
                  "learning rate (default per model: sgd 0.02 CNNs, 0.05 fc-dnn, "
                  "1.0 char-lstm; adam 1e-3, 2e-3 char-lstm)");
  app->add_option("--momentum", o.optim.momentum, "SGD momentum")->capture_default_str();
  app->add_option("--weight-decay", o.optim.weight_decay, "L2 weight decay")->capture_default_str();
  app->add_option("--lr-decay-epochs", args->lr_decay_epochs,
                  "comma-separated epochs at which lr is multiplied by --lr-decay-factor");
  app->add_option("--lr-decay-factor", o.optim.lr_decay_factor)->capture_default_str();
  app->add_option("--lr-warmup-steps", o.optim.lr_warmup_steps,
                  "raise the lr linearly over the first N steps (step t at lr x (t+1)/N), as "
                  "large-batch training does; 0 = off");
  app->add_option("--bin-size", o.codec.bin_size,
                  "AdaComp L_T for every tensor (default per layer)");
  app->add_option("--bin-sizes", args->bin_sizes,
                  "AdaComp L_T per layer type, e.g. conv=50,fc=500,lstm=100,other=500 (types "
                  "left out keep --bin-size or the default)");
  BinSchedule& bs = o.codec.bin_schedule;
  app->add_option("--ramp-steps", bs.ramp_steps,
                  "AdaComp bin-size ramp: over the first N steps L_T climbs from --ramp-start "
                  "to each tensor's L_T in --ramp-stages geometric stages; 0 = off (fixed L_T)");
  app->add_option("--ramp-start", bs.ramp_start, "the ramp's first L_T")->capture_default_str();
  app->add_option("--ramp-stages", bs.ramp_stages, "the ramp's stages")->capture_default_str();
  app->add_option("--adapt-threshold", bs.adapt_threshold,
                  "adaptive bin size: a tensor whose averaged-gradient norm (mean over "
                  "--adapt-window steps) changed by this fraction, and every tensor after an "
                  "lr drop, is sent at --adapt-bin-size for --adapt-hold steps; 0 = off");
  app->add_option("--adapt-window", bs.adapt_window, "steps per window")->capture_default_str();
  app->add_option("--adapt-hold", bs.adapt_hold, "steps lightened")->capture_default_str();
  app->add_option("--adapt-bin-size", bs.adapt_bin_size, "the light L_T (0 = --ramp-start)")
      ->capture_default_str();
  app->add_option("--exchange", args->exchange,
                  "how compressed frames travel: allgather (every learner decodes every frame) "
                  "or reduce-scatter (pieces to slice owners, averaged slices all-gathered; "
                  "the same result, fewer bytes received at large P) or auto (per tensor and "
                  "step, whichever the previous step says receives fewer bytes)")
      ->capture_default_str();
  app->add_option("--summed-values", args->summed_values,
                  "the reduce-scatter's averaged slices on the wire: fp32 (exact, the "
                  "all-gather's result) or fp16 (binary16, about half the bytes once the sums "
                  "are dense; every learner takes the rounded values)")
      ->capture_default_str();
  app->add_option("--dense-below", o.codec.dense_below,
                  "send tensors of at most this many elements dense (float32 frames, no "
                  "residue) whatever the codec; 0 = off");
  app->add_option("--dense-warmup-steps", o.codec.dense_warmup_steps,
                  "exchange the first N steps dense (ring all-reduce, residues untouched); "
                  "0 = off");
  app->add_option("--clip-grad-norm", o.optim.clip_grad_norm,
                  "each learner scales its gradient to an L2 norm (over all tensors) of at "
                  "most this before the exchange, whatever the codec; 0 = off");
  app->add_flag("--local-optimizer,--momentum-correction", o.codec.local_optimizer,
                "each learner runs the optimizer's moments on its own gradient and compresses "
                "the step (SGD: its velocity, sent elements' velocity zeroed: momentum "
                "correction; Adam: its Adam step); the average is applied as plain SGD. Off = "
                "the paper's optimizer after aggregation");
  app->add_flag("--no-local-mask{false}", o.codec.local_mask,
                "with --local-optimizer and SGD: leave the velocity of sent elements as it is "
                "(every gradient's whole momentum reaches the weights), instead of zeroing it");
  app->add_option("--local-optimizer-types", args->local_optimizer_types,
                  "the local optimizer for these layer types' tensors only (e.g. fc,other; "
                  "implies --local-optimizer), the paper's optimizer after aggregation for the "
                  "others");
  app->add_option("--values", args->values,
                  "AdaComp values: ternary | fp16 | fp32; with --codec dense, fp16 "
                  "sends binary16 (a ring all-reduce of half the bytes), otherwise float32")
      ->capture_default_str();
  app->add_option("--density", o.codec.config.density, "topk density")->capture_default_str();
  app->add_option("--tau", o.codec.config.tau, "threshold tau")->capture_default_str();
  app->add_option("--seed", o.run.seed, "seed of init, shuffling and terngrad")
      ->capture_default_str();
  app->add_option("--threads", o.run.threads,
                  "learners computing at once (default: cores); results do not depend on it");
  app->add_option("--metrics-out", o.run.metrics_out, "JSONL file, one object per logged step");
  app->add_option("--link-counters", o.run.link_counters,
                  "IFACE: each metrics line also gets rank 0's host's rx/tx byte counters of "
                  "that network interface (link_rx_bytes, link_tx_bytes)");
  app->add_option("--diagnostics-out", o.run.diagnostics_out,
                  "JSONL file: rank 0's residue per tensor every --log-every steps (share "
                  "sent, scale vs |G| sent, residue and gradient norms, steps elements wait)");
  app->add_option("--summary-out", args->summary_out, "JSON file with the run summary");
  app->add_option(
      "--checkpoint-dir", o.run.checkpoint_dir,
      "write checkpoints here (every epoch, every --checkpoint-every steps, at the end)");
  app->add_option("--checkpoint-every", o.run.checkpoint_every, "steps between checkpoints");
  app->add_option("--keep-checkpoints", o.run.keep_checkpoints, "checkpoints kept")
      ->capture_default_str();
  app->add_flag("--resume", o.run.resume, "continue from the newest valid checkpoint");
  app->add_option("--log-every", o.run.log_every, "steps between metrics lines")
      ->capture_default_str();
  app->add_option("--eval-every", o.run.eval_every, "also evaluate every N steps");
  app->add_option("--stop-at-accuracy", o.run.stop_at_accuracy,
                  "end the run at the first evaluation reaching this test accuracy (0-1; "
                  "time-to-accuracy runs; the summary's reached_accuracy says when)")
      ->capture_default_str();
  app->add_option("--train-limit", o.run.train_limit, "use only the first N training examples");
  app->add_option("--test-limit", o.run.test_limit, "evaluate on the first N test examples");
  app->add_option("--max-bad-steps", o.run.max_bad_steps,
                  "consecutive non-finite-gradient steps (each skipped) before the run fails")
      ->capture_default_str();
  app->add_option("--seq-len", o.model.seq_len, "char-lstm sequence length")->capture_default_str();
  app->add_option("--hidden", o.model.hidden, "char-lstm hidden size")->capture_default_str();
  app->add_option("--embed", o.model.embed, "char-lstm embedding size")->capture_default_str();
  app->add_flag("--quiet,-q", args->quiet, "no progress lines");
  app->add_option("--mpi-timeout", args->mpi_timeout,
                  "under mpirun: seconds a collective waits for every rank")
      ->capture_default_str();
  app->add_option("--mpi-heartbeat", args->mpi_heartbeat,
                  "under mpirun: a peer silent this many seconds is taken for dead (killed, "
                  "stopped, or cut off) and named; a slow peer keeps beating; 0 = off")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  // Test hooks (hidden).
  app->add_option("--inject-nan", args->inject_nan,
                  "STEP:LEARNER:TENSOR: make that gradient non-finite (test hook)")
      ->group("");
  app->add_option("--stop-after-steps", args->hooks.stop_after_steps,
                  "return after N steps without finishing (test hook)")
      ->group("");
  app->add_option("--test-kill-rank", args->test_kill_rank,
                  "RANK:STEP: that learner's process kills itself (SIGKILL) as it starts the "
                  "0-based STEP (test hook)")
      ->group("");
  app->add_option("--test-stop-rank", args->test_stop_rank,
                  "RANK:STEP: that learner's process stops itself (SIGSTOP) as it starts the "
                  "0-based STEP (test hook)")
      ->group("");
  app->add_option("--test-slow-rank", args->test_slow_rank,
                  "RANK:MS: that learner sleeps MS milliseconds in every step's compute (a "
                  "straggler; test hook)")
      ->group("");
  app->add_option("--test-corrupt-frame", args->test_corrupt_frame,
                  "RANK:STEP: that learner flips one byte of its message at the 0-based STEP "
                  "(test hook; not with dense)")
      ->group("");
  Command c;
  c.app = app;
  c.run = [args] { return RunTrain(*args); };
  return {c};
}

}  // namespace adacomp::tool
