// src/train/summary.h: the end of a run, torch-free: every learner reports
// its weights and state digests, its time split and its communicator's
// traffic, and every learner folds the reports into the run summary (the
// replicas' agreement, the mean time split, bytes on the wire per step).
// Collective: every learner calls it once, after its last step.
// Thread safety: one call per learner thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "adacomp/communicator.h"
#include "adacomp/status.h"
#include "adacomp/trainer.h"
#include "totals.h"

namespace adacomp::train {

// One learner's end-of-run report.
struct LearnerReport {
  std::string weights_sha256, state_sha256;  // 64 hex digits each
  double compute = 0, compress = 0, communicate = 0, decompress = 0, update = 0;  // seconds
  uint64_t transport_sent = 0, transport_received = 0;  // bytes, this run's steps
};

// Gathers every learner's report (`steps_ran`: the steps this process ran,
// for the per-step traffic) into s: learner_weights_sha256,
// learner_state_sha256, replicas_identical (against mine), the *_seconds
// means and transport_*_per_step.
// The fields of s that the (resolved) options decide: model, codec, values
// (fp16 for the half all-reduce), optimizer, learners, batch size, lr, seed,
// bin size, dense_below and dense_warmup_steps.
void FillSettings(const TrainOptions& o, TrainSummary* s);

// Rank 0's first line: what is trained on what, how.
std::string StartLine(const TrainOptions& o, int64_t parameters, int64_t tensors,
                      const std::string& data, int64_t train_examples, int64_t test_examples,
                      int64_t total_steps, int64_t steps_per_epoch);

// What a learner knows of its run at its end, for the summary.
struct RunFacts {
  std::string data;  // the data set's description
  int64_t steps_done = 0, skipped = 0, resumed_from = -1, steps_per_epoch = 1;
  bool dense_warmup_ran = false;  // a dense warm-up exchange existed
  int64_t dense_tensors = 0, parameters = 0, tensors = 0;
  int64_t train_examples = 0, test_examples = 0;
  int64_t lightened_tensor_steps = 0;
  // Compressed tensors x steps by each exchange (this process's steps).
  int64_t allgather_tensor_steps = 0, reduce_scatter_tensor_steps = 0;
  int64_t auto_dense_steps = 0, auto_codec_steps = 0;  // --codec auto
  std::vector<std::string> auto_choices;
  double final_train_loss = 0, wall_seconds = 0;
  Totals totals;                       // over the steps of this process's run
  bool present[kLayerTypeCount] = {};  // the model's layer types
  std::string weights_sha256;          // this learner's final weights
  std::vector<EpochMetrics> epochs;    // every evaluation
  bool stopped_early = false;
  int64_t reached_step = -1;  // stop_at_accuracy reached here; -1 = not
};

// The run's own figures into s (counts, rates, bytes, time per step, the
// evaluations, time to accuracy); the settings come from FillSettings and
// the learners' agreement from GatherReports.
void FillRunSummary(const RunFacts& f, TrainSummary* s);

Status GatherReports(Communicator& comm, const LearnerReport& mine, int64_t steps_ran,
                     TrainSummary* s);

}  // namespace adacomp::train
