// src/train/run_checkpoint.h: saving and resuming a training run through
// the checkpoint container (checkpoint.h). Collective: every learner of the
// group calls these at the same step. Rank 0 reads and writes the files and
// broadcasts what it found, so every learner resumes from the same image or
// fails with rank 0's reason. Torch-free: weights and optimizer state come
// as bytes. Thread safety: one call per learner thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "adacomp/communicator.h"
#include "adacomp/exchange.h"
#include "adacomp/status.h"
#include "adacomp/trainer.h"
#include "checkpoint.h"
#include "totals.h"

namespace adacomp::train {

// The run's position and counters, as a checkpoint keeps them.
struct RunState {
  int64_t steps_done = 0, skipped = 0, consecutive_bad = 0;
  Totals run_totals, epoch_totals;
  double epoch_loss_sum = 0;
  int64_t epoch_loss_count = 0;
};

// The compressor states of one learner's exchange, as one record:
// {uint64 count, each SaveState() length-prefixed}; and its inverse, which
// checks the count and names the learner and tensor of a bad state.
std::vector<uint8_t> CompressorStates(const GradientExchange& exchange);
Status LoadCompressorStates(std::span<const uint8_t> bytes, int rank, GradientExchange& exchange);

// Writes the checkpoint of step state.steps_done: every learner's
// compressor states are gathered; rank 0 adds the state and its weights and
// optimizer state (asked for only there) and writes the file, keeping the
// newest o.keep_checkpoints. Every learner returns rank 0's outcome.
Status SaveRunCheckpoint(Communicator& comm, const TrainOptions& o, const std::string& fingerprint,
                         int64_t steps_per_epoch, const RunState& state,
                         std::span<const uint8_t> compressor_states,
                         const std::function<std::vector<uint8_t>()>& weights,
                         const std::function<std::vector<uint8_t>()>& optimizer);

// A checkpoint read back: its records, the run state, and this learner's
// parts of it (spans into view).
struct LoadedCheckpoint {
  std::optional<CheckpointView> view;
  RunState state;
  std::span<const uint8_t> weights, optimizer, compressors;
};

// Rank 0 looks for the newest valid checkpoint in o.checkpoint_dir (older
// ones are tried when the newest does not parse; one written with other
// settings, per the fingerprint, is an error) and broadcasts it. *found is
// false when there is none (the run starts at step 0). `message` gets the
// warnings and notes (rank 0).
Status LoadRunCheckpoint(Communicator& comm, const TrainOptions& o, const std::string& fingerprint,
                         int64_t steps_per_epoch,
                         const std::function<void(const std::string&)>& message,
                         LoadedCheckpoint* out, bool* found);

}  // namespace adacomp::train
